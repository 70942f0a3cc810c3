"""``torchlime.compat.captum``: captum's own Lime and KernelShap test scenarios, with captum's expected values
and tolerances (its tests/attr/test_lime.py and test_kernel_shap.py, run the way its harness runs them: seed
1234, the perturbations_per_eval values in turn without reseeding), and captum's output itself."""

from __future__ import annotations

import io
import random
import sys
from unittest import mock

import numpy as np
import pytest
import torch

captum = pytest.importorskip("captum", reason="captum is a test extra: pip install -e '.[test]'")
pytest.importorskip("sklearn", reason="captum's SkLearnLasso needs scikit-learn")

from captum._utils.models.linear_model import SGDLasso, SGDRidge, SkLearnLasso, SkLearnLinearRegression  # noqa: E402
from captum.attr import KernelShap as CaptumKernelShap  # noqa: E402
from captum.attr import Lime as CaptumLime  # noqa: E402
from captum.attr._core.lime import get_exp_kernel_similarity_function  # noqa: E402
from captum.testing.helpers.basic_models import (  # noqa: E402
    BasicLinearModel,
    BasicModel_MultiLayer,
    BasicModel_MultiLayer_MultiInput,
    BasicModelBoolInput,
)

from torchlime.compat.captum import KernelShap, Lime  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
T = torch.tensor


def seed_all(seed: int = 1234) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def close(actual, expected, delta: float) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        e = torch.as_tensor(e, dtype=torch.float32)
        assert a.shape == e.shape, (a.shape, e.shape)
        if e.numel():
            assert (a - e).abs().max() <= delta, f"{a} vs {e} (delta {delta})"


MULTI = (T([[23.0, 100.0, 0.0], [20.0, 50.0, 30.0]]), T([[20.0, 50.0, 30.0], [0.0, 100.0, 0.0]]))
MULTI_MASK = (T([[1, 1, 1], [0, 1, 0]]), T([[0, 1, 2]]), T([[0, 1, 2], [0, 0, 0]]))

# (id, model, inputs, expected, kwargs, coefs_only)
LIME = [
    ("L1", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[73.3716, 193.3349, 113.3349]],
     dict(n_samples=500, ppe=(1, 2, 3)), [[73.3716, 193.3349, 113.3349]]),
    ("L3", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[271.0, 271.0, 111.0]],
     dict(feature_mask=T([[0, 0, 1]]), n_samples=500, ppe=(1, 2, 3)), [[271.0, 111.0]]),
    ("L4", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[244.0, 244.0, 100.0]],
     dict(feature_mask=T([[0, 0, 1]]), baselines=4, ppe=(1, 2, 3)), [[244.0, 100.0]]),
    ("L5", BasicModelBoolInput, T([[True, False, True]]), [[31.42, 31.42, 30.90]],
     dict(feature_mask=T([[0, 0, 1]]), ppe=(1, 2, 3)), None),
    ("L6", BasicModelBoolInput, T([[True, False, True]]), [[-36.0, -36.0, 0.0]],
     dict(feature_mask=T([[0, 0, 1]]), baselines=True, ppe=(1, 2, 3)), None),
    ("L8", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0], [10.0, 14.0, 4.0]]),
     [[73.4450, 193.5979, 113.4363], [32.11, 48.00, 11.00]], dict(n_samples=800, ppe=(1, 2, 3)),
     [[73.4450, 193.5979, 113.4363], [32.11, 48.00, 11.00]]),
    ("L9", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0], [10.0, 14.0, 4.0]]),
     [[271.0, 271.0, 111.0], [32.11, 48.00, 11.00]],
     dict(feature_mask=T([[0, 0, 1], [0, 1, 2]]), n_samples=600, ppe=(1, 2, 3)),
     [[271.0, 111.0, 0.0], [32.11, 48.00, 11.00]]),
    ("L10", BasicModel_MultiLayer_MultiInput, (T([[23.0, 0, 0]]), T([[20.0, 0, 50.0]]), T([[0, 100.0, 10.0]])),
     ([[87, 0, 0]], [[75, 0, 195]], [[0, 395, 35]]), dict(add=(1,), n_samples=2000),
     [[87, 0, 0, 75, 0, 195, 0, 395, 35]]),
    ("L11a", BasicModel_MultiLayer_MultiInput, (T([[20.0, 50.0, 30.0]]), T([[0.0, 100.0, 0.0]]), T([[2.0, 10.0, 3.0]])),
     ([[251.0, 591.0, 251.0]], [[251.0, 591.0, 0.0]], [[251.0, 251.0, 251.0]]),
     dict(feature_mask=(T([[0, 1, 0]]), T([[0, 1, 2]]), T([[0, 0, 0]])), add=(1,), n_samples=500),
     [[251.0, 591.0, 0.0]]),
    ("L11b", BasicModel_MultiLayer_MultiInput, (T([[20.0, 50.0, 30.0]]), T([[0.0, 100.0, 0.0]]), T([[2.0, 10.0, 3.0]])),
     ([[180, 576.0, 180]], [[180, 576.0, -8.0]], [[180, 180, 180]]),
     dict(feature_mask=(T([[0, 1, 0]]), T([[0, 1, 2]]), T([[0, 0, 0]])), baselines=(2, 3.0, 4), add=(1,),
          n_samples=500, ppe=(1, 2, 3)), [[180, 576.0, -8.0]]),
    ("L13", BasicModel_MultiLayer_MultiInput,
     (T([[23.0, 0, 0], [20.0, 50.0, 30.0]]), T([[20.0, 0, 50.0], [0, 100.0, 0]]), T([[0, 100.0, 10.0], [0, 10.0, 0]])),
     ([[87.8777, 0, 0], [75.8461, 195.6842, 115.3390]], [[74.7283, 0, 195.1708], [0, 395.3823, 0]],
      [[0, 395.5216, 35.5530], [0, 35.1349, 0]]), dict(add=(1,), n_samples=1000, delta=1.2),
     [[87.8777, 0, 0, 74.7283, 0, 195.1708, 0, 395.5216, 35.5530],
      [75.8461, 195.6842, 115.3390, 0, 395.3823, 0, 0, 35.1349, 0]]),
    ("L14a", BasicModel_MultiLayer_MultiInput, (*MULTI, T([[0, 100.0, 10.0], [2.0, 10.0, 3.0]])),
     ([[1086.2802] * 3, [250.8907, 590.9789, 250.8907]], [[73.2166, 1086.2802, 152.6888], [250.8907, 590.9789, 0]],
      [[73.2166, 1086.2802, 152.6888], [250.8907] * 3]), dict(feature_mask=MULTI_MASK, add=(1,)), None),
    ("L14b", BasicModel_MultiLayer_MultiInput, (*MULTI, T([[0, 100.0, 10.0], [2.0, 10.0, 3.0]])),
     ([[1036.4233] * 3, [180.3035, 575.8969, 180.3035]],
      [[48.2441, 1036.4233, 128.3161], [180.3035, 575.8969, -8.3229]],
      [[48.2441, 1036.4233, 128.3161], [180.3035] * 3]),
     dict(feature_mask=MULTI_MASK, baselines=(2, 3.0, 4), add=(1,), n_samples=500, ppe=(1, 2, 3)),
     [[48.2441, 1036.4233, 128.3161], [180.3035, 575.8969, -8.3229]]),
]  # fmt: skip

