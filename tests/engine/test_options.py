"""``ExplainOptions`` / ``CallOptions``: the records' fields as keywords, spelled once.

The options are the fields of ``Config`` and ``Call`` but the three each door names itself, with the
fields' types, so a field added to a record and not to the options (or the other way) fails here; the
doors take them as ``**options`` and refuse an unknown one by name, with the ones they take.
"""

from __future__ import annotations

import typing
from typing import Literal, Union

import pytest

from torchlime.engine.config import NAMED, Call, CallOptions, Config, ExplainOptions, check_options, field_names


def test_the_options_are_the_records_fields_but_the_named_ones():
    assert NAMED == ("target", "n_samples", "generator") and set(NAMED) <= set(field_names(Call))
    call = [n for n in field_names(Call) if n not in NAMED]
    assert list(CallOptions.__annotations__) == call
    assert sorted(ExplainOptions.__annotations__) == sorted([*field_names(Config), *call])
    assert ExplainOptions.__required_keys__ == frozenset() == CallOptions.__required_keys__


def test_the_options_have_the_fields_types():
    fields = {**typing.get_type_hints(Config), **typing.get_type_hints(Call)}
    options = typing.get_type_hints(ExplainOptions)
    for name, hint in options.items():
        # explain_image's baseline="drop" (a vision transformer's patches leave the sequence) is the one addition
        expected = Union[fields[name], Literal["drop"]] if name == "baseline" else fields[name]
        assert hint == expected, name
    assert typing.get_type_hints(CallOptions) == {k: fields[k] for k in CallOptions.__annotations__}


def test_the_options_are_described_from_the_records():
    for options in (ExplainOptions, CallOptions):
        doc = options.__doc__ or ""
        listed = [line.strip().split(":")[0] for line in doc.split("Attributes:")[1].splitlines() if line[8:9].strip()]
        assert sorted(listed) == sorted(options.__annotations__)
    assert '"ridge", "lasso", "klasso", "bayes"' in (ExplainOptions.__doc__ or "")  # the surrogates, from Config


def test_an_unknown_option_is_named_with_the_accepted_ones():
    check_options({"kernel": "lime"}, ("kernel", "surrogate"), "explain_x")
    with pytest.raises(
        TypeError, match=r"explain_x\(\) got an unexpected keyword argument 'kernal'; .* kernel, surrogate$"
    ):
        check_options({"kernal": "lime"}, ("kernel", "surrogate"), "explain_x")
    with pytest.raises(
        TypeError, match=r"unexpected keyword arguments \['a', 'baseline'\] \(\['baseline'\] set by its"
    ):
        check_options({"a": 1, "baseline": 0.0, "kernel": 1.0}, ("kernel",), "explain_x", owned={"baseline"})
