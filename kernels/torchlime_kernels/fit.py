"""The fit's small stages in one launch each (Triton): weights, normal equations, summary, quality flags.

``mask_weights``, ``centre``, ``summary`` and ``flags`` give what ``reference_fit``'s ``*_torch``
functions give (about 8, 14, 18 and 10 torch operations, each a launch on a GPU): the same arithmetic,
elementwise in the same order, correctly rounded divisions and square roots and no fused multiply-adds,
so the centring and the flags match the references' values; the weights' exponential is Triton's (to a
few units in the last place), and the summary's sums over features run in another order than torch's
reductions and match them to rounding. Only absolute imports of torch/triton and relative
imports inside this folder: it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

from typing import Optional

import torch
import triton
import triton.language as tl

from .reference import launch_device
from .reference_fit import METRICS, Moments

__all__ = ["supports", "mask_weights", "centre", "summary", "flags"]

_MAX_F = 2048  # features: the summary's product with the Gram matrix is O(F²) per fit and program
_MAX_GRID_Y = 65535  # CUDA limit of grid dims 1 and 2
_TINY = torch.finfo(torch.float64).tiny
_EXACT = dict(enable_fp_fusion=False)  # a·b + c rounded twice, as torch's separate operators round it


@triton.jit
def _weights_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    masks_ptr,
    valid_ptr,
    out_ptr,
    r,
    f,
    m_sg,
    m_sr,
    m_sf,
    v_sg,
    v_sf,
    scale,
    neg,
    METRIC: tl.constexpr,
    SCALED: tl.constexpr,
    BR: tl.constexpr,
    BF: tl.constexpr,
):
    g = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1) * BR + tl.arange(0, BR)
    kept = tl.zeros((BR,), dtype=tl.float32)
    total = tl.zeros((BR,), dtype=tl.float32)
    for f0 in range(0, f, BF):
        cols = f0 + tl.arange(0, BF)
        ok = tl.load(valid_ptr + g * v_sg + cols * v_sf, mask=cols < f, other=0) != 0
        on = (rows < r)[:, None] & ok[None, :]
        m = tl.load(masks_ptr + g * m_sg + rows.to(tl.int64)[:, None] * m_sr + cols[None, :] * m_sf, mask=on, other=0)
        kept += tl.sum((m != 0).to(tl.float32), axis=1)
        total += tl.sum(ok.to(tl.float32), axis=0)
    if METRIC == 0:
        d = 1.0 - tl.sqrt_rn(tl.div_rn(kept, total))
    elif METRIC == 1:
        d = tl.div_rn(total - kept, total)
    else:
        d = tl.sqrt_rn(total - kept)
    if SCALED:
        d = d * scale
    tl.store(out_ptr + g * r + rows, tl.exp(tl.div_rn(d * d, neg)), mask=rows < r)


@triton.jit
def _centre_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    sums_ptr,
    shift_ptr,
    gram_ptr,
    rhs_ptr,
    xm_ptr,
    ym_ptr,
    sst_ptr,
    shift_out_ptr,
    f,
    t,
    width,
    shift_sb,
    shift_st,
    TINY: tl.constexpr,
    BI: tl.constexpr,
    BJ: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1) * BI + tl.arange(0, BI)
    j = tl.program_id(2) * BJ + tl.arange(0, BJ)
    row = sums_ptr + b * width
    lead = 3 + f + 2 * t
    sw = tl.maximum(tl.load(row), TINY)
    in_i, in_j = i < f, j < f + t
    mean_i = tl.load(row + 3 + i, mask=in_i, other=0.0) / sw
    mean_j = tl.load(row + 3 + j, mask=in_j, other=0.0) / sw  # x̄' for j < F, then ȳ'
    both = in_i[:, None] & in_j[None, :]
    pairs = tl.load(row + lead + i[:, None] * (f + t) + j[None, :], mask=both, other=0.0)
    c_ij = pairs - (sw * mean_i)[:, None] * mean_j[None, :]
    # the Gram part, made symmetric: 0.5 (c_ij + c_ji), c_ji from the transposed sums
    sq = both & (j[None, :] < f)
    pairs_t = tl.load(row + lead + j[None, :] * (f + t) + i[:, None], mask=sq, other=0.0)
    c_ji = pairs_t - (sw * mean_j)[None, :] * mean_i[:, None]
    tl.store(gram_ptr + b * f * f + i[:, None] * f + j[None, :], 0.5 * (c_ij + c_ji), mask=sq)
    rh = both & (j[None, :] >= f)
    tl.store(rhs_ptr + b * f * t + i[:, None] * t + (j[None, :] - f), c_ij, mask=rh)
    if tl.program_id(2) == 0:  # the masks' means, once per row block
        tl.store(xm_ptr + b * f + i, mean_i + 0.5, mask=in_i)
    if tl.program_id(1) == 0:  # the outputs' means and spread, once per column block
        k = j - f
        on_t = in_j & (j >= f)
        shift = tl.load(shift_ptr + b * shift_sb + k * shift_st, mask=on_t, other=0.0).to(tl.float64)
        syy = tl.load(row + 3 + f + t + k, mask=on_t, other=0.0)
        spread = syy - sw * mean_j * mean_j
        tl.store(ym_ptr + b * t + k, mean_j + shift, mask=on_t)
        tl.store(sst_ptr + b * t + k, tl.where(spread < 0, 0.0, spread), mask=on_t)
        tl.store(shift_out_ptr + b * t + k, shift, mask=on_t)


@triton.jit
def _summary_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    beta_ptr,
    valid_ptr,
    gram_ptr,
    rhs_ptr,
    xm_ptr,
    ym_ptr,
    sst_ptr,
    coef_ptr,
    icpt_ptr,
    score_ptr,
    local_ptr,
    f,
    t,
    HAS_VALID: tl.constexpr,
    BF: tl.constexpr,
    BT: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1) * BT + tl.arange(0, BT)
    on_t = k < t
    xb = tl.zeros((BT,), dtype=tl.float64)  # x̄ᵀβ
    explained = tl.zeros((BT,), dtype=tl.float64)  # βᵀ(XᵀWy)
    quad = tl.zeros((BT,), dtype=tl.float64)  # βᵀ(XᵀWX)β
    total = tl.zeros((BT,), dtype=tl.float64)  # Σβ
    for f0 in range(0, f, BF):
        fi = f0 + tl.arange(0, BF)
        on = (fi < f)[:, None] & on_t[None, :]
        beta = tl.load(beta_ptr + b * f * t + fi[:, None] * t + k[None, :], mask=on, other=0.0)
        if HAS_VALID:
            ok = tl.load(valid_ptr + b * f + fi, mask=fi < f, other=0).to(tl.float64)
            beta = beta * ok[:, None]
        # (XᵀWX)β for the rows fi: the columns in blocks
        g_beta = tl.zeros((BF, BT), dtype=tl.float64)
        for g0 in range(0, f, BF):
            gi = g0 + tl.arange(0, BF)
            square = (fi < f)[:, None] & (gi < f)[None, :]
            gram = tl.load(gram_ptr + b * f * f + fi[:, None] * f + gi[None, :], mask=square, other=0.0)
            on_g = (gi < f)[:, None] & on_t[None, :]
            beta_g = tl.load(beta_ptr + b * f * t + gi[:, None] * t + k[None, :], mask=on_g, other=0.0)
            if HAS_VALID:
                ok_g = tl.load(valid_ptr + b * f + gi, mask=gi < f, other=0).to(tl.float64)
                beta_g = beta_g * ok_g[:, None]
            g_beta += tl.sum(gram[:, :, None] * beta_g[None, :, :], axis=1)
        xm = tl.load(xm_ptr + b * f + fi, mask=fi < f, other=0.0)
        rhs = tl.load(rhs_ptr + b * f * t + fi[:, None] * t + k[None, :], mask=on, other=0.0)
        xb += tl.sum(xm[:, None] * beta, axis=0)
        explained += tl.sum(beta * rhs, axis=0)
        quad += tl.sum(beta * g_beta, axis=0)
        total += tl.sum(beta, axis=0)
        # coef (B, T, F) with strides (F·T, 1, T): the layout of the reference's transposed (B, F, T)
        tl.store(coef_ptr + b * f * t + fi[:, None] * t + k[None, :], beta.to(coef_ptr.dtype.element_ty), mask=on)
    icpt = tl.load(ym_ptr + b * t + k, mask=on_t, other=0.0) - xb
    sst = tl.load(sst_ptr + b * t + k, mask=on_t, other=0.0)
    ss_res = (sst - 2.0 * explained) + quad
    ss_res = tl.where(ss_res < 0, 0.0, ss_res)
    r2 = 1.0 - ss_res / tl.where(sst < 1e-300, 1e-300, sst)
    score = tl.where(sst > 0, r2, tl.where(ss_res == 0, 1.0, 0.0))
    out_ty = icpt_ptr.dtype.element_ty
    tl.store(icpt_ptr + b * t + k, icpt.to(out_ty), mask=on_t)
    tl.store(score_ptr + b * t + k, score.to(out_ty), mask=on_t)
    tl.store(local_ptr + b * t + k, (icpt + total).to(out_ty), mask=on_t)


@triton.jit
def _flags_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    sst_ptr,
    sw_ptr,
    sw2_ptr,
    score_ptr,
    nf_ptr,
    sat_ptr,
    poor_ptr,
    few_ptr,
    t,
    TINY: tl.constexpr,
    MIN_STD: tl.constexpr,
    MIN_R2: tl.constexpr,
    MIN_KISH: tl.constexpr,
    BT: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    k = tl.program_id(1) * BT + tl.arange(0, BT)
    on_t = k < t
    w = tl.load(sw_ptr + b)
    sst = tl.load(sst_ptr + b * t + k, mask=on_t, other=0.0)
    std = tl.sqrt(sst / tl.maximum(w, TINY))
    saturated = std < tl.full((), MIN_STD, tl.float64)  # the threshold as a float64, not a float32 literal
    score = tl.load(score_ptr + b * t + k, mask=on_t, other=1.0)
    poor = (score < tl.full((), MIN_R2, score.dtype)) & (saturated == 0)  # compared in the score's dtype, as torch
    tl.store(sat_ptr + b * t + k, saturated.to(tl.int8), mask=on_t)
    tl.store(poor_ptr + b * t + k, poor.to(tl.int8), mask=on_t)
    if tl.program_id(1) == 0:
        kish = (w * w) / tl.maximum(tl.load(sw2_ptr + b), TINY)
        few = kish < tl.full((), MIN_KISH, tl.float64) * tl.load(nf_ptr + b).to(tl.float64)
        tl.store(few_ptr + b, few.to(tl.int8))


def _on(t: torch.Tensor, dev: torch.device, dtype: Optional[torch.dtype] = None) -> bool:
    """``t`` is contiguous on ``dev`` (of ``dtype`` when given)."""
    return t.device == dev and t.is_contiguous() and (dtype is None or t.dtype == dtype)


def _weights_take(masks: Optional[torch.Tensor], valid: Optional[torch.Tensor]) -> bool:
    """Whether ``mask_weights`` takes bool (g, r, F) ``masks`` and (g, F) ``valid`` on one device."""
    if masks is None or valid is None:
        return False
    dev = masks.device
    if not (dev.type == "cuda" or (dev.type == "cpu" and interpreted())):
        return False
    shapes = masks.dim() == 3 and valid.dim() == 2 and valid.shape == (masks.shape[0], masks.shape[2])
    return shapes and masks.dtype == valid.dtype == torch.bool and valid.device == dev


def mask_weights(masks: torch.Tensor, valid: torch.Tensor, metric: str, scale: float, width: float) -> torch.Tensor:
    """``reference_fit.mask_weights_torch(...)`` in one launch (``supports("mask_weights", masks, valid)``)."""
    g, r, f = masks.shape
    out = torch.empty(g, r, dtype=torch.float32, device=masks.device)
    if out.numel() == 0:
        return out
    br, bf = 64, _block(f, 64)
    m, v = masks.view(torch.uint8), valid.view(torch.uint8)
    grid = (g, triton.cdiv(r, br))
    with launch_device(masks):
        _weights_kernel[grid](
            m, v, out, r, f, *m.stride(), *v.stride(), float(scale), -(2.0 * width * width),
            METRIC=METRICS.index(metric), SCALED=scale != 1.0, BR=br, BF=bf, **_EXACT,
        )  # fmt: skip
    return out


def supports(kind: str, *tensors: Optional[torch.Tensor]) -> bool:
    """Whether the kernel ``kind`` ("mask_weights", "centre", "summary", "flags") takes these operands.

    Args:
        kind: which kernel.
        tensors: its tensor operands, in order (None for an absent optional one): for "mask_weights" bool (g, r, F)
            masks of any strides and (g, F) valid; else the first is float64 and every operand is contiguous, but
            ``centre``'s ``y_shift`` (any strides).
    """
    if kind == "mask_weights":
        return _weights_take(*tensors)
    first = tensors[0]
    if first is None:
        return False
    dev = first.device
    if not (dev.type == "cuda" or (dev.type == "cpu" and interpreted())):
        return False
    dense = tensors[:1] if kind == "centre" else tensors
    if not all(x is None or _on(x, dev) for x in dense) or first.dtype != torch.float64:
        return False
    if not all(x is None or x.device == dev for x in tensors):
        return False
    if kind == "summary":
        return first.dim() == 3 and first.shape[1] <= _MAX_F and first.shape[0] <= _MAX_GRID_Y
    return first.shape[0] <= _MAX_GRID_Y


def interpreted() -> bool:
    """True when this module was imported under ``TRITON_INTERPRET=1`` (the kernels run on CPU tensors)."""
    from .hash_words import interpreted as hashing_interpreted

    return hashing_interpreted()


def _block(n: int, cap: int) -> int:
    """A power-of-2 block of at most ``cap`` covering ``n`` where it can."""
    return max(2, min(triton.next_power_of_2(max(n, 1)), cap))


def centre(
    sums: torch.Tensor, y_shift: torch.Tensor, f: int, t: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``reference_fit.centre_torch(sums, y_shift, f, t)`` in one launch (``supports("centre", sums, y_shift)``)."""
    batch, dev = sums.shape[0], sums.device
    f64 = dict(dtype=torch.float64, device=dev)
    gram, rhs = torch.empty(batch, f, f, **f64), torch.empty(batch, f, t, **f64)
    xm, ym, sst, shift = (torch.empty(batch, n, **f64) for n in (f, t, t, t))
    if batch == 0:
        return gram, rhs, xm, ym, sst, shift
    bi, bj = _block(f, 32), _block(f + t, 32)
    grid = (batch, triton.cdiv(f, bi), triton.cdiv(f + t, bj))
    with launch_device(sums):
        _centre_kernel[grid](
            sums, y_shift, gram, rhs, xm, ym, sst, shift, f, t, sums.shape[1], y_shift.stride(0), y_shift.stride(1),
            TINY=_TINY, BI=bi, BJ=bj, **_EXACT,
        )  # fmt: skip
    return gram, rhs, xm, ym, sst, shift


