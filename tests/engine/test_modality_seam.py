"""The seam between input kinds and the engine: modality objects, one configuration, one call record.

A modality written with public names only explains like a feature map; ``Explainer.explain`` with a
modality equals its front door bit for bit; every front door's keywords are its modality's fields plus
the fields of ``Config`` and ``Call`` (those the modality sets itself excepted), so the records are
the one list of the engine's keywords; presets fill unset fields by ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest
import torch

import torchlime
from torchlime.engine import Call, Config, Explainer, Modality, Prepared, explain
from torchlime.engine.config import field_names, fill_unset
from torchlime.typing import UNSET

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
#: the inputs' own positional names at each door
POSITIONAL = {"model", "images", "specs", "waves", "input_ids", "texts", "X", "series", "inputs"}


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


@pytest.mark.parametrize("door_path", sorted(DOORS))
def test_door_keywords_are_the_modality_and_the_records_fields(door_path):
    door = _load(door_path)
    modality = _load(DOORS[door_path])
    params = inspect.signature(door).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), f"{door_path} takes **kwargs"
    keywords = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    positional = {n for n, p in params.items() if p.kind is not p.KEYWORD_ONLY}
    engine = (set(field_names(Call)) | set(field_names(Config))) - set(modality.owns)
    own = {f.name for f in dataclasses.fields(modality)}
    assert positional <= POSITIONAL | own, f"{door_path}: positional {sorted(positional - POSITIONAL - own)}"
    assert engine <= keywords, f"{door_path}: missing {sorted(engine - keywords)}"
    # the rest are the modality's own settings (a door may set some itself, e.g. from its inputs)
    assert keywords - engine <= own, f"{door_path}: extra {sorted(keywords - engine - own)}"
    for name in set(field_names(Config)) & keywords:  # the same defaults as the records
        field = {f.name: f for f in dataclasses.fields(Config)}[name]
        assert params[name].default == field.default or params[name].default is field.default, (door_path, name)


def test_explain_takes_exactly_the_records_fields():
    params = inspect.signature(explain).parameters
    keywords = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert keywords == set(field_names(Call)) | set(field_names(Config))
    method = inspect.signature(Explainer.explain).parameters
    assert {n for n, p in method.items() if p.kind is p.KEYWORD_ONLY} == set(field_names(Call))


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
