"""The spellings retired in 0.2.0 are gone: each old keyword is refused with a ``TypeError`` that names it
(the new spelling is in the CHANGELOG and on docs/migration.md), and no old module path imports."""

from __future__ import annotations

import importlib
import re
import sys
from typing import Any, Callable

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.image import explain_image
from torchlime.text import feature_positions


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
