"""The counter-based hash every random number of a call comes from, in torch (``hash_words.py``'s reference).

A row (an input ``b`` and a sample ``s``) and a stream hash to one 32-bit word; column ``j`` of the row
hashes that word with ``j``. The same key, row, stream and column give the same bits on every device,
in every chunk and in any order. All arithmetic is on int64 tensors holding values in [0, 2**32).
Only absolute imports of torch: it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

import torch

__all__ = ["GOLDEN", "M32", "mix32", "row_hash_torch", "hash_words_torch"]

M32 = 0xFFFFFFFF
GOLDEN = 0x9E3779B9
_MIX_A, _MIX_B = 0x7FEB352D, 0x846CA68B  # the "lowbias32" multipliers


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``x * c mod 2**32`` for 0 <= x < 2**32 and 0 <= c < 2**32 without int64 overflow, in two tensor ops.

    A constant of 2**31 or more is replaced by ``c - 2**32`` (equal mod 2**32), so ``|x * c| < 2**63``; the
    mask keeps the low 32 bits of the (two's complement) product.
    """
    signed = c - (1 << 32) if c >= 1 << 31 else c
    return (x * signed) & M32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash (the "lowbias32" mixer) of long tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, _MIX_A)
    x = x ^ (x >> 15)
    x = _mul32(x, _MIX_B)
    return x ^ (x >> 16)


def row_hash_torch(key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, stream: int) -> torch.Tensor:
    """Long (c,) the hash of every row's (key, input, sample, stream), in [0, 2**32).

    Args:
        key: long (2,) the call's key (low and high 32-bit words).
        inputs: long (c,) each row's input.
        samples: long (c,) each row's sample.
        stream: which independent stream of numbers (a non-negative int).
    """
    h = mix32(key[0] ^ (inputs & M32))
    h = mix32(h ^ key[1] ^ ((inputs >> 32) & M32))
    h = mix32(h ^ (samples & M32))
    return mix32((h + stream * GOLDEN) & M32)


def hash_words_torch(
    key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, stream: int, width: int
) -> torch.Tensor:
    """Long (c, width) words in [0, 2**32): the row hash of every row mixed with each column.

    Args:
        key: long (2,) the call's key.
        inputs: long (c,) each row's input.
        samples: long (c,) each row's sample.
        stream: which independent stream of numbers.
        width: the number of columns.

    Example:
        >>> key, rows = torch.tensor([1, 2]), torch.arange(3)
        >>> hash_words_torch(key, rows, rows, 0, 4).shape
        torch.Size([3, 4])
    """
    h = row_hash_torch(key, inputs, samples, stream)
    cols = mix32(torch.arange(width, device=h.device, dtype=torch.long) * GOLDEN & M32)
    return mix32(h.unsqueeze(1) ^ cols)
