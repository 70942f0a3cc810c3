"""The seam between input kinds and the engine: modality objects, one configuration, one call record.

A modality written with public names only explains like a feature map; ``Explainer.explain`` with a
modality equals its front door bit for bit; every front door's keywords are its modality's fields,
``target``, ``n_samples``, ``generator`` and ``**options: Unpack[ExplainOptions]`` (the other fields of
``Config`` and ``Call``, those the modality sets itself refused by name), so the records are the one
list of the engine's keywords; presets fill unset fields by ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest
import torch

import torchlime
from torchlime.engine import Call, Config, Explainer, Modality, Prepared, explain
from torchlime.engine.config import NAMED, fill_unset
from torchlime.typing import UNSET

from tests.helpers.doors import check_door_form

#: front door -> its modality class, as ``module:function`` / ``module:class``
DOORS = {
    "torchlime.image:explain_image": "torchlime.image:Images",
    "torchlime.audio:explain_spectrogram": "torchlime.audio:Spectrograms",
    "torchlime.audio:explain_waveform": "torchlime.audio:Waveforms",
    "torchlime.text:explain_tokens": "torchlime.text:Tokens",
    "torchlime.text:explain_text": "torchlime.text:Words",
    "torchlime.tabular:explain_tabular": "torchlime.tabular:Tabular",
    "torchlime.series:explain_series": "torchlime.series:Series",
}


def _load(path: str) -> object:
    module, name = path.split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        pytest.fail(f"{path} is missing")


@dataclasses.dataclass(frozen=True)
class Pairs(Modality):
    """A modality written by a user: pairs of neighbouring columns are features (public names only)."""

    width: int = 2

    def prepare(self, model, inputs, how, call):
        ids = torch.arange(inputs.shape[1], device=inputs.device) // self.width
        return Prepared(inputs, ids.view(1, -1), how, call)


def test_a_users_modality_explains_like_its_feature_map():
    model = torch.nn.Linear(8, 3)
    x = torch.rand(4, 8)
    ours = Explainer(kernel="lime").explain(model, x, Pairs(), target="top2", n_samples=64, generator=3)
    plain = explain(
        model, x, (torch.arange(8) // 2).view(1, -1), kernel="lime", target="top2", n_samples=64, generator=3
    )
    assert ours.coef.shape == (4, 2, 4)
    assert torch.equal(ours.coef, plain.coef) and torch.equal(ours.intercept, plain.intercept)
    assert torchlime.Modality is Modality and torchlime.Prepared is Prepared


#: what each door needs besides the model to reach its options' check
INPUTS = {
    "torchlime.audio:explain_waveform": dict(sample_rate=8000),
    "torchlime.tabular:explain_tabular": dict(training_data=torch.rand(10, 4)),
    "torchlime.text:explain_text": dict(inputs="a b c"),
}


@pytest.mark.parametrize("door_path", sorted(DOORS))
def test_door_keywords_are_the_modality_fields_the_named_call_fields_and_the_options(door_path):
    required = dict(INPUTS.get(door_path, {}))
    check_door_form(_load(door_path), _load(DOORS[door_path]), required.pop("inputs", torch.rand(2, 4)), **required)


def test_explain_takes_the_named_call_fields_and_the_options():
    *named, options = inspect.signature(explain).parameters.values()
    assert [p.name for p in named] == ["model", "inputs", "modality", *NAMED]
    assert options.kind is options.VAR_KEYWORD and "Unpack[ExplainOptions]" in str(options.annotation)
    *named, options = inspect.signature(Explainer.explain).parameters.values()
    assert [p.name for p in named] == ["self", "model", "inputs", "modality", *NAMED]
    assert options.kind is options.VAR_KEYWORD and "Unpack[CallOptions]" in str(options.annotation)


def test_an_unknown_or_misplaced_keyword_is_named():
    model, x = torch.nn.Linear(4, 2), torch.rand(2, 4)
    with pytest.raises(TypeError, match=r"explain\(\) got an unexpected keyword argument 'features'; "):
        explain(model, x, features=None)  # the third argument is `modality`
    with pytest.raises(TypeError, match=r"\['kernel'\] are settings of the explainer: pass them to Explainer"):
        Explainer().explain(model, x, kernel="lime")
    with pytest.raises(TypeError, match=r"Explainer.explain\(\) got an unexpected keyword argument 'n_sample'"):
        Explainer().explain(model, x, n_sample=8)
    with pytest.raises(ValueError, match=r"`baseline` string must be one of"):  # "drop" is explain_image's
        explain(model, x, baseline="drop")


def test_presets_fill_only_unset_fields():
    how = Config(kernel="uniform")
    filled = fill_unset(how, {"kernel": "lime", "sampler": "shapley"})
    assert filled.kernel == "uniform" and filled.sampler == "shapley" and how.sampler is UNSET
    call = fill_unset(Call(n_samples=10), {"n_samples": 1000, "target": "top5"})
    assert call.n_samples == 10 and call.target == "top5"


def test_preset_explainer_equals_the_preset_keyword():
    model = torch.nn.Linear(6, 2)
    x = torch.rand(3, 6)
    a = Explainer(preset="captum").explain(model, x, None, n_samples=40)
    b = explain(model, x, preset="captum", n_samples=40)
    assert torch.equal(a.coef, b.coef) and a.meta["surrogate"] == b.meta["surrogate"]


def test_typed_records_of_an_explanation(tmp_path):
    """``run`` (the engine's record), ``config`` / ``call`` and ``info``: typed, with ``meta`` their plain view."""
    from torchlime.engine import RunRecord

    model = torch.nn.Linear(8, 3)
    exp = Explainer(kernel="lime").explain(model, torch.rand(3, 8), Pairs(), n_samples=40, softmax=True, output=None)
    assert isinstance(exp.run, RunRecord) and exp.run.as_plain().items() <= exp.meta.items()
    assert exp.run.samples_used == [40, 40, 40] and exp[1].run.samples_used == [40]
    assert exp.call.softmax is True and exp.call.n_samples == 40 and exp.config.kernel is not None
    exp.save(tmp_path / "e.pt")
    loaded = torchlime.Explanation.load(tmp_path / "e.pt")
    assert loaded.run == exp.run and loaded.call is None  # the call holds tensors and callables: not saved


@pytest.mark.parametrize(
    "how, refused",
    [
        (Config(), False),
        (Config(kernel="lime"), False),
        (Config(preset="lime"), False),
        (Config(kernel="wasserstein"), True),
        (Config(preset="captum"), True),  # the preset's kernel is an input-space one
        (Config(preset="captum", kernel="lime"), False),  # the given kernel wins over the preset's
    ],
)
def test_one_refusal_of_input_space_kernels_for_every_modality(how, refused):
    if not refused:
        how.refuse_input_kernel("text", "would compare ids")
        return
    source = r"`kernel` \(from preset='captum'\)" if how.kernel is UNSET else "`kernel`"
    with pytest.raises(ValueError, match=source + r" must measure distances on the masks.* would compare ids"):
        how.refuse_input_kernel("text", "would compare ids")


def test_the_text_modalities_and_waveform_cells_use_it():
    words = lambda texts: torch.ones(len(texts), 2)  # noqa: E731
    with pytest.raises(ValueError, match="compare word positions"):
        torchlime.text.explain_text(words, "a b c", n_samples=8, kernel="wasserstein")
    with pytest.raises(ValueError, match="complex STFTs"):
        torchlime.audio.explain_waveform(
            lambda w: w[:, :2], torch.randn(1, 2000), sample_rate=8000, segments="time_frequency", preset="captum"
        )
