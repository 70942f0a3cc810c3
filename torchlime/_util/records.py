"""The base of the typed records an explanation carries: some fields hold one entry per input."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, TypeVar

RecordT = TypeVar("RecordT", bound="PerInput")


@dataclass(frozen=True)
class PerInput:
    """Base of a frozen record whose ``per_input`` fields hold one entry per input (a list or B rows).

    ``per_input`` names them, so that ``Explanation[i]`` keeps the right ones (``select``); ``transient``
    names the fields kept in memory only, never in ``Explanation.meta`` nor in files. A modality's record
    (``engine.info.Info``) and a structured target's (``targets.TargetInfo``) are such records.
    """

    per_input: ClassVar[tuple[str, ...]] = ()
    transient: ClassVar[tuple[str, ...]] = ()

    def select(self: RecordT, start: int, stop: int) -> RecordT:
        """The record of inputs ``start:stop``.

        Args:
            start: the first input kept.
            stop: one past the last input kept.

        Returns:
            A record of the same kind with the per-input fields sliced (those that are None stay None).
        """
        cut = {k: getattr(self, k)[start:stop] for k in self.per_input if getattr(self, k) is not None}
        return dataclasses.replace(self, **cut)
