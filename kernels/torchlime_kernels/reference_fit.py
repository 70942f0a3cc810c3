"""Torch references of the fit's kernels: the samples' weights, the centred normal equations, the summary, the flags.

Each runs as a few dozen small torch operations (one launch each on a GPU); ``fit.py`` fuses each into one
Triton launch. These are the CPU path and the definition the kernels are tested against: their bits are
the engine's on the CPU. Only absolute imports of torch and relative imports inside this folder: it
ships as ``torchlime.kernels``.
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = [
    "cast_at_once",
    "mask_weights_torch",
    "centre_torch",
    "summary_torch",
    "flags_torch",
    "stats_width",
    "METRICS",
    "Moments",
]

#: the mask distances, in the order the kernel numbers them
METRICS = ("cosine", "hamming", "euclidean")

_TINY = torch.finfo(torch.float64).tiny
#: ``(gram (B, F, F), rhs (B, F, T), x_mean (B, F), y_mean (B, T), ss_tot (B, T))`` of fits' normal equations
Moments = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def mask_weights_torch(
    masks: torch.Tensor, valid: torch.Tensor, metric: str, scale: float, width: float
) -> torch.Tensor:
    """The exponential kernel's weights of mask rows: ``exp(-(scale·d)² / (2 width²))``, d their distance.

    d is the distance from the all-ones row over the features that exist, k of F_b kept: "cosine"
    1 - sqrt(k / F_b), "hamming" (F_b - k) / F_b, "euclidean" sqrt(F_b - k); all in float32
    (``stages.weighting.mask_distance`` and ``ExponentialKernel.weigh``).

    Args:
        masks: bool (g, r, F) the masks of r samples of g inputs.
        valid: bool (g, F) the features that exist for each input.
        metric: "cosine", "hamming" or "euclidean".
        scale: the multiplier of the distances.
        width: the kernel width (> 0).

    Returns:
        Float32 (g, r) weights.
    """
    kept = (masks & valid.unsqueeze(1)).sum(-1, dtype=torch.float32)
    total = valid.unsqueeze(1).sum(-1, dtype=torch.float32)
    if metric == "cosine":
        d = 1.0 - torch.sqrt(kept / total)
    elif metric == "hamming":
        d = (total - kept) / total
    else:
        d = torch.sqrt(total - kept)
    d = d if scale == 1.0 else d * scale  # d * 1.0 is d: no product needed
    return torch.exp((d * d) / -(2.0 * width * width))  # (-a) / b is exactly a / (-b)


def cast_at_once(parts: tuple[torch.Tensor, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """``t.to(dtype)`` of every tensor of ``parts`` in one operator (one per tensor otherwise).

    The tensors' memory is concatenated into one buffer of ``dtype`` (a cast on the way, as ``to`` casts);
    each result is a view of it with its tensor's shape and strides: the same values, bit for bit, and
    the same layout. Parts already of ``dtype``, or one that is not dense (it has no memory of its own
    to copy at once), are cast one by one as ``to`` would.

    Args:
        parts: tensors on one device.
        dtype: the dtype of the results.

    Returns:
        The cast tensors, in order.

    Example:
        >>> a, b = cast_at_once((torch.ones(2, 3, dtype=torch.float64).t(), torch.zeros(2)), torch.float32)
        >>> a.dtype, a.shape, a.stride(), b.tolist()
        (torch.float32, torch.Size([3, 2]), (1, 3), [0.0, 0.0])
    """
    dense = all(torch.empty_like(t).stride() == t.stride() for t in parts)  # empty_like keeps a dense layout
    if all(t.dtype == dtype for t in parts) or not dense or len(parts) < 2:
        return tuple(t.to(dtype) for t in parts)
    out = torch.empty(sum(t.numel() for t in parts), dtype=dtype, device=parts[0].device)
    torch.cat([t.as_strided((t.numel(),), (1,), t.storage_offset()) for t in parts], out=out)
    starts = [0]
    for t in parts:
        starts.append(starts[-1] + t.numel())
    return tuple(out.as_strided(t.shape, t.stride(), at) for t, at in zip(parts, starts))


def stats_width(f: int, t: int) -> int:
    """The per-fit sums' columns before the products: ``(Σw, Σw², n, Σwx' (F), Σwy' (T), Σwy'² (T))``."""
    return 3 + f + 2 * t


def centre_torch(
    sums: torch.Tensor, y_shift: torch.Tensor, f: int, t: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The centred normal equations of running sums (``stages.normal.NormalAccumulator``'s layout).

    With x̄' = Σwx' / Σw and ȳ' = Σwy' / Σw (Σw at least the smallest normal float64): the Gram
    matrix Σwx'x'ᵀ - Σw x̄'x̄'ᵀ made exactly symmetric, the right-hand sides Σwx'y'ᵀ - Σw x̄'ȳ'ᵀ, and
    Σw (y - ȳ)² = Σwy'² - Σw ȳ'², at least 0.

    Args:
        sums: float64 (B, 3 + F + 2T + F(F + T)) the running sums of B fits, one row each.
        y_shift: (B, T) the outputs subtracted before the sums (y' = y - y_shift).
        f: F, the number of features.
        t: T, the number of targets.

    Returns:
        Float64 ``(gram (B, F, F), rhs (B, F, T), x_mean (B, F), y_mean (B, T), ss_tot (B, T), shift (B, T))``:
        the means of the unshifted masks and outputs, and ``y_shift`` as float64.
    """
    lead = stats_width(f, t)
    stats, pairs = sums[:, :lead], sums[:, lead:].view(sums.shape[0], f, f + t)
    sw = stats[:, 0].clamp_min(_TINY)
    means = stats[:, 3 : 3 + f + t] / sw.unsqueeze(1)  # (x̄', ȳ') side by side
    xm, ym = means[:, :f], means[:, f:]
    swx = sw.view(-1, 1, 1) * xm.unsqueeze(2)  # made once for both (the same products, the same bits)
    centred = pairs - swx * means.unsqueeze(1)  # (gram | rhs) in two operators
    gram, rhs = centred[:, :, :f], centred[:, :, f:]
    ss_tot = (stats[:, 3 + f + t :] - sw.unsqueeze(1) * ym * ym).clamp_min(0)
    shift = y_shift.double()
    return 0.5 * (gram + gram.transpose(1, 2)), rhs, xm + 0.5, ym + shift, ss_tot, shift


