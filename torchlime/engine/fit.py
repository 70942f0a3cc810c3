"""The fit of sampled masks and scores, shared by the engine and ``Explanation.refit``; ``width="auto"``.

``accumulate_blocks`` adds the weighted normal equations of samples ``s_lo..s_hi-1`` of some inputs in fixed
blocks of ``FIT_BLOCK`` samples (and groups of inputs that bound the memory), and ``solve`` fits the
surrogate on them. The engine's ``rows.Run.accumulate`` and ``fit_samples`` (masks and scores held in
memory, e.g. an explanation's kept samples) both go through them, so the same masks, scores, kernel and
surrogate give the same bits, whoever fits them. A surrogate that fits in sample space
(``Surrogate.sample_space``) gets no normal equations: the same blocks are only weighed and kept, and it
is fitted on them (``engine.sample_fit``).

``choose_width`` picks the width of an ``ExponentialKernel(width="auto")`` from the samples, without model
calls: the candidates are ``GRID`` times a reference width r, the median scaled distance of the samples
(sample 0, the input itself, excluded); sample s >= 1 falls in fold ``(s - 1) mod K`` (``N_FOLDS``), sample 0
is in every training set. Each candidate is fitted with its own weights on K - 1 folds (the call's
surrogate) and predicts the held-out fold; its error is the held-out squared error weighted by ONE fixed
reference weighting, the kernel of width r, over the same weighting's spread of the held-out outputs
(1 - out-of-sample R²), averaged over targets and inputs, then over folds (``cross_validate``). A width's
own weighted R² is measured on the samples it weighs itself, a different yardstick for every width (a narrow
width may fit its few heavy samples closely and generalise poorly), so it does not rank widths. The rule
(``pick_width``), one standard error towards the smoother fit, guarded by stability: with b the candidate of
smallest error (ties: the one nearer r), the widest candidate whose error is within one standard error
(across folds) of b's and whose top-k features (``TOP_K``, by magnitude) agree between the K folds' fits
(mean pairwise Jaccard) at least as well as b's. Under the reference weighting the fit weighted like r is
the best linear fit in expectation: wider candidates win when they cut the variance more than they add
bias (a planted linear model picks the widest; a model that bends away from the input stays near r).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Optional, Union

import torch

from torchlime.engine.sample_fit import check_sample_space, solve_samples
from torchlime.stages.fixed_cost import constant, record_function
from torchlime.stages.normal import Fit, Normal, NormalAccumulator
from torchlime.stages.sample_space import Design
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, WidthChoice

__all__ = [
    "FIT_BLOCK",
    "GRID",
    "N_FOLDS",
    "TOP_K",
    "MaskBlocks",
    "accumulate_blocks",
    "solve",
    "fit_samples",
    "reference_width",
    "cross_validate",
    "pick_width",
    "choose_width",
]

#: samples per input accumulated at once into the normal equations
FIT_BLOCK = 4096
_FIT_ELEMENTS = 1 << 24  # bound on inputs x FIT_BLOCK x F mask elements held by the fit at once
#: the candidate widths of ``width="auto"``, as multiples of the reference width: 1/4 .. 4 in steps of √2
GRID: tuple[float, ...] = tuple(2.0 ** (i / 2) for i in range(-4, 5))
#: K, the folds of ``width="auto"``
N_FOLDS = 5
#: the size of the top-k sets whose agreement across folds breaks ties of ``width="auto"``
TOP_K = 5
#: ``masks(b, g0, s0, s1)``: bool (n, s1 - s0, F) masks of samples s0..s1-1 of the inputs b (long (n,)),
#: which stand at positions g0..g0+n-1 of the inputs being accumulated
MaskBlocks = Callable[[torch.Tensor, int, int, int], torch.Tensor]
#: ``draw(b, s)``: bool (c, F) masks of rows (input b, sample s), two long (c,) tensors (``engine.plan``)
Draw = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def drawn_blocks(draw: Draw, f_max: int, device: torch.device) -> MaskBlocks:
    """``MaskBlocks`` that draw the masks of every block again (the call's draw: the same bits).

    Args:
        draw: the call's draw (``Draw``).
        f_max: F, the widest input's features.
        device: where the rows' coordinates are made.
    """

    def masks(b: torch.Tensor, g0: int, s0: int, s1: int) -> torch.Tensor:
        with record_function("torchlime::masks"):
            s = torch.arange(s0, s1, device=device)
            return draw(b.repeat_interleave(s1 - s0), s.repeat(b.shape[0])).view(b.shape[0], s1 - s0, f_max)

    return masks


def padded_as_nan(score: torch.Tensor, valid: Optional[torch.Tensor]) -> torch.Tensor:
    """The weighted R² with NaN on padded targets: they are no fits to judge (the metrics' NaN too).

    Args:
        score: (B, T) weighted R² of every fit.
        valid: bool (B, T) the targets that exist, or None (all of them).

    Returns:
        (B, T) the scores, NaN where ``valid`` is False.
    """
    if valid is None:
        return score
    nan = constant(math.nan, score.dtype, score.device)  # kept (one NaN object: its key matches)
    return torch.where(valid.to(score.device), score, nan)  # one operator, not a negation and a fill


def accumulate_blocks(  # noqa: PLR0913
    acc: Optional[NormalAccumulator],
    masks: MaskBlocks,
    scores: torch.Tensor,
    kernel: Kernel,
    valid: torch.Tensor,
    active: torch.Tensor,
    s_lo: int,
    s_hi: int,
    dists: Optional[torch.Tensor] = None,
    scale: Optional[torch.Tensor] = None,
    keep: bool = False,
    every: bool = False,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Add samples ``s_lo..s_hi-1`` of the inputs ``active`` to ``acc``, ``FIT_BLOCK`` samples at a time.

    Args:
        acc: the normal equations of all B inputs (added to in place: the engine's running sums), or None
            (a sample-space fit: the blocks are only weighed, and kept with ``keep``).
        masks: the masks of a block (``MaskBlocks``).
        scores: (B, S', T) the scores of every sample (S' >= s_hi).
        kernel: the kernel bound to the call (mask space: ``weigh_masks``; else ``weigh`` of ``dists``).
        valid: bool (B, F) the features that exist.
        active: long (n,) the inputs.
        s_lo: the first sample.
        s_hi: the sample after the last.
        dists: (B, S') distances of the samples for an input-space kernel, else None.
        scale: (B,) per-input divisors of ``dists`` (``Kernel.normaliser``), or None.
        keep: return the masks and weights of every block.
        every: ``active`` is every input, in order (0..B-1): a group of all of them reads the inputs' rows
            as slices, not gathered (the same values, no operator).

    Returns:
        ``(masks, weights)``: per block of samples, bool (n, r, F) and (n, r) (empty lists unless ``keep``).
    """
    f_max = valid.shape[1]
    group = max(1, _FIT_ELEMENTS // (FIT_BLOCK * max(f_max, 1)))
    kept_m: list[torch.Tensor] = []
    kept_w: list[torch.Tensor] = []
    for s0 in range(s_lo, s_hi, FIT_BLOCK):
        s1 = min(s0 + FIT_BLOCK, s_hi)
        block_m, block_w = [], []
        for g0 in range(0, len(active), group):  # groups of inputs bound the memory; sums are per input
            b = active[g0 : g0 + group]
            z = masks(b, g0, s0, s1)
            at: Union[torch.Tensor, slice] = slice(None) if every and group >= len(active) else b
            with record_function("torchlime::fit"):
                if dists is None:
                    w = kernel.weigh_masks(z, valid[at])
                else:
                    d = dists[at, s0:s1]
                    w = kernel.weigh(d if scale is None else d / scale[at].unsqueeze(1))
                if acc is not None:
                    acc.add(z, scores[at, s0:s1], w, rows=None if isinstance(at, slice) else b)
            if keep:
                block_m.append(z)
                block_w.append(w)
        if keep:
            kept_m.append(torch.cat(block_m))
            kept_w.append(torch.cat(block_w))
    return kept_m, kept_w


def solve(
    acc: NormalAccumulator, surrogate: Surrogate, valid: torch.Tensor, scores: torch.Tensor
) -> tuple[Normal, Fit]:
    """The normal equations of ``acc`` and the surrogate fitted on them (the engine's fit).

    Args:
        acc: the accumulated normal equations.
        surrogate: the surrogate.
        valid: bool (B, F) the features that exist.
        scores: (B, S, T) the scores (samples 0 and 1 anchor the fits that need them).

    Returns:
        ``(normal, fit)``.
    """
    normal = acc.normal()
    with record_function("torchlime::fit"):
        fit = surrogate.fit_normal(normal, valid, anchors=scores[:, :2])
    return normal, fit


def fit_samples(
    masks: torch.Tensor,
    scores: torch.Tensor,
    kernel: Kernel,
    surrogate: Surrogate,
    valid: torch.Tensor,
    dists: Optional[torch.Tensor] = None,
    scale: Optional[torch.Tensor] = None,
) -> tuple[Union[Normal, Design], Fit, torch.Tensor]:
    """Fit samples held in memory exactly as the engine fits the same samples of a call.

    Args:
        masks: bool (B, S, F) the masks (sample 0: the one the call's targets were chosen on).
        scores: (B, S, T) their model scores.
        kernel: the kernel, bound to the call (``Kernel.bind``).
        surrogate: the surrogate.
        valid: bool (B, F) the features that exist.
        dists: (B, S) distances for an input-space kernel, else None.
        scale: (B,) per-input divisors of ``dists``, or None.

    Returns:
        ``(normal, fit, weights)``: the normal equations (a sample-space surrogate: its ``Design``, which has
        the same moments), the ``Fit`` (coef (B, T, F), ...) and the (B, S) weights.
    """
    batch, n, f = masks.shape
    space = surrogate.sample_space
    acc = None if space else NormalAccumulator(batch, f, scores.shape[2], scores[:, 0], surrogate.dtype)
    every = torch.arange(batch, device=masks.device)

    def blocks(b: torch.Tensor, g0: int, s0: int, s1: int) -> torch.Tensor:
        return masks[b, s0:s1]

    _, kept = accumulate_blocks(acc, blocks, scores, kernel, valid, every, 0, n, dists, scale, keep=True, every=True)
    weights = torch.cat(kept, 1)
    if acc is None:
        return (*solve_samples(masks, weights, scores, surrogate, valid), weights)
    normal, fit = solve(acc, surrogate, valid, scores)
    return normal, fit, weights


def reference_width(distances: torch.Tensor) -> torch.Tensor:
    """The width of the fixed reference weighting: the median of the samples' distances.

    Args:
        distances: (B, S) scaled distances of the samples (sample 0 excluded from the median).

    Returns:
        Float64 0-d: the (lower) median, or the largest distance when the median is 0, or 1.
    """
    d = distances[:, 1:].double()
    med, top = d.median(), d.max()
    return torch.where(med > 0, med, torch.where(top > 0, top, torch.ones_like(top)))


def _fold(k: int, folds: int) -> slice:
    """The samples of fold ``k`` (``folds``: sample 0, which every training set holds)."""
    return slice(0, 1) if k == folds else slice(1 + k, None, folds)


def _masked_mean(values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean of (..., B, T) values over the (B, T) entries ``keep``."""
    w = keep.to(values.dtype)
    return (values * w).sum((-2, -1)) / w.sum().clamp_min(1)


def cross_validate(  # noqa: PLR0913
    masks: torch.Tensor,
    scores: torch.Tensor,
    distances: torch.Tensor,
    valid: torch.Tensor,
    surrogate: Surrogate,
    widths: torch.Tensor,
    reference: torch.Tensor,
    target_valid: Optional[torch.Tensor] = None,
    folds: int = N_FOLDS,
    k: int = TOP_K,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """K-fold held-out error under the reference weighting, and fold stability, of exponential widths.

    Per-fold sums are accumulated once per width (each sample once); the training sums of a fold are the
    total minus the fold's. No model calls, no host synchronisation.

    Args:
        masks: bool (B, S, F) the masks, S >= 2·folds + 1.
        scores: (B, S, T) their scores.
        distances: (B, S) the scaled distances (``scale · d``) the kernel weighs.
        valid: bool (B, F) the features that exist.
        surrogate: the surrogate fitted on the training folds.
        widths: (J,) the widths to score.
        reference: 0-d, the width of the fixed weighting of the held-out errors.
        target_valid: bool (B, T) the targets that exist, or None (all).
        folds: K.
        k: the size of the top-k sets.

    Returns:
        ``(error, standard_error, stability)``: float64 (J,) each (see the module docstring).
    """
    batch, _, f = masks.shape
    t, n_w, dev = scores.shape[2], widths.shape[0], masks.device
    d2 = distances.double() ** 2
    w = torch.exp(-d2.unsqueeze(0) / (2 * widths.double().view(-1, 1, 1) ** 2))  # (J, B, S)
    w_ref = torch.exp(-d2 / (2 * reference.double() ** 2))  # (B, S)
    y0, every = scores[:, 0], torch.arange(batch, device=dev)
    acc = NormalAccumulator(n_w * (folds + 1) * batch, f, t, y0.repeat(n_w * (folds + 1), 1), surrogate.dtype)
    per = max(1, _FIT_ELEMENTS // max(1, batch * f * -(-(masks.shape[1] - 1) // folds)))  # widths per add
    for fold in range(folds + 1):  # each sample is added once per width, widths stacked
        part = _fold(fold, folds)
        x, y = masks[:, part], scores[:, part]
        for j0 in range(0, n_w, per):
            js = torch.arange(j0, min(j0 + per, n_w), device=dev)
            rows = ((js * (folds + 1) + fold).unsqueeze(1) * batch + every).flatten()
            g = js.shape[0]
            acc.add(x.repeat(g, 1, 1), y.repeat(g, 1, 1), w[j0 : j0 + g, :, part].flatten(0, 1), rows=rows)
    train = NormalAccumulator(n_w * folds * batch, f, t, y0.repeat(n_w * folds, 1), surrogate.dtype)
    sums = acc.sums.view(n_w, folds + 1, batch, acc.sums.shape[1])  # every running sum at once
    train.set_sums((sums.sum(1, keepdim=True) - sums[:, :folds]).reshape(n_w * folds * batch, -1))
    reps = n_w * folds
    fit = surrogate.fit_normal(train.normal(), valid.repeat(reps, 1), anchors=scores[:, :2].repeat(reps, 1, 1))
    coef = fit.coef.double().view(n_w, folds, batch, t, f)
    intercept = fit.intercept.double().view(n_w, folds, batch, t)
    real = torch.ones(batch, t, dtype=torch.bool, device=dev) if target_valid is None else target_valid.to(dev)
    errors = []
    for fold in range(folds):
        part = _fold(fold, folds)
        x, y, wr = masks[:, part].double(), scores[:, part].double(), w_ref[:, part].unsqueeze(-1)
        pred = intercept[:, fold].unsqueeze(2) + torch.einsum("bnf,jbtf->jbnt", x, coef[:, fold])  # (J, B, n, T)
        sse = (wr * (y - pred) ** 2).sum(2)  # (J, B, T)
        mean = (wr * y).sum(1) / wr.sum(1).clamp_min(torch.finfo(torch.float64).tiny)
        spread = (wr * (y - mean.unsqueeze(1)) ** 2).sum(1)  # (B, T)
        rel = torch.where(spread > 0, sse / spread.clamp_min(torch.finfo(torch.float64).tiny), 0.0)
        errors.append(_masked_mean(rel, real))
    per_fold = torch.nan_to_num(torch.stack(errors, 1), nan=math.inf)  # (J, K)
    ok = valid.view(1, 1, batch, 1, f)
    key = coef.abs().masked_fill(~ok, -math.inf)
    top = key.argsort(dim=-1, descending=True, stable=True)[..., : min(k, f)]
    sets = (torch.zeros_like(key, dtype=torch.bool).scatter(-1, top, True) & ok).double()  # (J, K, B, T, F)
    inter = torch.einsum("jkbtf,jlbtf->jklbt", sets, sets)
    size = sets.sum(-1)
    jaccard = inter / (size.unsqueeze(2) + size.unsqueeze(1) - inter).clamp_min(1)
    pairs = torch.triu(torch.ones(folds, folds, dtype=torch.bool, device=dev), diagonal=1)
    stability = _masked_mean(jaccard[:, pairs].mean(1), real)
    return per_fold.mean(1), per_fold.std(1) / math.sqrt(folds), stability


def pick_width(errors: list[float], standard_errors: list[float], stability: list[float]) -> int:
    """The rule of ``width="auto"`` (module docstring): the index of the chosen candidate.

    Args:
        errors: per candidate (narrowest first), the held-out error.
        standard_errors: per candidate, its standard error across the folds.
        stability: per candidate, the top-k agreement across the folds.

    Returns:
        The chosen index.

    Example:
        >>> pick_width([0.9, 0.5, 0.4, 0.41, 0.45], [0.1, 0.05, 0.02, 0.02, 0.02], [0.5, 0.8, 0.85, 0.9, 0.9])
        3
    """
    n = len(errors)
    centre = n // 2
    best = min(range(n), key=lambda i: (errors[i], abs(i - centre)))
    slack = standard_errors[best] if math.isfinite(standard_errors[best]) else 0.0
    return max(i for i in range(n) if errors[i] <= errors[best] + slack and stability[i] >= stability[best])


def choose_width(
    kernel: ExponentialKernel,
    masks: torch.Tensor,
    scores: torch.Tensor,
    distances: torch.Tensor,
    valid: torch.Tensor,
    surrogate: Surrogate,
    target_valid: Optional[torch.Tensor] = None,
) -> ExponentialKernel:
    """``kernel`` (``width="auto"``) with the width chosen from the samples (module docstring).

    One host synchronisation reads the candidates' scores; no model calls.

    Args:
        kernel: the exponential kernel whose width is "auto".
        masks: bool (B, S, F) the masks of the call.
        scores: (B, S, T) their scores.
        distances: (B, S) the distances the kernel measures (before its ``scale``).
        valid: bool (B, F) the features that exist.
        surrogate: the call's surrogate.
        target_valid: bool (B, T) the targets that exist, or None (all).

    Returns:
        The kernel with the chosen width and ``choice`` (a ``WidthChoice``).

    Raises:
        ValueError: fewer than 2·``N_FOLDS`` + 1 samples per input, or a sample-space surrogate.
    """
    check_sample_space(surrogate, adaptive=False, auto_width=True)
    n = masks.shape[1]
    if n < 2 * N_FOLDS + 1:
        raise ValueError(
            f"`kernel` ExponentialKernel(width='auto') chooses its width by {N_FOLDS}-fold cross-validation: "
            f"it needs n_samples >= {2 * N_FOLDS + 1}, got {n}; pass more samples or a number width"
        )
    d = distances.double() * kernel.scale
    ref = reference_width(d)
    widths = ref * torch.tensor(GRID, dtype=torch.float64, device=ref.device)
    error, se, stability = cross_validate(masks, scores, d, valid, surrogate, widths, ref, target_valid)
    values = torch.cat((widths, error, se, stability, ref.view(1))).tolist()  # the one host sync
    j = len(GRID)
    cands, errs, ses, stab = (values[i * j : (i + 1) * j] for i in range(4))
    pick = pick_width(errs, ses, stab)
    choice = WidthChoice(tuple(cands), tuple(errs), tuple(ses), tuple(stab), values[-1], cands[pick], N_FOLDS, TOP_K)
    return dataclasses.replace(kernel, width=cands[pick], choice=choice)
