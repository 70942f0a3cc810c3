"""The lime, captum and shap layers refuse absurd sample counts with the engine's one size check.

Each names its own argument (captum's ``n_samples``, lime's ``num_samples``, shap's ``nsamples``) and is
refused before its own samples are drawn and before the user's function runs: captum's KernelShap drew
10**12 coalitions one by one, lime's Gaussian sampler and shap's design allocated first. lime's image
explainer also refuses a channels-first (C, H, W) image with the transpose that makes it lime's (H, W, C).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.compat.captum import KernelShap, Lime
from torchlime.compat.lime import LimeImageExplainer, LimeTabularExplainer, LimeTextExplainer
from torchlime.compat.shap import KernelExplainer
from torchlime.engine.sizes import SizeError

HUGE = 10**12


class Calls:
    """A probability function of numpy rows that records whether it ran."""

    def __init__(self, classes: int = 2) -> None:
        self.calls, self.classes = 0, classes

    def __call__(self, rows: object) -> np.ndarray:
        self.calls += 1
        n = len(rows)  # type: ignore[arg-type]
        return np.tile(np.linspace(0.2, 0.8, self.classes) / np.linspace(0.2, 0.8, self.classes).sum(), (n, 1))


def _grid(image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    return (np.arange(h)[:, None] * 2 // h) * 2 + np.arange(w)[None, :] * 2 // w


@pytest.mark.parametrize("method", [KernelShap, Lime])
def test_captum_n_samples(method):
    calls = []
    net = torch.nn.Linear(4, 2)

    def forward(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return net(x)

    x = torch.rand(2, 4)
    with pytest.raises(SizeError, match=r"^`n_samples`=1000000000000 needs \d+\.\d TiB for masks, outputs, weights"):
        method(forward).attribute(x, target=0, n_samples=HUGE)
    assert calls in ([], [2])  # at most captum's own probe of the unperturbed batch, never a sample


def test_shap_nsamples_beyond_the_design_cap():
    fn = Calls()
    explainer = KernelExplainer(fn, np.random.default_rng(0).random((4, 40)))
    seen = fn.calls  # the background's expected value
    with pytest.raises(SizeError, match=r"^`nsamples`=1000000000000 needs .* \(B=1, S=1000000000002, F=40, T=2\)"):
        explainer.shap_values(np.random.default_rng(1).random((2, 40)), nsamples=HUGE)
    assert fn.calls == seen
    small = KernelExplainer(fn, np.zeros((1, 5)))  # 5 features: shap's design caps the samples at 2**5 - 2
    assert small.shap_values(np.ones((1, 5)), nsamples=HUGE, silent=True).shape == (1, 5, 2)


@pytest.mark.parametrize("discretize", [True, False], ids=["discretized", "gaussian"])
def test_lime_tabular_num_samples(discretize):
    train = np.random.default_rng(0).random((40, 4))
    fn = Calls()
    explainer = LimeTabularExplainer(train, discretize_continuous=discretize, random_state=0)
    with pytest.raises(SizeError, match=r"^`num_samples`=1000000000000 needs .* TiB"):
        explainer.explain_instance(train[0], fn, num_samples=HUGE)
    assert fn.calls == 0


def test_lime_image_and_text_num_samples():
    fn = Calls()
    image = np.random.default_rng(0).random((8, 8, 3))
    with pytest.raises(SizeError, match=r"^`num_samples`=1000000000000 needs .* TiB") as info:
        LimeImageExplainer(random_state=0).explain_instance(
            image, fn, num_samples=HUGE, segmentation_fn=_grid, progress_bar=False
        )
    assert info.value.argument == "num_samples" and fn.calls == 0
    with pytest.raises(SizeError, match=r"^`num_samples`=1000000000000 needs .* TiB"):
        LimeTextExplainer(random_state=0).explain_instance("a good movie indeed", fn, num_samples=HUGE)
    assert fn.calls == 0


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")  # a constant classifier
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_lime_image_refuses_channels_first(channels):
    fn = Calls()
    chw = np.random.default_rng(0).random((channels, 8, 10))
    explainer = LimeImageExplainer(random_state=0)
    with pytest.raises(
        ValueError, match=r"`image` must be \(H, W, C\).*got shape \(\d, 8, 10\).*image\.transpose\(1, 2, 0\)"
    ):
        explainer.explain_instance(chw, fn, segmentation_fn=_grid, num_samples=8, progress_bar=False)
    with pytest.raises(ValueError, match=r"pass image\.permute\(1, 2, 0\)\.numpy\(\)"):
        explainer.explain_instance(torch.from_numpy(chw), fn, segmentation_fn=_grid, num_samples=8, progress_bar=False)
    assert fn.calls == 0
    hwc = chw.transpose(1, 2, 0)  # the advice, followed, runs
    exp = explainer.explain_instance(hwc, fn, segmentation_fn=_grid, num_samples=8, top_labels=1, progress_bar=False)
    assert fn.calls > 0 and exp.segments.shape == (8, 10)
