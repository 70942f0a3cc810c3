"""Typed records that explanations carry besides their tensors: what a modality built (``Info``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional, TypeVar

import torch

InfoT = TypeVar("InfoT", bound="Info")
#: every record kind by its ``key``, for explanations read back from files (``rebuild``)
_KINDS: dict[str, type[Info]] = {}


@dataclass(frozen=True)
class Info:
    """Base of a modality's record on its explanations (``Explanation.info``).

    A subclass is a frozen dataclass of plain values, tensors and lists; ``per_input`` names the
    fields that hold one entry per input, so that ``Explanation[i]`` keeps the right ones.
    ``key`` is the name under which ``Explanation.meta`` shows the record as plain data.
    """

    key: ClassVar[str] = "info"
    per_input: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Register a kind that names its own ``key``."""
        super().__init_subclass__(**kwargs)
        if "key" in cls.__dict__:
            _KINDS[cls.key] = cls

    @classmethod
    def from_plain(cls, plain: object) -> Optional[Info]:
        """The record from the plain data ``as_plain`` wrote, or None where a kind cannot rebuild it.

        Args:
            plain: ``meta[key]`` of an explanation read back from a file.

        Returns:
            None here; kinds whose records files must keep (e.g. the tabular bins) override it.
        """
        return None

    def feature_labels(self, index: int) -> Optional[list[str]]:
        """The names of input ``index``'s features (its words, the table's columns), where the kind has them.

        Args:
            index: the input.

        Returns:
            One name per feature, or None (the pictures then say "feature j").
        """
        return None

    def text_pieces(self, index: int) -> Optional[tuple[list[str], list[int]]]:
        """Input ``index`` as running text: its pieces and each piece's feature (-1: never hidden).

        Args:
            index: the input.

        Returns:
            ``(pieces, piece_features)`` for explanations of raw text, else None.
        """
        return None

    def select(self: InfoT, start: int, stop: int) -> InfoT:
        """The record of inputs ``start:stop``.

        Args:
            start: first input kept.
            stop: one past the last input kept.

        Returns:
            A record of the same kind with the per-input fields sliced.
        """
        cut = {k: getattr(self, k)[start:stop] for k in self.per_input if getattr(self, k) is not None}
        return dataclasses.replace(self, **cut)

    def as_plain(self) -> dict[str, object]:
        """The record as plain data (tensors become lists): what ``meta[key]`` shows and files store."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if not f.name.startswith("_")}


def _plain(value: object) -> object:
    """Tensors (at any depth of lists, tuples and dicts) as nested lists."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def rebuild(meta: Mapping[str, object]) -> Optional[Info]:
    """The typed record of an explanation read back from a file, from its plain ``meta``.

    Args:
        meta: the explanation's ``meta``.

    Returns:
        The record of the first registered kind whose key ``meta`` holds and that can rebuild it, else None.
    """
    for key, kind in _KINDS.items():
        if key in meta:
            try:
                record = kind.from_plain(meta[key])
            except (TypeError, ValueError):  # plain data of another version: the record stays untyped
                record = None
            if record is not None:
                return record
    return None
