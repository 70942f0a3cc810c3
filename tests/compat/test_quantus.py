"""``torchlime.compat.quantus``: Quantus's own numbers (quantus as the oracle) where both define a metric alike,
a slow reference of torchlime's definition where they differ, Quantus's return structures, the errors, and
the module importing without quantus."""

from __future__ import annotations

import copy
import importlib.util
import sys
import warnings

import numpy as np
import pytest
import torch

import torchlime.compat.quantus as tq


@pytest.fixture(scope="module")
def quantus():
    module = pytest.importorskip("quantus", reason="quantus is optional: pip install quantus")
    warnings.filterwarnings("ignore", module="quantus")
    return module


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 64, 5)
    ).eval()
    rng = np.random.default_rng(0)
    x = rng.random((4, 3, 8, 8)).astype(np.float32)
    return net, x, np.array([0, 1, 2, 3]), rng.standard_normal((4, 3, 8, 8))  # float64: no ties


def saliency(model, inputs, targets, **kwargs):
    """A Quantus-style explain_func: the gradient of each input's target, NumPy in and out."""
    x = torch.as_tensor(inputs).requires_grad_()
    out = model(x)[torch.arange(len(targets)), torch.as_tensor(targets)].sum()
    return torch.autograd.grad(out, x)[0].numpy()


