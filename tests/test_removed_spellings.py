"""The spellings retired in 0.2.0 are gone: each old keyword is refused with a ``TypeError`` that names it
(the new spelling is in the CHANGELOG and on docs/migration.md), and no old module path imports."""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from typing import Any, Callable

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.viz import plot_spectrogram_explanation
from torchlime.demo import run_demo
from torchlime.image import explain_image
from torchlime.image.viz import (
    image_and_mask,
    plot_coefficients_with_uncertainty,
    plot_image_explanation,
    save_image_explanation,
)
from torchlime.methods.adaptive import Adaptive
from torchlime.methods.feature_selection import Select
from torchlime.metrics import max_sensitivity
from torchlime.series import Series
from torchlime.stages import features as features_stage
from torchlime.tabular import Tabular, conditions
from torchlime.text import Infiller, feature_positions
from torchlime.text.viz import explanation_html, feature_strings, plot_top_features, text_html


def spectrogram_model(s: torch.Tensor) -> torch.Tensor:
    """(c, Fr, Tm) spectrograms -> (c, 2) scores."""
    return s.flatten(1)[:, :2]


def waveform_model(w: torch.Tensor) -> torch.Tensor:
    """(c, samples) waveforms -> (c, 2) scores."""
    return w.flatten(1)[:, :2]


def image_model(x: torch.Tensor) -> torch.Tensor:
    """(c, 3, H, W) images -> (c, 2) scores."""
    return x.flatten(1)[:, :2]


DOORS: dict[str, tuple[Callable[[], Any], str]] = {
    "explain_image(channels_last=)": (
        lambda: explain_image(image_model, torch.rand(1, 3, 8, 8), channels_last=True, n_samples=8),
        "channels_last",
    ),
    "explain_spectrogram(content=)": (
        lambda: explain_spectrogram(spectrogram_model, torch.rand(1, 16, 10), content="mean", n_samples=8),
        "content",
    ),
    "explain_waveform(content=)": (
        lambda: explain_waveform(waveform_model, torch.rand(1, 800), sample_rate=8000, content=0.5, n_samples=8),
        "content",
    ),
    "explain_waveform(features=)": (
        lambda: explain_waveform(waveform_model, torch.rand(1, 800), sample_rate=8000, features="time", n_samples=8),
        "features",
    ),
    "feature_positions(exp=)": (lambda: feature_positions(exp=None), "exp"),
}


@pytest.mark.parametrize("name", list(DOORS))
def test_the_old_keywords_of_the_doors_are_refused(name):
    call, old = DOORS[name]
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
        call()


#: the pictures, metrics and methods: (function, the old keyword, its new name); Python refuses the old
#: keyword while binding the call, before the function runs, so no explanation is needed
RENAMED: list[tuple[Callable[..., Any], str, str]] = [
    (image_and_mask, "exp", "explanation"),
    (image_and_mask, "num_features", "k"),
    (plot_image_explanation, "exp", "explanation"),
    (plot_image_explanation, "num_features", "k"),
    (plot_coefficients_with_uncertainty, "exp", "explanation"),
    (feature_strings, "exp", "explanation"),
    (explanation_html, "exp", "explanation"),
    (text_html, "exp", "explanation"),
    (plot_top_features, "exp", "explanation"),
    (plot_spectrogram_explanation, "top_k", "k"),  # plot_transcript passes its options on to it
    (run_demo, "top_k", "k"),
    (max_sensitivity, "batch_size", "inputs_per_step"),
    (conditions, "exp", "explanation"),
    (Select, "num_features", "k"),
    (Adaptive, "top_k", "k"),
    (Infiller, "top_k", "k"),
    (Tabular, "kernel_width", "training_data"),  # the width is kernel=ExponentialKernel(width, distance="euclidean")
    (Series, "fill", "segments"),  # the fill is baseline=SeriesFill(name)
]


@pytest.mark.parametrize("fn, old, new", RENAMED, ids=[f"{f.__name__}({old}=)" for f, old, _ in RENAMED])
def test_the_old_keywords_are_refused_and_the_new_ones_are_the_signature(fn, old, new):
    assert new in inspect.signature(fn).parameters and old not in inspect.signature(fn).parameters
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{old}'"):
        fn(**{old: 1})


@pytest.mark.parametrize(
    "call",
    [
        lambda: plot_image_explanation(torch.zeros(1, 3, 4, 4), None, 1),  # (images, exp, index)
        lambda: save_image_explanation("out.png", torch.zeros(1, 3, 4, 4), None, 1),  # (path, images, exp, index)
        lambda: plot_coefficients_with_uncertainty(None, 1, 0),  # index, target_index by position
        lambda: plot_top_features(None, ["a"], 0, 0, 1),  # index, target_index, k by position
    ],
    ids=["plot_image_explanation", "save_image_explanation", "plot_coefficients_with_uncertainty", "plot_top_features"],
)
def test_the_old_positional_orders_are_refused(call):
    with pytest.raises(TypeError, match=r"positional arguments? but \d+ (were|was) given"):
        call()


def test_the_explanation_comes_first_and_the_path_last():
    assert list(inspect.signature(plot_image_explanation).parameters)[:2] == ["explanation", "images"]
    assert list(inspect.signature(save_image_explanation).parameters)[:3] == ["explanation", "images", "path"]


def test_stages_features_has_one_name_for_the_grid():
    assert not hasattr(features_stage, "grid") and callable(features_stage.cell_ids)


#: the module paths of 0.1 that 0.2.0 no longer aliases (docs/migration.md lists their new homes)
OLD_PATHS = (
    "torchlime.segments",
    "torchlime.viz",
    "torchlime.models",
    "torchlime.demo_data",
    "torchlime.audio_data",
    "torchlime.audio_models",
    "torchlime.audio_segments",
    "torchlime.audio_stft",
    "torchlime.audio_viz",
    "torchlime.text_data",
    "torchlime.text_models",
    "torchlime.text_viz",
    "torchlime.text_kernel",
    "torchlime.text_infill",
    "torchlime.text_perturb",
    "torchlime.features",
    "torchlime.sampling",
    "torchlime.baselines",
    "torchlime.perturb",
    "torchlime.perturbation",
    "torchlime.chunking",
    "torchlime.weighting",
    "torchlime.surrogate",
    "torchlime.explanation",
    "torchlime.registry",
    "torchlime.presets",
    "torchlime.quality",
    "torchlime.designs",
    "torchlime.adaptive",
    "torchlime.shap",
    "torchlime.bayes",
    "torchlime.smile",
    "torchlime.selection",
    "torchlime.pick",
    "torchlime.text.kernel",
    "torchlime.text.perturb",
    "torchlime.integrations.lightning",
    "torchlime.integrations.tensorboard",
    "torchlime.forward",
    "torchlime.image.data",
    "torchlime.image.models",
    "torchlime.image.demo",
    "torchlime.audio.data",
    "torchlime.audio.models",
    "torchlime.text.data",
    "torchlime.text.models",
)


@pytest.mark.parametrize("old", OLD_PATHS)
def test_the_old_module_paths_no_longer_import(old):
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError, match=re.escape(f"No module named '{old}'")):
        importlib.import_module(old)
    parent, _, name = old.rpartition(".")
    assert not hasattr(importlib.import_module(parent), name)  # nor as an attribute of its package
