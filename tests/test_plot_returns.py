"""Every public ``plot_*`` function returns a matplotlib ``Figure`` (the one of ``ax=`` when it takes one)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable

import pytest
import torch

from torchlime.engine.explanation import Explanation
from torchlime.targets import BoxesInfo, TranscriptInfo

from tests.helpers.records import run_record

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

MODULES = (
    "torchlime.image.viz",
    "torchlime.image.viz_boxes",
    "torchlime.image.viz_regions",
    "torchlime.audio.viz",
    "torchlime.audio.viz_transcript",
    "torchlime.text.viz",
    "torchlime.series.viz",
    "torchlime.metrics.viz",
)


def synthetic(coef: torch.Tensor, features: torch.Tensor, input_shape: tuple[int, ...], **extra: Any) -> Explanation:
    """An explanation of coefficients (B, T, F) over ``features``, targets 0..T-1."""
    b, t, f = coef.shape
    return Explanation(
        coef,
        torch.zeros(b, t),
        torch.ones(b, t),
        torch.zeros(b, t),
        torch.arange(t).expand(b, t).clone(),
        features,
        torch.full((b,), f),
        input_shape,
        **extra,
    )


def image() -> tuple[Explanation, torch.Tensor]:
    grid = (torch.arange(8).view(8, 1) // 4) * 2 + torch.arange(8).view(1, 8) // 4
    coef = torch.tensor([[[1.0, -1.0, 0.5, 0.0], [0.0, 0.3, -0.2, 1.0]]])
    return synthetic(coef, grid.view(1, 1, 8, 8), (3, 8, 8)), torch.rand(1, 3, 8, 8)


def spectrogram() -> tuple[Explanation, torch.Tensor]:
    lab = torch.arange(4).view(4, 1).expand(4, 6) // 2 * 3 + torch.arange(6).view(1, 6) // 2
    coef = torch.linspace(-1, 1, 12).view(1, 2, 6)
    return synthetic(coef, lab.reshape(1, 4, 6), (4, 6)), torch.rand(1, 4, 6)


def run_image() -> Any:
    from torchlime.image.viz import plot_image_explanation

    return plot_image_explanation(*image(), k=2)


def run_uncertainty(ax: Any = None) -> Any:
    from torchlime.image.viz import plot_coefficients_with_uncertainty

    exp, _ = image()
    exp.coef_std = torch.full_like(exp.coef, 0.1)
    return plot_coefficients_with_uncertainty(exp, ax=ax)


def run_boxes() -> Any:
    from torchlime.image.viz_boxes import plot_boxes

    exp, images = image()
    exp.run = run_record(1, targets=BoxesInfo([[[0.0, 0.0, 4.0, 4.0], [4.0, 4.0, 8.0, 8.0]]]))
    return plot_boxes(exp, images)


def run_regions() -> Any:
    from torchlime.image.viz_regions import plot_regions

    exp, images = image()
    return plot_regions(exp, images, regions=torch.zeros(1, 8, 8, dtype=torch.long))


def run_spectrogram(ax: Any = None) -> Any:
    from torchlime.audio.viz import plot_spectrogram_explanation

    return plot_spectrogram_explanation(*spectrogram(), ax=ax)


def run_transcript() -> Any:
    from torchlime.audio.viz_transcript import plot_transcript

    exp, specs = spectrogram()
    exp.run = run_record(1, targets=TranscriptInfo([[1, 2]]))
    exp.target_valid = torch.ones(1, 2, dtype=torch.bool)
    return plot_transcript(exp, specs, words=["hello"])


def run_top_features(ax: Any = None) -> Any:
    from torchlime.text.viz import plot_top_features

    exp = synthetic(torch.tensor([[[0.5, -1.0, 0.2]]]), torch.tensor([[0, 1, 2]]), (3,))
    return plot_top_features(exp, ["a", "b", "c"], ax=ax)


def run_series() -> Any:
    from torchlime.series.viz import plot_series

    exp = synthetic(torch.tensor([[[1.0, -1.0, 0.0]]]), (torch.arange(6) // 2).view(1, 1, 6), (1, 6))
    return plot_series(exp, torch.rand(1, 1, 6))


def run_curves(ax: Any = None) -> Any:
    from torchlime.metrics.viz import plot_curves

    return plot_curves(torch.tensor([[1.0, 0.5, 0.0]]), torch.tensor([0.0, 0.5, 1.0]), ax=ax)


CASES: dict[str, Callable[[], Any]] = {
    "plot_image_explanation": run_image,
    "plot_coefficients_with_uncertainty": run_uncertainty,
    "plot_boxes": run_boxes,
    "plot_regions": run_regions,
    "plot_spectrogram_explanation": run_spectrogram,
    "plot_transcript": run_transcript,
    "plot_top_features": run_top_features,
    "plot_series": run_series,
    "plot_curves": run_curves,
}
#: the functions that draw into a given ``ax=``
INTO_AXES: dict[str, Callable[..., Any]] = {
    "plot_coefficients_with_uncertainty": run_uncertainty,
    "plot_spectrogram_explanation": run_spectrogram,
    "plot_top_features": run_top_features,
    "plot_curves": run_curves,
}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_every_public_plot_function_is_checked():
    found = {
        name
        for module in MODULES
        for name, value in vars(importlib.import_module(module)).items()
        if name.startswith("plot_") and inspect.isfunction(value) and value.__module__ == module
    }
    assert found == set(CASES)
    takes_ax = {name for name in found if "ax" in inspect.signature(getattr_any(name)).parameters}
    assert takes_ax == set(INTO_AXES)


def getattr_any(name: str) -> Callable[..., Any]:
    for module in MODULES:
        value = getattr(importlib.import_module(module), name, None)
        if value is not None:
            return inspect.unwrap(value)
    raise LookupError(name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_plot_returns_a_figure(name):
    fig = CASES[name]()
    assert isinstance(fig, Figure), f"{name} returned {type(fig).__name__}"


@pytest.mark.parametrize("name", sorted(INTO_AXES))
def test_plot_into_axes_returns_their_figure(name):
    fig, axes = plt.subplots(1, 2)
    assert INTO_AXES[name](ax=axes[1]) is fig
