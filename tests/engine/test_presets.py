"""The one preset system (``torchlime.engine.presets``): precedence and modality-specific settings."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.engine.presets import ENGINE, PRESETS, UNSET, resolve
from torchlime.stages.sampling import UniformCountSampler
from torchlime.stages.surrogate import Lasso

from tests.helpers import grid_labels


def test_explicit_beats_modality_beats_any_beats_engine():
    given = dict(n_samples=UNSET, baseline=UNSET, sampler=UNSET, segments=UNSET, target=7)
    out = resolve("lime", given, "image")
    assert out == dict(
        n_samples=1000, baseline="mean", sampler=PRESETS["lime"]["any"]["sampler"], segments="quickshift", target=7
    )
    text = resolve("lime", dict(n_samples=UNSET, sampler=UNSET), "text")
    assert text["n_samples"] == 5000 and isinstance(text["sampler"], UniformCountSampler)
    assert resolve(None, dict(n_samples=UNSET, segments=UNSET)) == dict(n_samples=ENGINE["n_samples"], segments=None)
    assert resolve("slime", dict(n_samples=UNSET), "audio")["n_samples"] == 8192
    assert resolve("veracity", dict(n_samples=UNSET))["n_samples"] == 8192


def test_errors():
    with pytest.raises(
        ValueError,
        match=r"`preset` must be None or one of \['lime', 'lime_text', 'captum', "
        r"'slime', 'veracity', 'kernel_shap', 'kernel_shap_plain'\], got 'shap'",
    ):
        resolve("shap", {})
    with pytest.raises(ValueError, match=r"`modality` must be one of \['any', 'image', 'audio', 'text', 'tabular'\]"):
        resolve(None, {}, "video")


def test_engine_applies_the_preset():
    x, f = torch.rand(2, 1, 4, 4), grid_labels(4, 4, 2, 2).view(1, 1, 4, 4)
    exp = explain(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)), x, f, preset="captum")
    assert exp.run.n_samples == 25 and exp.run.surrogate == repr(Lasso(alpha=0.01))
    assert exp.run.preset == "captum"
