"""Checks of the plain data that explanation files store, before typed records are built from it.

A file written by ``Explanation.save`` holds tensors and plain values (str, numbers, bools, None, lists,
dicts). A file from elsewhere may hold anything of those kinds where a record expects another: a
string where a shape is kept, a list where a name is. ``check_record`` compares a record's plain data
with the annotations of the record's dataclass fields, and ``check_plain`` one value with one
annotation; both raise ``StoredDataError`` naming the field, what it must be and what it holds.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, Optional, Union

import torch

from torchlime._util.checks import describe


class Entries(Mapping[str, object]):
    """A file's entries, read-only, that pickle and deep-copy (``types.MappingProxyType`` does neither).

    Args:
        data: the entries (copied).
    """

    def __init__(self, data: Mapping[str, object] = MappingProxyType({})) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> object:
        return self._data[key]

    def __iter__(self) -> typing.Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Entries({self._data!r})"


class StoredDataError(ValueError):
    """Stored data of the wrong kind: the message names the field, what it must be and what it holds."""


#: the plain kinds in words
_WORDS: dict[type, str] = {int: "an int", float: "a number", str: "a str", bool: "a bool"}
_PLURAL: dict[object, str] = {int: "ints", float: "numbers", str: "strs", bool: "bools"}


@functools.cache
def _hints(kind: type) -> dict[str, Any]:
    """The resolved annotations of a dataclass's fields (cached per class)."""
    return typing.get_type_hints(kind)


def _wanted(expected: Any) -> str:
    """An annotation in words: ``list[int]`` -> "a list of int"."""
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if expected is type(None):
        return "None"
    if expected is torch.Tensor:
        return "nested lists of numbers"
    if isinstance(expected, type):
        return _WORDS.get(expected, f"a {expected.__name__}")
    if origin is Union:
        return " or ".join(_wanted(a) for a in args)
    if origin is Literal:
        return f"one of {list(args)}"
    if origin in (list, tuple, Sequence):
        if not args:
            return "a list"
        nested = typing.get_origin(args[0]) in (list, tuple, Sequence)
        return f"a list of {_PLURAL.get(args[0], 'lists' if nested else 'items')}"
    if origin in (dict, Mapping):
        return "a mapping with str keys"
    return str(expected)


def check_plain(value: object, expected: Any, name: str) -> None:  # noqa: C901
    """Raise unless ``value`` is plain data of the annotation ``expected``.

    Handled: ``object``/``Any`` (anything), ``bool``, ``int`` (not a bool), ``float`` (an int or float,
    not a bool), ``str``, None, ``Optional``/``Union``, ``Literal``, ``list[X]``/``tuple[X, ...]``/
    ``Sequence[X]`` (a list or tuple), ``dict[str, X]``/``Mapping``, ``torch.Tensor`` (as files keep one:
    nested lists of numbers) and a dataclass (a mapping checked by ``check_record``).

    Args:
        value: the stored value.
        expected: the annotation of the field that keeps it.
        name: the field, for the message (e.g. "meta['tabular']['levels']").

    Raises:
        StoredDataError: ``value`` is of another kind (an item of a list names its place).
        TypeError: an annotation of another kind (a record's field that these checks do not cover).

    Example:
        >>> check_plain(["<b>"], list[int], "input_shape")
        Traceback (most recent call last):
        ...
        torchlime.engine._stored.StoredDataError: input_shape[0] must be an int, got str '<b>'
    """
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if expected in (object, Any):
        return
    if origin is Union:
        if not any(_fits(value, a) for a in args):
            _refuse(value, expected, name, args)
        return
    if origin is Literal:
        ok = any(type(value) is type(a) and value == a for a in args)
    elif expected is type(None):
        ok = value is None
    elif expected is bool:
        ok = isinstance(value, bool)
    elif expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif expected is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif expected is str:
        ok = isinstance(value, str)
    elif expected is torch.Tensor:
        _check_numbers(value, name)
        return
    elif origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            raise StoredDataError(f"{name} must be {_wanted(expected)}, got {describe(value)}")
        for i, item in enumerate(value):
            check_plain(item, args[0] if args else object, f"{name}[{i}]")
        return
    elif origin in (dict, Mapping) or expected in (dict, Mapping):
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise StoredDataError(f"{name} must be {_wanted(expected)}, got {describe(value)}")
        for k, item in value.items():
            check_plain(item, args[1] if args else object, f"{name}[{k!r}]")
        return
    elif isinstance(expected, type) and dataclasses.is_dataclass(expected):
        if not isinstance(value, Mapping):
            raise StoredDataError(f"{name} must be a mapping of {expected.__name__}'s fields, got {describe(value)}")
        check_record(expected, value, name)
        return
    else:
        raise TypeError(f"`expected` must be an annotation of plain data, got {expected!r} (for {name})")
    if not ok:
        _refuse(value, expected, name, args)


def _fits(value: object, expected: Any) -> bool:
    """Whether ``check_plain`` passes."""
    try:
        check_plain(value, expected, "")
    except StoredDataError:
        return False
    return True


def _refuse(value: object, expected: Any, name: str, args: tuple[Any, ...]) -> None:
    """Raise for ``value``; a container in a union that allows one gets the container's message (its bad item)."""
    for kind in args:
        origin = typing.get_origin(kind)
        if (origin in (list, tuple, Sequence) and isinstance(value, (list, tuple))) or (
            origin in (dict, Mapping) and isinstance(value, Mapping)
        ):
            check_plain(value, kind, name)
    raise StoredDataError(f"{name} must be {_wanted(expected)}, got {describe(value)}")


def _check_numbers(value: object, name: str) -> None:
    """Raise unless ``value`` is a number or nested lists of numbers (a tensor as files keep it)."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_numbers(item, f"{name}[{i}]")
    elif not isinstance(value, (bool, int, float)):
        raise StoredDataError(f"{name} must be a number (a tensor is kept as nested lists), got {describe(value)}")


def check_record(kind: type, plain: Mapping[str, object], name: str, fields: Optional[Sequence[str]] = None) -> None:
    """Raise unless every field of the dataclass ``kind`` that ``plain`` holds is of its annotation.

    Args:
        kind: the record's dataclass.
        plain: its plain data (fields it lacks are not checked; the caller decides whether it needs them).
        name: where ``plain`` is kept, for the message (e.g. "meta['tabular']").
        fields: the fields to check (default: all of ``kind``'s).

    Raises:
        StoredDataError: a field of another kind, named as ``name['field']``.
    """
    hints = _hints(kind)
    names = [f.name for f in dataclasses.fields(kind)] if fields is None else list(fields)
    for field in names:
        if field in plain:
            check_plain(plain[field], hints[field], f"{name}[{field!r}]")
