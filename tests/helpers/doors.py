"""The form every front door keeps: its modality's fields, ``target``, ``n_samples``, ``generator``, ``**options``.

The engine's other keywords are ``ExplainOptions`` (one typed set beside the records), so a door spells
only what is its own; an option its modality sets itself (``Modality.owns``) is refused by name.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import pytest

from torchlime.engine.config import NAMED, Call, ExplainOptions

#: the inputs' own positional names at each door
POSITIONAL = ("model", "images", "specs", "waves", "input_ids", "texts", "X", "series", "inputs")


def check_door_form(door: Callable[..., Any], modality: type, inputs: object = None, **required: object) -> None:
    """Assert the door's signature and that it refuses, by name, each option its modality sets itself.

    Args:
        door: the front door.
        modality: its modality class.
        inputs: inputs the door accepts up to the options' check (not explained).
        **required: the door's required keywords (e.g. ``sample_rate``).
    """
    params = list(inspect.signature(door).parameters.values())
    *named, options = params
    assert options.kind is options.VAR_KEYWORD and options.name == "options", door.__name__
    assert "Unpack[ExplainOptions]" in str(options.annotation), options.annotation
    positional = [p.name for p in named if p.kind is not p.KEYWORD_ONLY]
    keywords = [p.name for p in named if p.kind is p.KEYWORD_ONLY]
    assert len(positional) == 2 and set(positional) <= set(POSITIONAL), positional
    assert tuple(keywords[-3:]) == NAMED, keywords  # target, n_samples, generator last, as in ``Call``
    own = [f.name for f in dataclasses.fields(modality)]
    assert [k for k in own if k in keywords[:-3]] == keywords[:-3], keywords  # the modality's fields, in order
    defaults = {f.name: f.default for f in dataclasses.fields(Call)}
    assert all(p.default is defaults[p.name] or p.default == defaults[p.name] for p in named[-3:])
    assert not set(keywords) & set(ExplainOptions.__annotations__)  # a keyword is the door's or an option
    for name in sorted(modality.owns - set(own)):
        with pytest.raises(TypeError, match=rf"{door.__name__}\(\) got an unexpected keyword argument '{name}'"):
            door(None, inputs, **required, **{name: None})
