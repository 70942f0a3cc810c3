"""The counter-based hash words of a block of rows in one launch (Triton).

``hash_words(key, inputs, samples, stream, width)`` gives the long (c, width) words that
``reference_hash.hash_words_torch`` gives, bit for bit: the same int64 arithmetic on values in
[0, 2**32), fused. The torch reference takes about 60 small operations (six rounds of the 32-bit
mixer), each a launch on a GPU; the masks of every chunk start from these words. Only absolute imports
of torch/triton and relative imports inside this folder: it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .reference import launch_device
from .reference_hash import GOLDEN, M32, hash_words_torch

__all__ = ["supports", "hash_words", "hash_words_torch", "interpreted"]

ELEMENTS = 2048  # words per program
_MAX_GRID_Y = 65535  # CUDA limit of grid dim 1


@triton.jit
def _mix(x):  # type: ignore[no-untyped-def]  # triton reads jit annotations
    """The "lowbias32" mixer on int64 values in [0, 2**32), as ``reference_hash.mix32``."""
    x = x ^ (x >> 16)
    x = (x * 2146121005) & 0xFFFFFFFF  # 0x7FEB352D
    x = x ^ (x >> 15)
    x = (x * -2073254261) & 0xFFFFFFFF  # 0x846CA68B - 2**32: the same product mod 2**32
    return x ^ (x >> 16)


@triton.jit
def _hash_words_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    key_ptr,
    inputs_ptr,
    samples_ptr,
    out_ptr,
    c,
    width,
    stream_term,
    BLOCK_R: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    in_rows = rows < c
    k0 = tl.load(key_ptr)
    k1 = tl.load(key_ptr + 1)
    b = tl.load(inputs_ptr + rows, mask=in_rows, other=0)
    s = tl.load(samples_ptr + rows, mask=in_rows, other=0)
    h = _mix(k0 ^ (b & 0xFFFFFFFF))
    h = _mix(h ^ k1 ^ ((b >> 32) & 0xFFFFFFFF))
    h = _mix(h ^ (s & 0xFFFFFFFF))
    h = _mix((h + stream_term) & 0xFFFFFFFF)
    j = cols.to(tl.int64)
    w = _mix((j * 0x9E3779B9) & 0xFFFFFFFF)
    out = _mix(h[:, None] ^ w[None, :])
    offsets = rows.to(tl.int64)[:, None] * width + j[None, :]
    tl.store(out_ptr + offsets, out, mask=in_rows[:, None] & (cols[None, :] < width))


def interpreted() -> bool:
    """True when this module was imported under ``TRITON_INTERPRET=1`` (the kernel runs on CPU tensors)."""
    return not isinstance(_hash_words_kernel, JITFunction)


def supports(key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, width: int) -> bool:
    """Whether ``hash_words`` takes these operands (else use ``hash_words_torch``).

    Args:
        key: long (2,) the call's key.
        inputs: long (c,) each row's input.
        samples: long (c,) each row's sample.
        width: the number of columns.
    """
    dev = inputs.device
    if not (dev.type == "cuda" or (dev.type == "cpu" and interpreted())):
        return False
    ops = (key, inputs, samples)
    if any(t.dtype != torch.long or t.device != dev or t.dim() != 1 or not t.is_contiguous() for t in ops):
        return False
    if key.numel() != 2 or samples.numel() != inputs.numel() or width < 1:
        return False
    block_w = min(triton.next_power_of_2(width), 64)
    return triton.cdiv(width, block_w) <= _MAX_GRID_Y


def hash_words(key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, stream: int, width: int) -> torch.Tensor:
    """Long (c, width): ``hash_words_torch(key, inputs, samples, stream, width)`` in one launch.

    The arguments are the reference's; ``supports`` must hold for them.
    """
    c = inputs.numel()
    out = torch.empty(c, width, dtype=torch.long, device=inputs.device)
    if c == 0:
        return out
    block_w = min(triton.next_power_of_2(width), 64)
    block_r = max(1, ELEMENTS // block_w)
    grid = (triton.cdiv(c, block_r), triton.cdiv(width, block_w))
    with launch_device(inputs):
        _hash_words_kernel[grid](
            key, inputs, samples, out, c, width, (stream * GOLDEN) & M32, BLOCK_R=block_r, BLOCK_W=block_w
        )
    return out
