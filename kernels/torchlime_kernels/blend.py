"""Fused mask expansion + baseline blend (Triton).

For a chunk of ``c`` rows, ``out[i] = where(masks[i, labels[i]], x[i], base[i])`` (c, *shape), with
optional extras fused into the same pass: per-channel normalisation ``(v - mean[ch]) / std[ch]``
(channel = dim 1 of the output), a cast to ``out_dtype`` and a ``channels_last`` output for 4-D
results. The torch reference with the same signature is ``kernels.reference.blend_torch``. Only
absolute imports of torch/triton and relative imports inside this folder: it ships as
``torchlime.kernels``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Union

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .reference import Stat, blend_torch, channel_stats, compute_dtype, launch_device

__all__ = ["BLOCK", "MAX_DIMS", "supports", "blend", "blend_torch", "interpreted"]

BLOCK = 1024  # output elements per program
NUM_WARPS = 4
MAX_DIMS = 4  # merged dims the kernel addresses
_MAX_GRID_Y = 65535  # CUDA limit of grid dim 1 (blocks of a row)
_I32 = 2**31 - 1

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_LABELS = (torch.int64, torch.int32)


@triton.jit
def _coords(n, D1, D2, D3, NDIM: tl.constexpr):  # type: ignore[no-untyped-def]  # triton reads jit annotations
    """Row-major coordinates of flat index ``n`` in (D0, D1, D2, D3); the real dims are the last NDIM."""
    zero = n * 0
    if NDIM == 1:
        c0 = zero
        c1 = zero
        c2 = zero
        c3 = n
    elif NDIM == 2:
        c0 = zero
        c1 = zero
        c2 = n // D3
        c3 = n - c2 * D3
    elif NDIM == 3:
        c0 = zero
        t = n // D3
        c3 = n - t * D3
        c1 = t // D2
        c2 = t - c1 * D2
    else:
        t = n // D3
        c3 = n - t * D3
        u = t // D2
        c2 = t - u * D2
        c0 = u // D1
        c1 = u - c0 * D1
    return c0, c1, c2, c3


@triton.jit
def _dot(c0, c1, c2, c3, s0, s1, s2, s3, NDIM: tl.constexpr):  # type: ignore[no-untyped-def]  # triton reads jit annotations  # noqa: PLR0913
    """Offset of coordinates (c0..c3) for strides (s0..s3); only the last NDIM dims count."""
    off = c3 * s3
    if NDIM >= 2:
        off += c2 * s2
    if NDIM >= 3:
        off += c1 * s1
    if NDIM >= 4:
        off += c0 * s0
    return off


@triton.jit
def _blend_kernel(  # type: ignore[no-untyped-def]  # triton reads jit annotations  # noqa: PLR0913
    out_ptr,
    x_ptr,
    base_ptr,
    lab_ptr,
    mask_ptr,
    mean_ptr,
    std_ptr,
    src_ptr,
    N,
    F,
    out_rs,
    x_rs,
    base_rs,
    lab_rs,
    mask_rs,
    mask_fs,
    D1,
    D2,
    D3,
    xs0,
    xs1,
    xs2,
    xs3,
    bs0,
    bs1,
    bs2,
    bs3,
    ls0,
    ls1,
    ls2,
    ls3,
    ss0,
    ss1,
    ss2,
    ss3,
    NDIM: tl.constexpr,
    X_FLAT: tl.constexpr,
    B_FLAT: tl.constexpr,
    L_FLAT: tl.constexpr,
    HAS_NORM: tl.constexpr,
    HAS_SRC: tl.constexpr,
    DIV_RN: tl.constexpr,
    VIA_FP32: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    if HAS_SRC:  # the operands' row of this output row (x, base and labels are not gathered)
        src = tl.load(src_ptr + row).to(tl.int64)
    else:
        src = row
    n = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    valid = n < N
    c0, c1, c2, c3 = _coords(n, D1, D2, D3, NDIM)

    # feature id of every element, then its mask bit for this row
    if L_FLAT:
        lo = n
    else:
        lo = _dot(c0, c1, c2, c3, ls0, ls1, ls2, ls3, NDIM)
    lab = tl.load(lab_ptr + src * lab_rs + lo, mask=valid, other=0)
    inb = valid & (lab >= 0) & (lab < F)
    bit = tl.load(mask_ptr + row * mask_rs + lab * mask_fs, mask=inb, other=0)
    keep = bit != 0
    hide = bit == 0

    # read only the operand each element takes
    if X_FLAT:
        xo = n
    else:
        xo = _dot(c0, c1, c2, c3, xs0, xs1, xs2, xs3, NDIM)
    if B_FLAT:
        bo = n
    else:
        bo = _dot(c0, c1, c2, c3, bs0, bs1, bs2, bs3, NDIM)
    xv = tl.load(x_ptr + src * x_rs + xo, mask=valid & keep, other=0)
    bv = tl.load(base_ptr + src * base_rs + bo, mask=valid & hide, other=0)
    v = tl.where(keep, xv, bv)

    if HAS_NORM:
        so = _dot(c0, c1, c2, c3, ss0, ss1, ss2, ss3, NDIM)
        m = tl.load(mean_ptr + so, mask=valid, other=0)
        s = tl.load(std_ptr + so, mask=valid, other=1)
        v = v.to(m.dtype) - m
        if DIV_RN:
            v = tl.div_rn(v, s)  # IEEE division, as torch does
        else:
            v = v / s

    if VIA_FP32:
        v = v.to(tl.float32)  # float64 -> 16-bit goes through float32, as torch's casts do
    tl.store(out_ptr + row * out_rs + n, v.to(out_ptr.dtype.element_ty), mask=valid)


def interpreted() -> bool:
    """True when this module was imported under ``TRITON_INTERPRET=1`` (kernel runs on CPU tensors)."""
    return not isinstance(_blend_kernel, JITFunction)


class _Plan(NamedTuple):
    c: int
    shape: tuple[int, ...]  # per-row output shape
    n: int  # elements per row
    sizes: list[int]  # merged dims, padded at the front to MAX_DIMS
    strides: dict[str, list[int]]  # operand -> merged strides, padded like sizes
    flat: dict[str, bool]  # operand -> strides equal the output's (offset = flat index)
    ndim: int  # real merged dims (1..MAX_DIMS)
    rows: dict[str, int]  # operand -> row stride (0 for a shared leading-1 operand)


def _dense_strides(shape: tuple[int, ...], channels_last: bool) -> list[int]:
    """Strides of a per-row output of ``shape``: row-major, or NHWC order for (C, H, W)."""
    if channels_last and len(shape) == 3:
        ch, h, w = shape
        return [1, w * ch, ch]
    strides, acc = [], 1
    for size in reversed(shape):
        strides.append(acc)
        acc *= size
    return strides[::-1]


def _plan(  # noqa: C901
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    *,
    channels_last: bool = False,
    with_stats: bool = True,
    sources: Optional[torch.Tensor] = None,
) -> Union[_Plan, str]:
    """Launch plan, or a string saying why the kernel does not handle these inputs.

    One program per (row, block of ``BLOCK`` output elements), grid ``(c, cdiv(N, BLOCK))`` with
    ``N = prod(shape)``; no Python loop over rows. Every operand (x, base, labels, the statistics) is
    addressed through its own strides, so a leading size-1 operand (an input shared by all rows) is
    read with row stride 0 (rows run in the fastest grid axis, so consecutive programs re-read the
    same block of the shared input from L2) and the labels index is computed per element from the
    output position (labels broadcast over channels have stride 0 there). The plan removes size-1
    dims, orders the remaining dims by the output's memory order (so stores are always contiguous,
    also for ``channels_last``) and merges dims that are contiguous for every operand; the kernel
    handles up to ``MAX_DIMS`` merged dims (images (C, H, W) with (1, H, W) labels become 2 dims,
    labels of the full shape 1 dim). Labels outside ``[0, F)`` read as hidden (baseline) instead of
    reading out of bounds.
    """
    tensors = (x, base, labels, masks)
    if not all(isinstance(t, torch.Tensor) for t in tensors):
        return "all inputs must be tensors"
    if masks.dtype != torch.bool or masks.dim() != 2:
        return "masks must be a bool (c, F) tensor"
    if x.dtype not in _FLOATS or base.dtype != x.dtype:
        return f"x and base must share a float dtype, got {x.dtype} and {base.dtype}"
    if labels.dtype not in _LABELS:
        return f"labels must be int64 or int32, got {labels.dtype}"
    dev = x.device
    if any(t.device != dev for t in tensors):
        return "all inputs must be on one device"
    if not (dev.type == "cuda" or (dev.type == "cpu" and interpreted())):
        return f"device {dev} (CUDA, or CPU under TRITON_INTERPRET=1)"
    if not (x.dim() == base.dim() == labels.dim() >= 1):
        return "x, base and labels must have the same number of dims (leading row dim included)"
    c, nfeat = masks.shape
    if sources is not None:
        if not isinstance(sources, torch.Tensor) or sources.dtype not in _LABELS or sources.shape != (c,):
            return f"sources must be an int64/int32 ({c},) tensor"
        if sources.device != dev:
            return "all inputs must be on one device"
    for name, t in (("x", x), ("base", base), ("labels", labels)):
        if sources is None and t.shape[0] not in (1, c):
            return f"{name} has {t.shape[0]} rows, expected 1 or {c}"
    try:
        shape = tuple(torch.broadcast_shapes(x.shape[1:], base.shape[1:], labels.shape[1:]))
    except RuntimeError:
        return "x, base and labels shapes do not broadcast"
    n = 1
    for size in shape:
        n *= size
    if n > _I32 or c > _I32 or triton.cdiv(n, BLOCK) > _MAX_GRID_Y or nfeat > _I32:
        return "too large for one launch"
    if channels_last and len(shape) != 3:
        return "channels_last needs a 4-D output"

    # strides of every operand over the per-row output shape (0 where broadcast)
    ops = {
        "out": _dense_strides(shape, channels_last),
        "x": list(x.expand(x.shape[0], *shape).stride()[1:]),
        "base": list(base.expand(base.shape[0], *shape).stride()[1:]),
        "lab": list(labels.expand(labels.shape[0], *shape).stride()[1:]),
    }
    if with_stats and shape:
        ops["stat"] = [1] + [0] * (len(shape) - 1)  # per-channel operand: channel = dim 0 of a row
    for name, st in ops.items():
        if name != "out" and sum((size - 1) * s for size, s in zip(shape, st)) > _I32:
            return f"{name} spans more than 2**31 elements in a row"

    # drop size-1 dims, order by the output's memory order, merge dims contiguous for all
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -ops["out"][d])
    sizes = [shape[d] for d in dims]
    merged = {k: [st[d] for d in dims] for k, st in ops.items()}
    i = 0
    while i + 1 < len(sizes):
        if all(st[i] == st[i + 1] * sizes[i + 1] for st in merged.values()):
            sizes[i] *= sizes[i + 1]
            del sizes[i + 1]
            for st in merged.values():
                st[i] = st[i + 1]
                del st[i + 1]
        else:
            i += 1
    if not sizes:
        sizes = [1]
        merged = {k: [0] for k in merged}
    if len(sizes) > MAX_DIMS:
        return f"{len(sizes)} dims after merging (kernel handles {MAX_DIMS})"
    ndim = len(sizes)
    pad = MAX_DIMS - ndim
    out_st = merged["out"]
    flat = {k: st == out_st for k, st in merged.items()}
    strides = {k: [0] * pad + st for k, st in merged.items()}

    def row_stride(t: torch.Tensor) -> int:  # 0 for a shared leading-1 operand
        return t.stride(0) if t.shape[0] > 1 and (sources is not None or t.shape[0] == c) else 0

    rows = {"out": n, "x": row_stride(x), "base": row_stride(base), "lab": row_stride(labels)}
    return _Plan(c, shape, n, [1] * pad + sizes, strides, flat, ndim, rows)


def supports(
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    sources: Optional[torch.Tensor] = None,
) -> bool:
    """Whether ``blend`` handles these inputs (any extras allowed); else use the torch reference.

    True for CUDA tensors (CPU tensors when this module runs under ``TRITON_INTERPRET=1``) with
    float x/base of one dtype, int64/int32 labels, bool (c, F) masks, leading sizes 1 or c (any,
    with int64/int32 (c,) ``sources``), shapes that broadcast with the same number of dims, rows
    under 2**31 elements, and at most ``MAX_DIMS`` dims left after merging contiguous dims.
    """
    return isinstance(_plan(x, base, labels, masks, sources=sources), _Plan)


def blend(  # noqa: PLR0913
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    *,
    out_dtype: Optional[torch.dtype] = None,
    mean: Stat = None,
    std: Stat = None,
    channels_last: bool = False,
    sources: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Fused ``where(masks[i, labels[i]], x[i], base[i])`` with optional normalise / cast / layout.

    Args:
        x: (1 or c, *shape) float tensor (any strides); any number of rows with ``sources``.
        base: (1 or c, *shape) the fill, the same dtype (any strides); the same way.
        labels: int64/int32 (1 or c, *fshape), ``fshape`` broadcastable to ``shape``; ids outside
            ``[0, F)`` give the baseline value; the same way.
        masks: bool (c, F).
        out_dtype: result dtype (default ``x.dtype``), e.g. bf16/fp16 for autocast models.
        mean: per-channel means (tensor/sequence of length C = output dim 1, or a scalar); the
            blended value becomes ``(v - mean[ch]) / std[ch]`` computed in float32 (float64 for
            float64 inputs). None is 0.
        std: per-channel standard deviations, the same way. None is 1.
        channels_last: allocate the (4-D) result in ``torch.channels_last`` memory format.
        sources: optional int64/int32 (c,): output row i reads row ``sources[i]`` of x, base and
            labels (of a leading-1 operand: its one row) in place, with no gathered copy.

    Returns:
        (c, *shape) tensor, equal to ``blend_torch`` with the same arguments.

    Raises:
        ValueError: for inputs ``supports`` rejects or invalid extras.
    """
    if channels_last and x.dim() != 4:
        raise ValueError(f"channels_last needs a 4-D output, got {x.dim()}-D")
    has_norm = mean is not None or std is not None
    if has_norm and x.dim() < 2:
        raise ValueError("mean/std need an output with a channel dim (dim 1)")
    plan = _plan(x, base, labels, masks, channels_last=channels_last, with_stats=has_norm, sources=sources)
    if not isinstance(plan, _Plan):
        raise ValueError(f"blend kernel does not handle these inputs: {plan}")
    out_dtype = x.dtype if out_dtype is None else out_dtype
    if out_dtype not in _FLOATS:
        raise ValueError(f"out_dtype must be a float dtype, got {out_dtype}")
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    out = torch.empty((plan.c, *plan.shape), dtype=out_dtype, device=x.device, memory_format=fmt)
    if out.numel() == 0:
        return out
    if has_norm:
        ct = compute_dtype(x.dtype)
        mean_t, std_t = channel_stats(mean, std, plan.shape[0], ct, x.device)
        ss = plan.strides["stat"]
    else:
        ct = torch.float32
        mean_t = std_t = x  # never read
        ss = [0] * MAX_DIMS
    xs, bs, ls = plan.strides["x"], plan.strides["base"], plan.strides["lab"]
    grid = (plan.c, triton.cdiv(plan.n, BLOCK))
    with launch_device(x):
        _blend_kernel[grid](
            out,
            x,
            base,
            labels,
            masks.view(torch.uint8),
            mean_t,
            std_t,
            masks.view(torch.uint8) if sources is None else sources,  # never read without sources
            plan.n,
            masks.shape[1],
            plan.rows["out"],
            plan.rows["x"],
            plan.rows["base"],
            plan.rows["lab"],
            masks.stride(0),
            masks.stride(1),
            plan.sizes[1],
            plan.sizes[2],
            plan.sizes[3],
            *xs,
            *bs,
            *ls,
            *ss,
            NDIM=plan.ndim,
            X_FLAT=plan.flat["x"],
            B_FLAT=plan.flat["base"],
            L_FLAT=plan.flat["lab"],
            HAS_NORM=has_norm,
            HAS_SRC=sources is not None,
            DIV_RN=ct == torch.float32,
            VIA_FP32=x.dtype == torch.float64 and out_dtype in (torch.float16, torch.bfloat16),
            BLOCK=BLOCK,
            num_warps=NUM_WARPS,
        )
    return out