def summary_torch(
    beta: torch.Tensor, valid: Optional[torch.Tensor], moments: Moments, dtype: Optional[torch.dtype] = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Coefficients, intercept, weighted R² and local prediction of B·T fits, from their normal equations.

    No samples are needed: Σw(y - ŷ)² = ss_tot - 2βᵀ(XᵀWy) + βᵀ(XᵀWX)β. The R² is scikit-learn's
    ``r2_score``: a constant output scores 1 when predicted exactly, else 0.

    Args:
        beta: float64 (B, F, T) the solved coefficients.
        valid: bool (B, F) the features that exist (the others' coefficients become 0), or None.
        moments: float64 ``(gram (B, F, F), rhs (B, F, T), x_mean (B, F), y_mean (B, T), ss_tot (B, T))``: the
            centred Gram matrices and right-hand sides, the weighted means of the masks and outputs, Σ w (y - ȳ)².
        dtype: the dtype of the results (None: float64).

    Returns:
        ``(coef (B, T, F), intercept (B, T), score (B, T), local_pred (B, T))``.
    """
    gram, rhs, x_mean, y_mean, ss_tot = moments
    if valid is not None:
        beta = beta * valid.unsqueeze(-1)  # the bools promoted inside the product: no cast
    intercept = y_mean - (x_mean.unsqueeze(1) @ beta).squeeze(1)
    explained = (beta * rhs).sum(1)
    quad = (beta * (gram @ beta)).sum(1)
    # a - 2b as one operator: 2b is exact, so a + (-2)·b rounds once, as a - (2b) does
    ss_res = (torch.sub(ss_tot, explained, alpha=2) + quad).clamp_min(0)
    # 1 - q as addcdiv's 1 + (-1)·(a / b), one operator (the negation is exact); bool -> 1.0 / 0.0
    one = torch.ones((), dtype=ss_res.dtype, device=ss_res.device)
    score = torch.where(ss_tot > 0, torch.addcdiv(one, ss_res, ss_tot.clamp_min(1e-300), value=-1), ss_res == 0)
    local_pred = intercept + beta.sum(1)  # the row of all ones
    parts = (beta.transpose(1, 2), intercept, score, local_pred)
    if dtype is None or dtype == beta.dtype:
        return parts
    cast = cast_at_once(parts, dtype)
    return cast[0], cast[1], cast[2], cast[3]


def flags_torch(
    ss_tot: torch.Tensor,
    weight_sum: torch.Tensor,
    weight_sq_sum: torch.Tensor,
    score: torch.Tensor,
    n_features: torch.Tensor,
    thresholds: tuple[float, float, float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The quality checks of B·T fits (``engine.quality.assess``).

    Args:
        ss_tot: (B, T) Σ w (y - ȳ)².
        weight_sum: (B,) Σw.
        weight_sq_sum: (B,) Σw².
        score: (B, T) weighted R².
        n_features: long (B,) F_b.
        thresholds: ``(min_std, min_r2, min_kish)``: outputs whose weighted standard deviation is below
            ``min_std`` are saturated; fits below ``min_r2`` (and not saturated) fit poorly; inputs with
            fewer than ``min_kish`` · F_b effective samples (Kish) have too few.

    Returns:
        Bool ``(saturated (B, T), poor_fit (B, T), few_samples (B,))``.
    """
    min_std, min_r2, min_kish = thresholds
    sw = weight_sum.clamp_min(torch.finfo(weight_sum.dtype).tiny)
    std = torch.sqrt(ss_tot / sw.unsqueeze(1))
    saturated = std < min_std
    poor_fit = (score < min_r2) > saturated  # a > b of bools is a & ~b
    kish = weight_sum**2 / weight_sq_sum.clamp_min(torch.finfo(weight_sq_sum.dtype).tiny)
    if min_kish == 1.0:  # 1.0 * F_b is F_b: compared as it is (promoted inside the comparison)
        few = kish < n_features
    else:
        few = kish < min_kish * n_features.to(kish.dtype)
    return saturated, poor_fit, few
