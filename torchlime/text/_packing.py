"""Rows packed by length for delete-mode text: their lengths, the cut, and a chunk run as two calls.

Helpers of ``edits.PackedDeleteTokens``: ``deleted_length`` is the sort key the engine orders a pass by,
``trim_packed`` cuts a chunk to its longest row without a host synchronisation, ``head_rows`` says
when the unperturbed inputs at the head of a pass run apart from the sorted rows, and
``join_outputs`` joins the outputs of a chunk run as two model calls.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import torch

from torchlime.targets.base import cat_rows


def deleted_length(attn: torch.Tensor, keep: torch.Tensor, left: torch.Tensor) -> torch.Tensor:
    """Columns every row needs once its hidden tokens are deleted (``edits.delete_tokens``), as long (c,).

    A re-packed row needs its kept attended tokens (special tokens included); a row with every
    token kept comes back as it was, so it needs its extent from the side it is not padded on
    (for a right-padded batch, the last attended position + 1).

    Args:
        attn: (c, L) attention mask.
        keep: bool (c, L) the tokens kept.
        left: bool, broadcastable to (c,): the batch is padded on the left (``edits.padded_left``).

    Returns:
        Long (c,) lengths in 0..L.

    Example:
        >>> attn = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]])
        >>> deleted_length(attn, torch.tensor([[True, False, True, True], [True] * 4]), torch.tensor(False)).tolist()
        [2, 3]
    """
    attended = attn != 0
    present = keep & attended
    whole = (present == attended).all(1)
    length = attn.shape[1]
    pos = torch.arange(length, device=attn.device)
    right_extent = torch.where(attended, pos + 1, 0).amax(1)
    left_extent = torch.where(attended, length - pos, 0).amax(1)
    extent = torch.where(left, left_extent, right_extent)
    return torch.where(whole, extent, present.sum(1))


def trim_packed(packed: torch.Tensor, width: int, left: torch.Tensor) -> torch.Tensor:
    """The ``width`` columns of packed rows (c, 2, L) that hold their tokens, without a host synchronisation.

    Args:
        packed: long (c, 2, L) re-packed rows (``edits.delete_tokens``, then ``edits.pack``).
        width: the columns kept (a host int; ``width >= L`` keeps the rows as they are).
        left: 0-d bool on the device: keep the last ``width`` columns (left-padded rows), else the first.

    Returns:
        (c, 2, min(width, L)) rows.

    Example:
        >>> rows = torch.tensor([[[5, 7, 0, 0], [1, 1, 0, 0]]])
        >>> trim_packed(rows, 2, torch.tensor(False)).tolist()
        [[[5, 7], [1, 1]]]
    """
    length = packed.shape[-1]
    if width >= length:
        return packed
    cols = torch.arange(width, device=packed.device) + left.to(torch.long) * (length - width)
    return packed.index_select(2, cols)


def head_rows(keys: Sequence[int], gain: float = 0.9) -> int:
    """Rows before the ascending run that ends a chunk's keys, worth running apart; else 0.

    The engine puts the unperturbed inputs (all their tokens) first, then the rows sorted by length:
    the first chunk of a pass then runs as two model calls, each cut to its own longest row, when that
    costs at most ``gain`` of the columns of one call.

    Args:
        keys: the chunk's ``order_key`` values (host ints).
        gain: the largest fraction of the columns the two calls may take.

    Returns:
        The rows of the first call (0: one call).

    Example:
        >>> head_rows([96, 40, 41, 45]), head_rows([40, 41, 45]), head_rows([50, 49, 49])
        (1, 0, 0)
    """
    head = max((i for i in range(1, len(keys)) if keys[i] < keys[i - 1]), default=0)  # host ints of a chunk
    if head == 0:
        return 0
    apart = head * max(keys[:head]) + (len(keys) - head) * max(keys[head:])
    return head if apart <= gain * len(keys) * max(keys) else 0


def join_outputs(parts: list[object]) -> object:
    """Raw outputs of consecutive rows joined along the rows; a Hugging Face ``ModelOutput`` stays one.

    Args:
        parts: the outputs, each of one structure (``targets.base.cat_rows``).

    Returns:
        One output of all their rows.
    """
    joined, first = cat_rows(parts), parts[0]
    if len(parts) > 1 and isinstance(first, dict) and type(first) is not dict and isinstance(joined, dict):
        with contextlib.suppress(TypeError):  # a dict subclass built from keywords (``ModelOutput``)
            return type(first)(**joined)
    return joined