KSHAP = [
    ("K1", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[40.0, 120.0, 80.0]],
     dict(baselines=T([[10.0, 20.0, 10.0]]), n_samples=500), [[40.0, 120.0, 80.0]]),
    ("K2", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[76.66666, 196.66666, 116.66666]],
     dict(n_samples=500, ppe=(1, 2, 3)), None),
    ("K3", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[275.0, 275.0, 115.0]],
     dict(feature_mask=T([[0, 0, 1]]), ppe=(1, 2, 3)), [[275.0, 115.0]]),
    ("K5", BasicModel_MultiLayer, T([[20.0, 50.0, 30.0]]), [[248.0, 248.0, 104.0]],
     dict(feature_mask=T([[0, 0, 1]]), baselines=4, ppe=(1, 2, 3)), None),
    ("K6", BasicModel_MultiLayer, T([[2.0, 10.0, 3.0], [20.0, 50.0, 30.0]]),
     [[7.0, 32.5, 10.5], [76.66666, 196.66666, 116.66666]], dict(n_samples=2000, ppe=(1, 2, 3)), None),
    ("K7", BasicModel_MultiLayer, T([[2.0, 10.0, 3.0], [20.0, 50.0, 30.0]]),
     [[39.5, 39.5, 10.5], [275.0, 275.0, 115.0]],
     dict(feature_mask=T([[0, 0, 1], [1, 1, 0]]), ppe=(1, 2, 3)), [[39.5, 10.5], [115.0, 275.0]]),
    ("K8", BasicModel_MultiLayer_MultiInput, (T([[23.0, 0, 0]]), T([[20.0, 0, 50.0]]), T([[0, 100.0, 10.0]])),
     ([[90, 0, 0]], [[78, 0, 198]], [[0, 398, 38]]), dict(add=(1,), n_samples=2000), None),
    ("K9b", BasicModel_MultiLayer_MultiInput, (T([[20.0, 50.0, 30.0]]), T([[0.0, 100.0, 0.0]]), T([[2.0, 10.0, 3.0]])),
     ([[184, 580.0, 184]], [[184, 580.0, -12.0]], [[184, 184, 184]]),
     dict(feature_mask=(T([[0, 1, 0]]), T([[0, 1, 2]]), T([[0, 0, 0]])), baselines=(2, 3.0, 4), add=(1,),
          ppe=(1, 2, 3)), None),
    ("K11", BasicModel_MultiLayer_MultiInput,
     (T([[23.0, 0, 0], [20.0, 50.0, 30.0]]), T([[20.0, 0, 50.0], [0, 100.0, 0]]), T([[0, 100.0, 10.0], [0, 10.0, 0]])),
     ([[90, 0, 0], [78, 198, 118]], [[78, 0, 198], [0, 398, 0]], [[0, 398, 38], [0, 38, 0]]),
     dict(add=(1,), n_samples=2500), [[90, 0, 0, 78, 0, 198, 0, 398, 38], [78, 198, 118, 0, 398, 0, 0, 38, 0]]),
    ("K12a", BasicModel_MultiLayer_MultiInput, (*MULTI, T([[0, 100.0, 10.0], [2.0, 10.0, 3.0]])),
     ([[1088.6666] * 3, [255.0, 595.0, 255.0]], [[76.6666, 1088.6666, 156.6666], [255.0, 595.0, 0.0]],
      [[76.6666, 1088.6666, 156.6666], [255.0] * 3]), dict(feature_mask=MULTI_MASK, add=(1,), n_samples=300), None),
]  # fmt: skip


