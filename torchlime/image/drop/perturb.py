"""Dropped patch tokens: the engine's perturbation and the model it runs.

A row keeps the prefix tokens (class, distillation, register) and the patch tokens of its kept
features; the others are not in its sequence at all. Rows of equal kept count run together, so no
row is padded: the engine sorts each pass by kept count (``PatchDrop.order_key``) and hands every
chunk its rows' counts on the host (``Chunk.keys``), so splitting a chunk into equal-length groups
needs no host synchronisation. Chunks built without keys (a metric replaying masks) sort themselves,
reading the counts back once per chunk. The patch embedding runs once per chunk on the chunk's inputs,
not once per row: a kept token's embedding does not depend on the others.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from torchlime.image.drop.families import ViTFamily
from torchlime.stages.perturb.blend import Chunk
from torchlime.stages.perturb.fills import Fill, FillContext

#: (rows, kept patch tokens) of each equal-length group of a chunk, in the chunk's row order
Groups = tuple[tuple[int, int], ...]


class DroppedTokens(Fill):
    """The fill of ``baseline="drop"``: nothing, the hidden patches leave the sequence (recorded as "drop")."""

    def __call__(self, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:
        """Zeros (never read: the perturbation drops tokens instead of blending).

        Args:
            inputs: (B, ...) the inputs.
            ctx: the call's fill context.

        Returns:
            Zeros like ``inputs``.
        """
        return torch.zeros_like(inputs)

    def __repr__(self) -> str:
        """``'drop'``, as the explanation records the baseline."""
        return "drop"


def runs(keys: Sequence[int]) -> Groups:
    """Run lengths of equal consecutive keys: ``((count, key), ...)``.

    Args:
        keys: host ints.

    Returns:
        The groups, in order.

    Example:
        >>> runs([4, 4, 2, 3, 3])
        ((2, 4), (1, 2), (2, 3))
    """
    out: list[tuple[int, int]] = []
    for k in keys:  # host ints of one chunk
        if out and out[-1][1] == k:
            out[-1] = (out[-1][0] + 1, k)
        else:
            out.append((1, int(k)))
    return tuple(out)


class PatchDrop:
    """The engine's ``perturb_fn`` for dropped patch tokens (an ``OrderedPerturbFn``).

    Args:
        patch: the patch side in pixels (the feature map is constant on every patch).
        normalize: ``(mean, std)`` (C,) tensors the model's inputs are normalised with, or None.
    """

    def __init__(self, patch: int, normalize: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> None:
        self.patch, self.normalize = patch, normalize

    def token_columns(self, index: torch.Tensor) -> torch.Tensor:
        """Long (B or 1, P) mask column of every patch token, row-major over the patch grid.

        Args:
            index: long (B or 1, 1, H, W) mask column of every pixel (constant on each patch).
        """
        p = self.patch
        return index[:, 0, ::p, ::p].reshape(index.shape[0], -1)

    def keep(self, index: torch.Tensor, masks: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Bool (c, P): the patch tokens each row keeps.

        Args:
            index: long (B or 1, 1, H, W) mask columns.
            masks: bool (c, F') the rows' masks.
            rows: long (c,) the explained input of every row.
        """
        cols = self.token_columns(index)
        cols = cols.expand(rows.shape[0], -1) if cols.shape[0] == 1 else cols[rows]
        return masks.gather(1, cols)

    def order_key(self, index: torch.Tensor, masks: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Long (c,) kept patch tokens of every row: the engine sorts a pass by it.

        Args:
            index: long (B or 1, 1, H, W) mask columns.
            masks: bool (c, F') the rows' masks.
            rows: long (c,) the explained input of every row.
        """
        return self.keep(index, masks, rows).sum(1)

    def __call__(
        self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Optional[Groups]]:
        """The model input of a chunk: its images, each row's image, kept tokens and groups.

        Args:
            inputs: (B, C, H, W) the images.
            baseline: unused (nothing is filled).
            index: long (B or 1, 1, H, W) mask columns.
            chunk: the rows.

        Returns:
            ``(images (n, C, H, W), image of each row (c,), keep (c, P), groups or None)``.
        """
        keep = self.keep(index, chunk.masks, chunk.rows)
        if chunk.first == chunk.last:  # one input: embed it once
            images, rows = inputs[chunk.first : chunk.first + 1], torch.zeros_like(chunk.rows)
        else:
            images, rows = inputs, chunk.rows
        if self.normalize is not None:
            mean, std = self.normalize
            shape = (1, -1) + (1,) * (images.dim() - 2)
            images = (images - mean.view(shape)) / std.view(shape)
        return images, rows, keep, None if chunk.keys is None else runs(chunk.keys)


class DropModel(nn.Module):
    """Runs a vision transformer on rows that keep only some of their patch tokens.

    Args:
        family: the model's family adapter (``families.vit_family``).
    """

    def __init__(self, family: ViTFamily) -> None:
        super().__init__()
        self.family = family
        self.model = family.model  # a submodule, so ``.eval()`` / ``.to()`` reach it

    @property
    def cache_identity(self) -> nn.Module:
        """The wrapped model: keys the measured chunk size (wrappers are made per call)."""
        return self.model

    def forward(
        self, images: torch.Tensor, rows: torch.Tensor, keep: torch.Tensor, groups: Optional[Groups] = None
    ) -> torch.Tensor:
        """Outputs (c, K) of the rows, in their order.

        Args:
            images: (n, C, H, W) the chunk's images, as the model takes them.
            rows: long (c,) the image of every row.
            keep: bool (c, P) the patch tokens every row keeps.
            groups: ``((rows, kept), ...)`` equal-length runs of the rows, or None (sorted here).

        Returns:
            (c, K) the model's outputs.
        """
        tokens = self.family.embed(images)
        order: Optional[torch.Tensor] = None
        if groups is None:  # rows not sorted by the engine: sort them here (one read-back)
            counts = keep.sum(1)
            order = torch.argsort(counts, stable=True)
            rows, keep = rows[order], keep[order]
            groups = runs(counts[order].tolist())
        prefix = torch.arange(self.family.n_prefix, device=keep.device)
        outs, start = [], 0
        for size, kept in groups:  # a few equal-length groups per chunk, not rows
            k = keep[start : start + size]
            pos = torch.sort((~k).to(torch.uint8), dim=1, stable=True).indices[:, :kept] + self.family.n_prefix
            idx = torch.cat([prefix.expand(size, -1), pos], dim=1)
            outs.append(self.family.encode(tokens[rows[start : start + size, None], idx]))
            start += size
        out = torch.cat(outs)
        if order is not None:
            out = out[torch.argsort(order)]
        return out
