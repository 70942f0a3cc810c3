"""Stage 1: interpretable features.

A feature map assigns every element of an input to one of F interpretable
features (a superpixel, a time-frequency cell, a word). Users may pass any
integer ids (scikit-image's SLIC starts at 1, a mask may skip ids); this module
relabels them to ``0..F_b-1`` for every input ``b`` independently, keeping the
order of the original ids. Negative ids mark elements that belong to no
feature (padding, special tokens): they become -1 and are never perturbed.
"""
from __future__ import annotations

import torch

from ._checks import check_integer, check_tensor


def relabel(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Relabel each input's feature ids to contiguous ``0..F_b-1``.

    Args:
        features: integer tensor (B, ...), one feature map per input.

    Returns:
        ``(labels, n_features)``: ``labels`` long (B, ...) with the same shape
        (-1 where the id was negative), ``n_features`` long (B,) holding F_b, the
        number of distinct non-negative ids of input b.

    Example:
        >>> labels, n = relabel(torch.tensor([[5, 5, 9], [1, 2, 3]]))
        >>> labels.tolist(), n.tolist()
        ([[0, 0, 1], [0, 1, 2]], [2, 3])
    """
    check_tensor(features, "features")
    check_integer(features, "features")
    batch = features.shape[0]
    flat = features.reshape(batch, -1).long()
    negative = flat < 0
    flat = torch.where(negative, flat.max() + 1, flat)  # sorts last, removed below
    lo = flat.min()
    span = flat.max() - lo + 1
    rows = torch.arange(batch, device=flat.device).unsqueeze(1)
    keys = rows * span + (flat - lo)
    uniq, inverse = torch.unique(keys, sorted=True, return_inverse=True)
    counts = torch.bincount(uniq // span, minlength=batch)
    first = torch.cumsum(counts, 0) - counts
    labels = (inverse - first[rows]).masked_fill(negative, -1)
    counts = counts - negative.any(1).long()
    return labels.reshape(features.shape), counts
