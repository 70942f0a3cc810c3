"""The default chunk-size rules: rows per chunk from a row's bytes (CPU) or its measured peak memory (CUDA).

``chunking.ChunkPlan`` applies them; they are apart so that each can be read and tested alone.
"""

from __future__ import annotations

from typing import Optional

import torch

MAX_CHUNK = 4096
CPU_CHUNK_BYTES = 16 * 2**20  # default rule on the CPU: rows per chunk = this / bytes of one input row
#: default rule on the CPU for token rows: rows per chunk <= this / sequence length: it bounds the activations
#: a chunk holds (a BERT-base layer's feed-forward ones: 8192 x 3072 floats); a BERT-base classifier's time per
#: row at 96 tokens was flat from 16 to 256 rows a chunk (``benchmarks/bench_text_packing.py``)
CPU_CHUNK_TOKENS = 8192
CUDA_MAX_CHUNK = 1024
#: default rule on CUDA for light rows: up to this much peak memory a chunk, and this many rows (an audio CNN on
#: 129 x 63 spectrograms ran at 1024 rows a chunk 3.6x its forward floor on an H200: launch-bound chunks)
CUDA_LIGHT_BYTES = 2 * 2**30
CUDA_MAX_ROWS = 8192
#: per-row shapes / dtypes / layout of the chunks (part of the cache key)
Signature = tuple[object, ...]


def row_bytes(signature: Signature) -> int:
    """Bytes of one input row, read from a chunk signature (its row shape and dtype name).

    Args:
        signature: e.g. ``((3, 224, 224), "torch.float32", ...)``; ints outside a shape count as
            elements (``("tokens", 128)``), an unknown dtype as 4 bytes.

    Returns:
        The row's bytes (at least 1).
    """
    numel, itemsize = 1, 4
    shape = next((x for x in signature if isinstance(x, tuple)), None)
    for n in shape if shape is not None else (x for x in signature if isinstance(x, int) and not isinstance(x, bool)):
        numel *= int(n) if isinstance(n, int) else 1
    name = next((x for x in signature if isinstance(x, str) and x.startswith("torch.")), None)
    dtype = getattr(torch, name[len("torch.") :], None) if name else None
    if isinstance(dtype, torch.dtype):
        itemsize = dtype.itemsize
    return max(1, numel * itemsize)


def sequence_length(signature: Signature) -> Optional[int]:
    """L of token rows (the text modalities' packed integer (2, L) ids and mask, or ``("tokens", L)``), else None.

    Args:
        signature: e.g. ``((2, 96), "torch.int64", False, False)``; an image's ``((3, 8, 8), "torch.uint8")`` -> None.
    """
    if len(signature) >= 2 and signature[0] == "tokens" and isinstance(signature[1], int):
        return max(1, signature[1])
    shape = next((x for x in signature if isinstance(x, tuple)), None)
    name = next((x for x in signature if isinstance(x, str) and x.startswith("torch.")), None)
    dtype = getattr(torch, name[len("torch.") :], None) if name else None
    integer = isinstance(dtype, torch.dtype) and not dtype.is_floating_point and not dtype.is_complex
    if integer and dtype != torch.bool and shape is not None and len(shape) == 2 and shape[0] == 2:
        return max(1, int(shape[1]))
    return None


def cpu_rule(signature: Signature) -> int:
    """The CPU rule's rows per chunk: a power of two within ``CPU_CHUNK_BYTES``, ``MAX_CHUNK``, ``CPU_CHUNK_TOKENS``.

    Args:
        signature: the chunks' per-row signature.

    Example:
        >>> cpu_rule(((2, 96), "torch.int64", False, False)), cpu_rule(((3, 224, 224), "torch.float32"))
        (64, 16)
    """
    rows = min(MAX_CHUNK, max(1, CPU_CHUNK_BYTES // row_bytes(signature)))
    length = sequence_length(signature)
    if length is not None:
        rows = min(rows, max(1, CPU_CHUNK_TOKENS // length))
    return _pow2_floor(rows)


def cuda_rule(row_peak: float, budget: Optional[int]) -> int:
    """The CUDA rule's rows per chunk from the probe chunk's peak memory per row.

    Args:
        row_peak: peak bytes of the probe chunk / its rows.
        budget: bytes a chunk may take (None: no limit).

    Returns:
        A power of two: ``CUDA_MAX_CHUNK`` rows, or up to ``CUDA_MAX_ROWS`` rows of light rows (within
        ``CUDA_LIGHT_BYTES``), never over the budget.

    Example:
        >>> cuda_rule(17e6, None), cuda_rule(60e3, None), cuda_rule(60e3, 2**27)
        (1024, 8192, 2048)
    """
    per_row = max(row_peak, 1.0)
    rows = max(float(CUDA_MAX_CHUNK), min(float(CUDA_MAX_ROWS), CUDA_LIGHT_BYTES / per_row))
    if budget is not None:
        rows = min(rows, budget / per_row)
    return _pow2_floor(max(1.0, rows))


def _pow2_floor(n: float) -> int:
    """The largest power of two <= n (1 for n < 2)."""
    return 1 << max(0, int(n).bit_length() - 1) if n >= 1 else 1
