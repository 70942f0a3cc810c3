"""Result folders written by torchlime 0.1: their run's arguments told in the current call.

A 0.1 run recorded ``explain_fn`` (a front door) and its keywords ``explain_kwargs`` in ``index.json``;
the current ``explain_dataset`` takes ``modality=``, ``explainer=`` and ``call=`` instead. Such a folder
loads as it is (``load_results``); resuming it is refused by ``_store.Store.open`` with the message made
here, which spells the current call of the same settings (the same numbers in a new folder).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from torchlime.dataset._describe import describe_value
from torchlime.engine.config import Call, Config, field_names

#: the 0.1 front doors a folder may name, and the modality each one explains with
DOORS = {
    "torchlime.image._explain.explain_image": "torchlime.Images",
    "torchlime.audio._explain.explain_spectrogram": "torchlime.Spectrograms",
    "torchlime.audio._explain.explain_waveform": "torchlime.Waveforms",
    "torchlime.text._explain.explain_tokens": "torchlime.text.Tokens",
    "torchlime.text._explain.explain_text": "torchlime.text.Words",
    "torchlime.tabular._explain.explain_tabular": "torchlime.Tabular",
    "torchlime.series._explain.explain_series": "torchlime.Series",
}
#: the 0.1 keywords whose meaning moved: ``model_batch_size`` is the explainer's ``batch_size``
_RUN_KEYWORDS = ("max_memory", "batch_size", "progress", "index")
#: 0.1's default masks and fit, which 0.2 changed (Sobol masks, ``Ridge(alpha=0.01)``): a 0.1 run without a
#: preset is spelled with them (tabular calls draw their own masks)
_DEFAULTS_0_1 = {"sampler": "bernoulli", "surrogate": "ridge"}


def is_old(arguments: Mapping[str, object]) -> bool:
    """Whether ``arguments`` (an ``index.json``'s) are of a 0.1 run (``explain_fn`` and ``explain_kwargs``)."""
    return "explain_fn" in arguments or "explain_kwargs" in arguments


def _shown(value: object) -> str:
    """A recorded value as it would be written in the call (a tensor: its shape, which the record keeps)."""
    if isinstance(value, dict) and "tensor" in value:
        return f"<the same {tuple(value['tensor'])} tensor>"
    if isinstance(value, dict) and isinstance(value.get("fields"), dict):
        return _spelled(str(value.get("type")), value["fields"])
    return repr(value) if not isinstance(value, (dict, list)) else json.dumps(value)


def _spelled(name: str, values: Mapping[str, object]) -> str:
    return f"{name}({', '.join(f'{k}={_shown(v)}' for k, v in values.items())})"


def current_call(arguments: Mapping[str, object]) -> str:
    """The current ``explain_dataset`` call of a 0.1 run's settings.

    Args:
        arguments: the 0.1 ``index.json``'s ``arguments``.

    Returns:
        ``explain_dataset(model, data, out, modality=..., explainer=..., call=...)`` as text.

    Example:
        >>> current_call({"explain_fn": "torchlime.image._explain.explain_image", "generator": 3,
        ...               "explain_kwargs": {"n_segments": 16, "n_samples": 64, "kernel": "lime"}})
        "explain_dataset(model, data, out, modality=torchlime.Images(n_segments=16), explainer=torchlime.Explainer(kernel='lime', sampler='bernoulli', surrogate='ridge'), call=torchlime.Call(n_samples=64, generator=3))"
    """  # noqa: E501 - a doctest's output is one line
    keywords = arguments.get("explain_kwargs")
    keywords = dict(keywords) if isinstance(keywords, Mapping) else {}
    how = {k: v for k, v in keywords.items() if k in field_names(Config) and k not in _RUN_KEYWORDS}
    what = {k: v for k, v in keywords.items() if k in field_names(Call) and k not in _RUN_KEYWORDS}
    own = {k: v for k, v in keywords.items() if k not in how and k not in what and k not in _RUN_KEYWORDS}
    what["generator"] = arguments.get("generator", 0)
    door = arguments.get("explain_fn")
    if isinstance(door, Mapping) and isinstance(door.get("fields"), Mapping):  # 0.1's explainer= + modality=
        fields = door["fields"]
        explainer = fields.get("explainer")
        recorded = explainer.get("fields") if isinstance(explainer, Mapping) else None
        defaults = describe_value(Config())
        default = defaults.get("fields") if isinstance(defaults, Mapping) else None
        if isinstance(recorded, Mapping) and isinstance(default, Mapping):
            how.update({k: v for k, v in recorded.items() if k not in _RUN_KEYWORDS and default.get(k) != v})
        door = "torchlime.engine.explainer.explain"
        own["features"] = fields.get("modality")
    if door == "torchlime.engine.explainer.explain":
        modality = _shown(own.pop("features", None))
    elif isinstance(door, str) and door in DOORS:
        modality = _spelled(DOORS[door], own)
        own = {}
    else:
        modality = f"<the modality of {door}>"
    if "preset" not in how:
        tabular = door == "torchlime.tabular._explain.explain_tabular"
        how.update({k: v for k, v in _DEFAULTS_0_1.items() if k not in how and not (tabular and k == "sampler")})
    parts = [f"modality={modality}"]
    if how:
        parts.append(f"explainer={_spelled('torchlime.Explainer', how)}")
    parts.append(f"call={_spelled('torchlime.Call', what)}")
    left = f" (and the 0.1 keywords {sorted(own)}, which have no place in it)" if own else ""
    return f"explain_dataset(model, data, out, {', '.join(parts)}){left}"


def refusal(out: Path, arguments: Mapping[str, object]) -> str:
    """The message refusing to resume the 0.1 folder ``out``, naming the current call of its settings."""
    return (
        f"`out` {str(out)!r} holds a run of torchlime 0.1 (explain_fn={arguments.get('explain_fn')!r} and its "
        f"keywords), which this version cannot resume: read it with load_results, or compute it again in a new "
        f"folder with {current_call(arguments)}: the same settings give the same numbers"
    )
