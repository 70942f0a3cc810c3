"""``ImagesInfo``: the record an image explanation carries (shared by the fill and the token-drop paths)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

import torch

from torchlime.engine.info import Previewed, Thumbnails, check_record


@dataclass(frozen=True)
class ImagesInfo(Previewed):
    """The record of an image explanation (``Explanation.info``; ``meta["image"]``).

    Attributes:
        segments: how the segments were made: a method name ("slic", "grid", "quickshift", ...),
            "labels" (the caller's tensor) or "callable" (the caller's function).
        n_segments: the segment count asked of SLIC or "grid" (the default rule's choice for "auto").
        normalized: whether the model saw ``(x - mean) / std``.
        previews: (read-only property) uint8 (B, 3, h, w) small copies of the images (``Info.thumbnails``:
            longer side at most 96 px, on the images' device, made without a host sync), which the notebook
            display draws the weights over (``Info.preview``); left out of ``meta["image"]`` and of saved
            files. They are made on first read from the images the call held (``preview_source``, an
            ``engine.info.Thumbnails``), so a call pays nothing for them; None where there are none, or
            where the images were written in place since the call.
        preview_source: the pictures as the call kept them: an ``engine.info.Thumbnails`` (made on first
            read), uint8 (B, 3, h, w) pictures, or None.
    """

    key: ClassVar[str] = "image"

    segments: str
    n_segments: int
    normalized: bool
    preview_source: Union[Thumbnails, torch.Tensor, None] = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_plain(cls, plain: object) -> Optional[ImagesInfo]:
        """The record from ``meta["image"]`` of a loaded explanation (no previews), else None.

        Raises:
            StoredDataError: a field of another kind (a ``ValueError`` naming it).
        """
        if not isinstance(plain, Mapping) or set(plain) != {"segments", "n_segments", "normalized"}:
            return None
        check_record(cls, plain, "meta['image']")
        return cls(str(plain["segments"]), int(plain["n_segments"]), bool(plain["normalized"]))
