"""What rows of a result folder need to become an ``Explanation``: their record and checks of given maps.

The shards of the third format hold each input's feature map (``_rows``), so ``Results.explanation()``
paints and draws exactly what the run computed: ``heatmap()`` of the rows read back equals the heat map
of the explanation the run made, bit for bit. Folders of the second format (or a ``keep`` without "features")
hold no maps: the maps are then rebuilt by the caller (the images' segments, as the run made them) and
given as ``features=``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from torchlime._util.checks import describe
from torchlime.engine.info import Info


@dataclass(frozen=True)
class RowsInfo(Info):
    """What rows read back from a result folder record besides their tensors (``Explanation.info``).

    Attributes:
        samples_used: the samples each row's explanation drew (n,), as the run recorded them; ``meta``
            shows them at its top level, as an explanation's run record does.
    """

    key: ClassVar[str] = "results"
    per_input: ClassVar[tuple[str, ...]] = ("samples_used",)
    transient: ClassVar[tuple[str, ...]] = ("samples_used",)

    samples_used: list[int]

    def top_level(self) -> dict[str, object]:
        """``meta["samples_used"]``: the rows' sample counts."""
        return {"samples_used": list(self.samples_used)}


NO_MAPS = (
    "these results hold no feature maps (their folder was written in format 'torchlime.dataset/2' by an earlier "
    "torchlime, or with a keep= without 'features')"
)


def checked_features(features: object, n: int, f_max: int) -> torch.Tensor:
    """Given feature maps: an integer tensor (n or 1, ...) of ids below F_max, as long (n, ...)."""
    if not isinstance(features, torch.Tensor) or features.is_floating_point() or features.is_complex():
        raise TypeError(
            f"`features` must be an integer tensor (n or 1, *fshape) of feature ids, got {describe(features)}"
        )
    if features.ndim < 2 or features.shape[0] not in (1, n):
        raise ValueError(
            f"`features` must have shape ({n} or 1, *fshape): a map per input or one for all, got "
            f"{tuple(features.shape)}"
        )
    if features.numel() and int(features.max()) >= f_max:
        raise ValueError(
            f"`features` must number at most the {f_max} features of the results (ids -1..{f_max - 1}), "
            f"got ids up to {int(features.max())}"
        )
    feats = features.detach().cpu().long()
    return feats.expand(n, *feats.shape[1:]) if feats.shape[0] != n else feats


def checked_shape(input_shape: object, features: torch.Tensor) -> tuple[int, ...]:
    """``input_shape`` as a tuple of ints the feature maps broadcast to."""
    if not isinstance(input_shape, (tuple, list)) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in input_shape
    ):
        raise TypeError(f"`input_shape` must be a tuple of ints >= 1 (one input's shape), got {describe(input_shape)}")
    shape = tuple(input_shape)
    fshape = tuple(features.shape[1:])
    if len(fshape) != len(shape) or any(f not in (1, s) for f, s in zip(fshape, shape)):
        raise ValueError(
            f"`input_shape` must be a shape the feature maps {fshape} broadcast to (dims equal or 1 in the maps), "
            f"got {shape}"
        )
    return shape