def flipped_curves(model, x, y, a, k, fill) -> np.ndarray:
    """Slow pixel flipping: hide the top j·k elements (stable order: ties by flat index) with ``fill[b]``."""
    out = []
    for b in range(len(x)):
        order = np.argsort(-a[b].reshape(-1), kind="stable")
        row, flat = [], x[b].reshape(-1).copy()
        for j in range(flat.size // k):
            flat[order[j * k : (j + 1) * k]] = fill[b]
            with torch.no_grad():
                row.append(float(model(torch.as_tensor(flat.reshape(1, *x.shape[1:]))).softmax(1)[0, y[b]]))
        out.append(row)
    return np.array(out)


def test_imports_without_quantus(monkeypatch):
    monkeypatch.setitem(sys.modules, "quantus", None)  # `import quantus` raises ImportError now
    spec = importlib.util.spec_from_file_location("quantus_compat_copy", tq.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.__all__ == ["PixelFlipping", "MaxSensitivity", "ModelParameterRandomisation", "MPRT"]


@pytest.mark.parametrize(
    "kw",
    [dict(features_in_step=16), dict(features_in_step=64, perturb_baseline="white", abs=True),
     dict(features_in_step=32, perturb_baseline=0.25), dict(features_in_step=16, return_aggregate=True)],
)  # fmt: skip
def test_pixel_flipping_matches_quantus(quantus, case, kw):
    net, x, y, a = case
    theirs = quantus.PixelFlipping(disable_warnings=True, **kw)(model=net, x_batch=x, y_batch=y, a_batch=a)
    ours = tq.PixelFlipping(**kw)(model=net, x_batch=x, y_batch=y, a_batch=a, device="cpu")
    assert type(ours) is list and len(ours) == len(theirs) and np.shape(ours) == np.shape(theirs)
    np.testing.assert_allclose(np.array(ours, dtype=float), np.array(theirs, dtype=float), rtol=1e-5, atol=1e-7)


def test_pixel_flipping_auc_and_own_definitions(quantus, case):
    net, x, y, a = case
    theirs = quantus.PixelFlipping(features_in_step=16, disable_warnings=True)(
        model=net, x_batch=x, y_batch=y, a_batch=a
    )
    auc = tq.PixelFlipping(features_in_step=16, return_auc_per_sample=True)(model=net, x_batch=x, y_batch=y, a_batch=a)
    np.testing.assert_allclose(auc, np.trapezoid(np.array(theirs), dx=1, axis=1), rtol=1e-5)  # quantus' np.trapz
    ties = np.repeat(a[:, :1], 3, axis=1)  # one value per pixel: ties across channels, by flat index here
    ours = tq.PixelFlipping(features_in_step=16)(model=net, x_batch=x, y_batch=y, a_batch=a[:, 0])
    np.testing.assert_allclose(ours, flipped_curves(net, x, y, ties, 16, x.reshape(4, -1).min(1)), atol=1e-6)
    ours = tq.PixelFlipping(features_in_step=32, perturb_baseline="mean")(model=net, x_batch=x, y_batch=y, a_batch=a)
    np.testing.assert_allclose(ours, flipped_curves(net, x, y, a, 32, x.reshape(4, -1).mean(1)), atol=1e-6)


@pytest.mark.parametrize("kw", [dict(lower_bound=0.1), dict(lower_bound=0.1, upper_bound=0.3, abs=True)])
def test_max_sensitivity_matches_quantus(quantus, case, kw):
    net, x, y, _ = case
    call = dict(model=net, x_batch=x, y_batch=y, a_batch=None, explain_func=saliency, batch_size=3)
    np.random.seed(3)
    theirs = quantus.MaxSensitivity(nr_samples=4, disable_warnings=True, **kw)(**call)
    np.random.seed(3)
    ours = tq.MaxSensitivity(nr_samples=4, **kw)(**call)
    assert type(ours) is list and len(ours) == 4
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    np.random.seed(3)
    given = tq.MaxSensitivity(nr_samples=4, return_aggregate=True, **kw)(**dict(call, a_batch=saliency(net, x, y)))
    assert given == [pytest.approx(np.mean(theirs), rel=1e-5)]


@pytest.mark.parametrize("order", ["top_down", "bottom_up", "independent"])
@pytest.mark.parametrize("similarity", ["correlation_spearman", "correlation_pearson"])
def test_mprt_matches_quantus(quantus, case, order, similarity):
    net, x, y, _ = case
    sim = getattr(quantus.similarity_func, similarity)
    kw = dict(similarity_func=sim, layer_order=order)
    call = dict(model=net, x_batch=x, y_batch=y, a_batch=None, explain_func=saliency)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    theirs = quantus.MPRT(disable_warnings=True, **kw)(**call)
    ours = tq.MPRT(**kw)(**call)
    assert list(ours) == list(theirs)  # "original", then the layers in Quantus's order
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-6, atol=1e-7)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    if order != "top_down" or similarity != "correlation_spearman":
        return
    last = tq.ModelParameterRandomisation(return_last_correlation=True, **kw)(**call)
    np.testing.assert_allclose(last, theirs[list(theirs)[-1]], rtol=1e-6, atol=1e-7)
    average = tq.MPRT(return_average_correlation=True, **kw)(**call)  # over the layers, "original" left out
    np.testing.assert_allclose(average, np.mean([theirs[k] for k in list(theirs)[1:]], axis=0), rtol=1e-6, atol=1e-7)


def test_mprt_ssim_against_scikit_image(case):
    metrics = pytest.importorskip("skimage.metrics")  # quantus 0.6.0's batched ssim fails (a list has no tolist)
    net, x, y, _ = case

    def ssim(a, b, batched=False):  # named as Quantus's: the compat layer computes its SSIM on the device
        raise AssertionError("not called")

    scores = tq.MPRT(similarity_func=ssim, normalise=False)(model=net, x_batch=x, y_batch=y, explain_func=saliency)
    a = np.abs(saliency(net, x, y)).reshape(4, -1)
    variant = copy.deepcopy(net)
    for name in ["3", "0"]:  # top_down: the output layer first, cumulative
        torch.manual_seed(43)
        variant.get_submodule(name).reset_parameters()
        r = np.abs(saliency(variant, x, y)).reshape(4, -1)
        for b in range(4):
            span = float(max(a[b].max(), r[b].max()) - min(a[b].min(), r[b].min()))
            want = metrics.structural_similarity(a[b], r[b], data_range=span)
            assert scores[name][b] == pytest.approx(want, abs=1e-6)
    assert scores["original"] == [pytest.approx(1.0)] * 4


def test_errors_name_the_argument(case):
    net, x, y, a = case
    with pytest.raises(ValueError, match="`perturb_func` must be None"):
        tq.PixelFlipping(perturb_func=lambda arr, indices: arr)
    with pytest.raises(ValueError, match=r"`features_in_step` \(5\) must divide the 192 elements"):
        tq.PixelFlipping(features_in_step=5)(model=net, x_batch=x, y_batch=y, a_batch=a)
    with pytest.raises(ValueError, match="`x_batch` must be channel-first"):
        tq.PixelFlipping()(model=net, x_batch=x.transpose(0, 2, 3, 1), y_batch=y, a_batch=a)
    with pytest.raises(ValueError, match="`a_batch` must be broadcastable to `x_batch`"):
        tq.PixelFlipping(features_in_step=16)(model=net, x_batch=x, y_batch=y, a_batch=a[:, :, :4])
    with pytest.raises(ValueError, match="`explain_func` must be given"):
        tq.MaxSensitivity(nr_samples=2)(model=net, x_batch=x, y_batch=y, a_batch=a)
    with pytest.raises(ValueError, match="`return_nan_when_prediction_changes=True` is not supported"):
        tq.MaxSensitivity(return_nan_when_prediction_changes=True)
    with pytest.raises(ValueError, match="`layer_order` must be"):
        tq.MPRT(layer_order="random")
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        tq.PixelFlipping(features_in_steps=4)
