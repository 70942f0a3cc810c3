"""What the image pictures share: the top segments of each row, and an image as an array to draw.

``viz`` (the four panels), ``viz_boxes`` (detector boxes) and ``viz_regions`` (segmenter regions) all read
these, so that none of them imports another picture module for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from torchlime.image.segments import unit_range

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def top_segments(key: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Long (..., k') indices of the ``k`` largest keys among the valid features (k' = min(k, F)).

    Args:
        key: (..., F) the order (e.g. |coef|).
        valid: bool (..., F) the features that exist (padding excluded), broadcastable to ``key``.
        k: how many.
    """
    key = key.masked_fill(~valid, float("-inf"))
    return key.topk(min(k, key.shape[-1]), dim=-1).indices


def to_hwc(image: torch.Tensor) -> NDArray[np.float32]:
    """(C, H, W) as an (H, W[, 3]) array in [0, 1], rescaled as the segmenters see it (``unit_range``)."""
    img = unit_range(image.detach().float().cpu()[None])[0].clamp(0, 1)
    return img.permute(1, 2, 0).squeeze(-1).numpy() if img.shape[0] in (1, 3) else img[:3].permute(1, 2, 0).numpy()
