"""``torchlime.compat.captum``: every argument checked before ``forward_func`` runs, in captum's words.

Each refusal names captum's argument and is raised before the model is called (a model that counts
its calls); what only the model's output shows is a clear error too, never a torchlime name.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("captum", reason="captum is a test extra: pip install -e '.[test]'")
pytest.importorskip("sklearn", reason="captum's SkLearnLasso needs scikit-learn")

from captum.attr import KernelShap as CaptumKernelShap  # noqa: E402
from captum.attr import Lime as CaptumLime  # noqa: E402

from torchlime import UnreliableExplanationWarning  # noqa: E402
from torchlime.compat._vocabulary import reword_quality  # noqa: E402
from torchlime.compat.captum import KernelShap, Lime, TargetError  # noqa: E402

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
CLASSES = [Lime, KernelShap]


class Counting(torch.nn.Module):
    """A tiny linear model (3 -> 2) that counts its calls."""

    def __init__(self, transform=None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 2)
        self.calls = 0
        self.transform = transform

    def forward(self, x):
        self.calls += 1
        out = self.linear(x)
        return out if self.transform is None else self.transform(out)


def attribute(cls, model, inputs=X[:1], **kw):
    kw.setdefault("target", 0)
    kw.setdefault("n_samples", 8)
    return cls(model).attribute(inputs, **kw)


REFUSED = [
    # (id, inputs, keywords, error, match)
    ("list", [[1.0, 2.0, 3.0]], {}, TypeError, "`inputs` must be a tensor"),
    ("numpy", np.ones((1, 3), np.float32), {}, TypeError, "`inputs` must be a tensor"),
    ("string", "x", {}, TypeError, "`inputs` must be a tensor"),
    ("empty_tuple", (), {}, TypeError, "`inputs` must be a tensor"),
    ("empty_batch", X[:0], {}, ValueError, r"`inputs` must hold at least one example.*\(0, 3\)"),
    ("0d", torch.tensor(1.0), {}, ValueError, "`inputs` must be batches"),
    ("uneven_tuple", (X, X[:1]), {}, ValueError, r"`inputs` .*same batch size.*\[\(2, 3\), \(1, 3\)\]"),
    ("nan", torch.tensor([[float("nan"), 1.0, 2.0]]), {}, ValueError, "`inputs` must be finite"),
    ("inf", torch.tensor([[float("inf"), 1.0, 2.0]]), {}, ValueError, "`inputs` must be finite"),
    ("n0", X[:1], dict(n_samples=0), ValueError, "`n_samples` must be an int >= 2.*got 0"),
    ("n1", X[:1], dict(n_samples=1), ValueError, "`n_samples` must be an int >= 2.*got 1"),
    ("n_negative", X[:1], dict(n_samples=-5), ValueError, "`n_samples` must be an int >= 2.*got -5"),
    ("n_float", X[:1], dict(n_samples=2.5), TypeError, "`n_samples` must be an int"),
    ("n_string", X[:1], dict(n_samples="10"), TypeError, "`n_samples` must be an int"),
    ("ppe0", X[:1], dict(perturbations_per_eval=0), ValueError, "`perturbations_per_eval` must be an int >= 1"),
    ("target_negative", X[:1], dict(target=-1), ValueError, "`target` must be >= 0"),
    ("target_float", X[:1], dict(target=1.5), TypeError, "`target` must be None, an int"),
    ("target_string", X[:1], dict(target="0"), TypeError, "`target` must be None, an int"),
    ("target_bool", X[:1], dict(target=True), TypeError, "`target` must be None, an int"),
    ("target_tuple", X[:1], dict(target=(0, 1)), TypeError, "`target` tuples"),
    ("target_float_tensor", X[:1], dict(target=torch.tensor([0.0])), TypeError, "`target` must hold integer"),
    ("target_list_length", X, dict(target=[0, 1, 0]), ValueError, r"`target` must give one output column.*\(2\)"),
    ("target_list_floats", X, dict(target=[0.0, 1.0]), TypeError, "`target` list must hold ints"),
    ("no_elements", torch.zeros(1, 0), {}, ValueError, "`inputs` must give at least 2 elements.*got 0"),
    ("one_feature", X[:1], dict(feature_mask=torch.zeros(1, 3, dtype=torch.long)), ValueError,
     "`feature_mask` must give at least 2 features.*got 1"),
    ("mask_empty", torch.zeros(1, 0), dict(feature_mask=torch.zeros(1, 0, dtype=torch.long)), ValueError,
     "`feature_mask` must give at least 2 features.*got 0"),
    ("mask_float", X[:1], dict(feature_mask=torch.tensor([[0.0, 1.0, 2.0]])), TypeError,
     "`feature_mask` must hold integer"),
    ("mask_list", X[:1], dict(feature_mask=[[0, 1, 2]]), TypeError, "`feature_mask` must be a tensor"),
    ("mask_shape", X[:1], dict(feature_mask=torch.tensor([[0, 1]])), ValueError,
     r"`feature_mask` must broadcast.*\(1, 3\).*\(1, 2\)"),
    ("baselines_string", X[:1], dict(baselines="zero"), TypeError, "`baselines` must be numbers or tensors"),
    ("baselines_list", X[:1], dict(baselines=[0.0, 0.0, 0.0]), TypeError, "`baselines` must be numbers or tensors"),
    ("baselines_nan", X[:1], dict(baselines=float("nan")), ValueError, "`baselines` must be finite"),
    ("baselines_nan_tensor", X[:1], dict(baselines=torch.tensor([[0.0, float("nan"), 0.0]])), ValueError,
     "`baselines` must be finite"),
    ("baselines_shape", X[:1], dict(baselines=torch.zeros(1, 4)), ValueError, r"`baselines` tensors must broadcast"),
    ("baselines_count", X[:1], dict(baselines=(0.0, 1.0)), ValueError, r"`baselines` must have one entry per input"),
]  # fmt: skip


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_before_the_model_runs(cls, case):
    _, inputs, kw, error, match = case
    model = Counting()
    with pytest.raises(error, match=match):
        attribute(cls, model, inputs, **kw)
    assert model.calls == 0


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
@pytest.mark.parametrize("bsz", [1, 2])
def test_missing_target_with_two_outputs_raises_as_captum(cls, bsz):
    """Captum asserts (AssertionError) on target=None with 2 outputs per example; TargetError is also a ValueError."""
    theirs = {Lime: CaptumLime, KernelShap: CaptumKernelShap}[cls]
    with pytest.raises(AssertionError):
        theirs(Counting()).attribute(X[:bsz], n_samples=4)
    model = Counting()
    with pytest.raises(TargetError, match=r"`target` must be given: forward_func returns 2 values per example"):
        attribute(cls, model, X[:bsz], target=None)
    assert issubclass(TargetError, ValueError) and issubclass(TargetError, AssertionError)
    assert model.calls == 1  # captum's probe of the unperturbed batch, no sample


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_an_example_with_one_feature_is_refused_before_any_sample(cls):
    model = Counting()
    mask = torch.tensor([[0, 0, 0], [0, 1, 2]])
    with pytest.raises(ValueError, match=r"`feature_mask` must give every example at least 2 features.*\[0\]"):
        attribute(cls, model, X, feature_mask=mask)
    assert model.calls == 1  # captum's probe of the batch (one value per batch or per example?), no sample


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_target_for_a_model_returning_one_value_per_batch(cls):
    model = Counting(lambda out: out.sum())
    with pytest.raises(TargetError, match="`target` must be None when forward_func returns one value per batch"):
        attribute(cls, model, X, target=0)
    assert model.calls == 1


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
@pytest.mark.parametrize(
    "transform, error, match",
    [
        (lambda out: out * float("nan"), ValueError, "forward_func returned non-finite outputs.*forward_func and"),
        (lambda out: out[:1].repeat(3, 1), ValueError, "forward_func"),
        (lambda out: out.reshape(-1), ValueError, "forward_func"),
    ],
    ids=["nan", "rows", "flat"],
)
def test_a_bad_model_output_is_a_clear_error(cls, transform, error, match):
    with pytest.raises(error, match=match) as info:
        attribute(cls, Counting(transform), X[:1], perturbations_per_eval=2)
    assert "`output=`" not in str(info.value) and "the model" not in str(info.value)


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_a_per_example_forward_func_is_told_captum_s_argument(cls):
    w = torch.arange(3.0)
    per_example = lambda x: (x[0] * w).sum()  # noqa: E731  one number: right for captum's one row per call
    with pytest.raises(ValueError, match=r"or pass perturbations_per_eval=1 so that every row") as info:
        cls(per_example).attribute(X[:1], n_samples=20)
    assert "batch_size" not in str(info.value)
    assert cls(per_example).attribute(X[:1], n_samples=20, perturbations_per_eval=1).shape == X[:1].shape


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_target_out_of_range_names_target(cls):
    with pytest.raises(ValueError, match=r"`target` must be in \[0, 2\) for a forward_func with 2 outputs, got 5"):
        attribute(cls, Counting(), X[:1], target=5)


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_a_model_that_raises_propagates_its_error(cls):
    def broken(x):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        attribute(cls, broken, X[:1])


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_integer_inputs_refused_by_a_float_model_name_inputs(cls, dtype):
    """Captum passes integer inputs as they are and the model fails; here the error names `inputs`."""
    with pytest.raises(TypeError, match=rf"`inputs` of dtype {dtype} reach forward_func as they are"):
        attribute(cls, Counting(), torch.tensor([[1, 0, 1]], dtype=dtype))


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_integer_inputs_reach_an_embedding_model_as_in_captum(cls):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(10, 2), torch.nn.Flatten(), torch.nn.Linear(6, 2))
    ids = torch.tensor([[1, 5, 7]])
    out = []
    for impl in (cls, {Lime: CaptumLime, KernelShap: CaptumKernelShap}[cls]):
        torch.manual_seed(1)
        out.append(impl(net).attribute(ids, target=1, n_samples=12, baselines=0))
    assert out[0].dtype == torch.float32
    torch.testing.assert_close(out[0], out[1], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_float64_inputs_take_the_models_dtype(cls):
    model = Counting()
    torch.manual_seed(2)
    single = attribute(cls, model, X)
    torch.manual_seed(2)
    double = attribute(cls, model, X.double())
    assert double.dtype == torch.float32 and bool(torch.isfinite(double).all())
    torch.testing.assert_close(double, single, atol=1e-4, rtol=1e-4)


@pytest.mark.filterwarnings("ignore:You are providing multiple inputs")  # captum's own
@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_a_list_target_is_one_column_per_example_as_in_captum(cls):
    theirs = {Lime: CaptumLime, KernelShap: CaptumKernelShap}[cls]
    out = []
    for impl, target in ((theirs, [1, 0]), (cls, [1, 0]), (cls, torch.tensor([1, 0]))):
        torch.manual_seed(3)
        out.append(impl(Counting()).attribute(X, target=target, n_samples=12))
    torch.testing.assert_close(out[1], out[0], atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(out[2], out[0], atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_a_batch_gives_no_multiple_inputs_warning(cls):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attribute(cls, Counting(), X)
    assert not [w for w in caught if "multiple inputs" in str(w.message)]


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_nothing_is_modified_in_place(cls):
    inputs, mask = X.clone(), torch.tensor([[0, 1, 1]])
    base, target = torch.tensor([[0.5, 0.5, 0.5]]), torch.tensor([1, 0])
    kept = [t.clone() for t in (inputs, mask, base, target)]
    out = attribute(cls, Counting(), inputs, feature_mask=mask, baselines=base, target=target)
    assert out.shape == inputs.shape and bool(torch.isfinite(out).all())
    for now, before in zip((inputs, mask, base, target), kept):
        assert torch.equal(now, before)


@pytest.mark.parametrize("cls", CLASSES, ids=["lime", "kernel_shap"])
def test_saturated_outputs_warn_in_captums_words(cls):
    model = Counting(lambda out: torch.zeros_like(out))
    with pytest.warns(UnreliableExplanationWarning, match="forward_func's outputs barely vary") as record:
        attribute(cls, model, X[:1])
    assert not any("softmax" in str(w.message) for w in record)


def test_quality_advice_in_captums_words():
    text = (
        "unreliable explanation: outputs barely vary (a saturated probability? explain logits: softmax=False) for "
        "input(s) [1]; fewer effective samples (Kish) than features (more samples or a wider kernel) for input(s) [0]"
        " (see torchlime.engine.quality)"
    )
    said = reword_quality(text, Lime.advice, per_input=True)
    assert said is not None and "softmax" not in said and "wider kernel" not in said
    assert "barely vary over the samples" in said and "example(s) [1]" in said and "raise n_samples" in said
    shap = reword_quality(text, KernelShap.advice, per_input=True)
    assert shap is not None and "n_samples" not in shap  # KernelShap's weights are not the engine kernel's
    assert reword_quality("some other message", Lime.advice, per_input=True) == "some other message"


def test_quality_advice_holding_semicolons_and_data_set_indices():
    text = (
        "unreliable explanation: outputs barely vary under perturbation (the model ignores these features, or its "
        "output is saturated: explain logits rather than probabilities; check the fill is not the input itself) for "
        "input(s) [0, 1] (data-set index [7, 9]); weighted R² below 0.1 for input(s) [1] (data-set index [9])"
        " (see torchlime.engine.quality)"
    )
    said = reword_quality(text, Lime.advice, per_input=True)
    assert said == (
        "unreliable explanation: forward_func's outputs barely vary over the samples (a saturated probability? "
        "attribute the logits) for example(s) [0, 1] (data-set index [7, 9]); a linear surrogate explains under "
        "10% of forward_func's output variation (weighted R² < 0.1) for example(s) [1] (data-set index [9])"
    )