def run(cls, model, inputs, kwargs, return_input_shape=True, ppe=1, show_progress=False):
    make = (
        (lambda m: cls(m, similarity_func=get_exp_kernel_similarity_function("cosine", 10.0),
                       interpretable_model=SkLearnLasso(alpha=1.0)))
        if cls in (Lime, CaptumLime) else cls
    )  # fmt: skip
    return make(model).attribute(
        inputs,
        baselines=kwargs.get("baselines"),
        target=kwargs.get("target", 0),
        additional_forward_args=kwargs.get("add"),
        feature_mask=kwargs.get("feature_mask"),
        n_samples=kwargs.get("n_samples", 100),
        perturbations_per_eval=ppe,
        return_input_shape=return_input_shape,
        show_progress=show_progress,
    )


@pytest.mark.parametrize("case", LIME, ids=[c[0] for c in LIME])
def test_lime_scenarios_of_captum(case):
    _, net, inputs, expected, kwargs, coefs = case
    seed_all()
    model, delta = net(), kwargs.get("delta", 1.0)
    for ppe in kwargs.get("ppe", (1,)):  # captum's harness: no reseeding between the steps
        close(
            run(Lime, model, inputs, kwargs, ppe=ppe),
            tuple(map(T, expected)) if isinstance(expected, tuple) else T(expected),
            delta,
        )
        if coefs is not None:
            close(run(Lime, model, inputs, kwargs, return_input_shape=False, ppe=ppe), T(coefs), delta)


@pytest.mark.parametrize("case", KSHAP, ids=[c[0] for c in KSHAP])
def test_kernel_shap_scenarios_of_captum(case):
    _, net, inputs, expected, kwargs, coefs = case
    seed_all()
    model = net()
    for ppe in kwargs.get("ppe", (1,)):
        close(
            run(KernelShap, model, inputs, kwargs, ppe=ppe),
            tuple(map(T, expected)) if isinstance(expected, tuple) else T(expected),
            1.0,
        )
        if coefs is not None:
            seed_all()
            close(run(KernelShap, model, inputs, kwargs, return_input_shape=False, ppe=ppe), T(coefs), 1.0)


@pytest.mark.parametrize(
    "ours, theirs", [(Lime, CaptumLime), (KernelShap, CaptumKernelShap)], ids=["lime", "kernel_shap"]
)
@pytest.mark.parametrize("case", ["single", "batch_mask", "multi"])
def test_the_same_samples_as_captum_after_the_same_seed(ours, theirs, case):
    """Same global seed -> captum's masks, so the numbers agree far inside the tolerance (up to the solver)."""
    if case == "single":
        model, inputs, kw = BasicModel_MultiLayer(), T([[20.0, 50.0, 30.0]]), dict(n_samples=300)
    elif case == "batch_mask":
        model, inputs = BasicModel_MultiLayer(), T([[2.0, 10.0, 3.0], [20.0, 50.0, 30.0]])
        kw = dict(feature_mask=T([[0, 0, 1], [1, 1, 0]]), n_samples=200)
    else:
        model, inputs = BasicModel_MultiLayer_MultiInput(), (*MULTI, T([[0, 100.0, 10.0], [2.0, 10.0, 3.0]]))
        kw = dict(feature_mask=MULTI_MASK, add=(1,), n_samples=200)
    out = []
    for cls in (theirs, ours):
        seed_all()
        out.append([run(cls, model, inputs, kw, return_input_shape=False) for _ in range(2)])  # 2nd: stream continues
    for a, b in zip(*out):
        torch.testing.assert_close(b, a, atol=2e-2, rtol=1e-4)


