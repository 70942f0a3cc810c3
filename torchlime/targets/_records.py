"""The typed records of the structured targets (``Bound.info``, ``Explanation.run.targets``).

Each is a ``TargetInfo`` named by its ``kind`` (what ``Explanation.meta["targets"]["kind"]`` and files say), with
the display hooks the pictures read: ``caption``, ``outline`` and ``noun``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Optional

import torch

from torchlime.targets.base import TargetInfo


@dataclasses.dataclass(frozen=True)
class BoxesInfo(TargetInfo):
    """The target boxes of ``Boxes`` (``Explanation.run.targets``; ``meta["targets"]``: kind "boxes").

    Attributes:
        boxes: (B, T, 4) each input's target boxes (x1, y1, x2, y2 in input pixels) as nested lists,
            padding as zeros.
    """

    kind: ClassVar[str] = "boxes"
    noun: ClassVar[str] = "box of class"
    per_input: ClassVar[tuple[str, ...]] = ("boxes",)

    boxes: list[list[list[float]]]

    def caption(self, t: int, b: int, label: int) -> str:
        """The caption "box t (label l) at [x1, y1, x2, y2]"."""
        box = self.outline(t, b) or []
        return f"box {t} (label {label}) at {[round(float(v), 1) for v in box]}"

    def outline(self, t: int, b: int) -> Optional[list[float]]:
        """Target ``t``'s box in input ``b``."""
        return self.boxes[b][t] if b < len(self.boxes) and t < len(self.boxes[b]) else None


@dataclasses.dataclass(frozen=True)
class RegionInfo(TargetInfo):
    """The regions of ``Region`` (``Explanation.run.targets``; ``meta["targets"]``: kind "region").

    Attributes:
        reduce: "mean" or "sum".
        probability: whether softmax probabilities were scored.
        source: "mask" (regions given) or "prediction" (the predicted classes' pixels).
        regions: bool (B, T, H, W) each target's pixels on the score grid, or None (an explanation read
            from a file); in memory only.
    """

    kind: ClassVar[str] = "region"
    noun: ClassVar[str] = "class"
    per_input: ClassVar[tuple[str, ...]] = ("regions",)
    transient: ClassVar[tuple[str, ...]] = ("regions",)

    reduce: str
    probability: bool
    source: str
    regions: Optional[torch.Tensor] = None

    def caption(self, t: int, b: int, label: int) -> str:
        """The caption "class l"."""
        return f"class {label}"


@dataclasses.dataclass(frozen=True)
class SimilarityInfo(TargetInfo):
    """``Similarity``'s record (``meta["targets"]``: kind "similarity"): its targets are the references."""

    kind: ClassVar[str] = "similarity"
    noun: ClassVar[str] = "reference"

    def caption(self, t: int, b: int, label: int) -> str:
        """The caption "reference l"."""
        return f"reference {label}"


@dataclasses.dataclass(frozen=True)
class ContinuationInfo(TargetInfo):
    """The continuation ``Continuation`` scores (``meta["targets"]``: kind "continuation").

    Attributes:
        token_ids: long (B, G) the continuation's tokens.
        start: long (B,) where each input's continuation starts in the model's rows.
        per_token: whether targets 1..G are the tokens one by one (target 0: the whole continuation).
    """

    kind: ClassVar[str] = "continuation"
    per_input: ClassVar[tuple[str, ...]] = ("token_ids", "start")

    token_ids: torch.Tensor
    start: torch.Tensor
    per_token: bool

    def caption(self, t: int, b: int, label: int) -> str:
        """The caption "the whole continuation" (t = 0), else "token t-1"."""
        return "the whole continuation" if t == 0 else f"token {t - 1}"

    @classmethod
    def rebuild(cls, given: dict[str, object]) -> TargetInfo:
        """The record from plain data: the token ids and starts as long tensors."""
        ids, start = torch.tensor(given["token_ids"], dtype=torch.long), torch.tensor(given["start"], dtype=torch.long)
        return cls(ids, start, bool(given["per_token"]))


@dataclasses.dataclass(frozen=True)
class TranscriptInfo(TargetInfo):
    """The transcript ``Transcript`` scores (``meta["targets"]``: kind "transcript").

    Attributes:
        token_ids: each input's transcript as label ids (ragged lists).
    """

    kind: ClassVar[str] = "transcript"
    per_input: ClassVar[tuple[str, ...]] = ("token_ids",)

    token_ids: list[list[int]]

    def caption(self, t: int, b: int, label: int) -> str:
        """The caption "the whole transcript" (t = 0), else "word t-1"."""
        return "the whole transcript" if t == 0 else f"word {t - 1}"