def summary(
    beta: torch.Tensor, valid: Optional[torch.Tensor], moments: Moments, dtype: Optional[torch.dtype] = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``reference_fit.summary_torch(...)`` in one launch (``supports("summary", beta, valid, *moments)``)."""
    batch, f, t = beta.shape
    out = dtype or beta.dtype
    coef = torch.empty_strided((batch, t, f), (f * t, 1, t), dtype=out, device=beta.device)
    icpt, score, local = (torch.empty(batch, t, dtype=out, device=beta.device) for _ in range(3))
    if batch == 0 or t == 0:
        return coef, icpt, score, local
    bt = _block(t, 16)
    ok = valid if valid is None or valid.dtype != torch.bool else valid.view(torch.uint8)
    grid = (batch, triton.cdiv(t, bt))
    with launch_device(beta):
        _summary_kernel[grid](
            beta, ok if ok is not None else beta, *moments, coef, icpt, score, local,
            f, t, HAS_VALID=ok is not None, BF=16, BT=bt, **_EXACT,
        )  # fmt: skip
    return coef, icpt, score, local


def flags(
    ss_tot: torch.Tensor,
    weight_sum: torch.Tensor,
    weight_sq_sum: torch.Tensor,
    score: torch.Tensor,
    n_features: torch.Tensor,
    thresholds: tuple[float, float, float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``reference_fit.flags_torch(...)`` in one launch (``supports("flags", ss_tot, weight_sum, ...)``)."""
    batch, t = ss_tot.shape
    dev, (min_std, min_r2, min_kish) = ss_tot.device, thresholds
    sat, poor = torch.empty(batch, t, dtype=torch.bool, device=dev), torch.empty(batch, t, dtype=torch.bool, device=dev)
    few = torch.empty(batch, dtype=torch.bool, device=dev)
    if batch == 0:
        return sat, poor, few
    bt = _block(t, 128)
    grid = (batch, triton.cdiv(t, bt))
    with launch_device(ss_tot):
        _flags_kernel[grid](
            ss_tot, weight_sum, weight_sq_sum, score, n_features,
            sat.view(torch.int8), poor.view(torch.int8), few.view(torch.int8),
            t, TINY=_TINY, MIN_STD=min_std, MIN_R2=min_r2, MIN_KISH=min_kish, BT=bt, **_EXACT,
        )  # fmt: skip
    return sat, poor, few