@pytest.mark.parametrize("cls", [Lime, KernelShap])
@pytest.mark.parametrize("kind", ["float", "tensor_0d", "tensor_1d", "int"])
def test_scalar_outputs_as_captum(cls, kind):
    net = BasicModel_MultiLayer()
    to = {
        "float": lambda v: v.item(), "tensor_0d": lambda v: v, "tensor_1d": lambda v: v.reshape(1),
        "int": lambda v: int(v.item()),
    }[kind]  # fmt: skip
    seed_all()
    one = run(
        cls,
        lambda x: to(torch.sum(net(x))),
        T([[2.0, 10.0, 3.0]]),
        dict(feature_mask=T([[0, 0, 1]]), target=None, n_samples=700 if cls is Lime else 100),
    )
    close(one, T([[75.0, 75.0, 17.0]] if cls is Lime else [[79.0, 79.0, 21.0]]), 1.0)
    multi = BasicModel_MultiLayer_MultiInput()
    inputs = (*MULTI, T([[0, 100.0, 10.0], [20.0, 10.0, 13.0]]))
    mask = (T([[1, 1, 1]]), T([[0, 1, 2]]), T([[0, 1, 2]]))
    seed_all()
    whole = run(
        cls,
        lambda *x: to(torch.sum(multi(*x))),
        inputs,
        dict(feature_mask=mask, add=(1,), target=None, n_samples=1500),
        return_input_shape=False,
    )
    expected = [[305.5, 3850.6666, 410.1]] if cls is Lime else [[306.6666, 3850.6666, 410.6666]]
    close(whole, T(expected), 1.5 if cls is Lime else 1.0)


def test_empty_input_in_a_tuple():
    torch.manual_seed(1234)
    net = BasicLinearModel()
    seed_all()
    out = run(KernelShap, net, (T([[23.0, 0, 0, 23.0, 0, 0, 23.0]]), torch.tensor([[]])), dict(n_samples=2000))
    close(out, (T([[-8.0, 0, 0, -2.0, 0, 0, -8.0]]), torch.tensor([[]])), 1.0)


@pytest.mark.parametrize("cls, name", [(Lime, "Lime"), (KernelShap, "Kernel Shap")])
def test_show_progress_ends_at_100_percent(cls, name):
    err = io.StringIO()
    with mock.patch.object(sys, "stderr", err):
        for ppe in (1, 2, 3):
            seed_all()
            run(cls, BasicModel_MultiLayer(), T([[20.0, 50.0, 30.0]]), dict(n_samples=500), ppe=ppe, show_progress=True)
            assert f"{name} attribution: 100%" in err.getvalue()
            err.seek(0)
            err.truncate()


def test_captum_interface_and_refusals():
    lime = Lime(BasicModel_MultiLayer())
    assert not lime.has_convergence_delta() and Lime.get_name() == "Lime" and KernelShap.get_name() == "Kernel Shap"
    with pytest.raises(NotImplementedError):
        lime.attribute_future()
    with pytest.raises(TypeError, match="perturb_func.*sampler="):
        Lime(BasicModel_MultiLayer(), perturb_func=lambda x, **kw: x)
    with pytest.raises(TypeError, match="similarity_func.*ExponentialKernel"):
        Lime(BasicModel_MultiLayer(), similarity_func=lambda a, b, c, **kw: 1.0)
    with pytest.raises(TypeError, match="interpretable_model.*torchlime.Ridge"):
        Lime(BasicModel_MultiLayer(), interpretable_model=object())
    sgd = Lime(BasicModel_MultiLayer(), interpretable_model=SGDLasso(alpha=0.5))
    assert sgd.surrogate.alpha == 0.5  # captum's SGD fit of the same objective, solved exactly
    assert isinstance(sgd.interpretable_model, SGDLasso) and sgd.similarity_func is None and sgd.perturb_func is None
    for changed in (SkLearnLasso(alpha=0.01, positive=True), SkLearnLinearRegression(fit_intercept=False)):
        with pytest.raises(ValueError, match=r"`interpretable_model` SkLearn\w+\((positive|fit_intercept)=\w+\) fits"):
            Lime(BasicModel_MultiLayer(), interpretable_model=changed)
    with pytest.raises(ValueError, match=r"SGDRidge\(bias=False\)"):
        Lime(BasicModel_MultiLayer(), interpretable_model=SGDRidge(bias=False))
    with pytest.raises(ValueError, match="perturbations_per_eval"):
        Lime(lambda x: torch.sum(x)).attribute(T([[1.0, 2.0], [3.0, 4.0]]), perturbations_per_eval=2)
