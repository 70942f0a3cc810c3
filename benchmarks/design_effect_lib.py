"""Design-aware error estimates measured by ``bench_design_effect``: a candidate for ``coef_se`` and the stopping rule.

The library's standard errors (``stages.standard_error.ridge_se``) assume independent samples. For the
quasi-random designs the estimates below read a design's own error from nested prefixes of one call's samples,
as randomised quasi-Monte Carlo practice does with replicates:

- ``library_se``: the library's estimate (``stages.design_error``), a designed call's ``coef_se``.
- ``pooled_design_effect`` (not in the library): with fits at n_0 = N > n_1 > n_2 > n_3 (halvings, kept while
  ``sobol_width(n_l) >= F_b``), ``deff = Σ_l Σ_j (β_l - β_(l+1))² / Σ_l Σ_j max(v_(l+1) - v_l, 0)`` (v the
  i.i.d. variances; for independent samples each numerator term has its denominator term's expectation),
  ``se = se_iid · sqrt(deff)`` with Satterthwaite's degrees of freedom ν = (Σ d)² / Σ d² for a t interval;
  the i.i.d. se where no halving is usable.
- ``lime_rule_stops``: ``n_samples="auto"`` rounds (start, 2 start, ...) that stop an input once the upper
  95 % bound of its estimated squared error is at most that of lime's design (Bernoulli masks,
  ``Ridge(alpha=1)``) at 1000 samples (``methods.lime_precision``): with ``levels=1`` the library's rule (the
  last round's movement), else ``deff · Σ_j v_j`` pooled over the halvings.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from torchlime.engine.fit import fit_samples
from torchlime.engine.presets import ENGINE
from torchlime.methods.designs import sobol_width
from torchlime.methods.lime_precision import Earlier, as_precise_as_lime, lime_error2
from torchlime.stages.design_error import design_factor, least_squares_level, scaled_se
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.standard_error import residual_ss, ridge_se

#: the most halvings pooled
LEVELS = 3
#: lime's design's samples, the rule's yardstick
LIME_SAMPLES = 1000


class Prefix(NamedTuple):
    """The default fit of the first n samples: coefficients, i.i.d. variances and coef_se (B, F), lime's squared
    error at 1000 samples (B,), for the explained class, and the normal equations and fit themselves."""

    n: int
    coef: torch.Tensor
    var: torch.Tensor
    se: torch.Tensor
    lime_err2: torch.Tensor
    normal: Normal
    fit: Fit


def prefix_fit(x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, n: int) -> Prefix:
    """The ``Prefix`` of the first n samples of masks x (B, S, F) and scores y (B, S, 1), fitted as the engine fits."""
    kernel, surrogate = ENGINE["kernel"], ENGINE["surrogate"]
    normal, fit, _ = fit_samples(x[:, :n], y[:, :n], kernel, surrogate, valid)
    assert isinstance(normal, Normal)
    ss_res = residual_ss(normal, fit.coef)
    var = ridge_se(normal, ss_res, valid, surrogate.alpha) ** 2
    se = ridge_se(normal, ss_res, valid, surrogate.alpha, fit.coef)
    lime = lime_error2(normal, fit, valid, n, LIME_SAMPLES)
    return Prefix(n, fit.coef[:, 0].double(), var[:, 0], se[:, 0], lime[:, 0], normal, fit)


def pooled_design_effect(chain: list[Prefix], valid: torch.Tensor, levels: int = LEVELS) -> tuple[torch.Tensor, ...]:
    """``(deff, dof, pooled)`` (B,) of a chain of nested fits, most samples first (module docstring).

    ``pooled`` is False where no halving was usable (deff 1, dof from the i.i.d. variances).
    """
    n_features = valid.sum(1)
    num = torch.zeros(valid.shape[0], dtype=torch.float64)
    den, den_sq = torch.zeros_like(num), torch.zeros_like(num)
    for larger, smaller in zip(chain[:levels], chain[1 : levels + 1]):
        usable = (sobol_width(smaller.n) >= n_features).double()
        d = (smaller.var - larger.var).clamp_min(0.0)
        num += ((larger.coef - smaller.coef) * valid).pow(2).sum(1) * usable
        den += d.sum(1) * usable
        den_sq += d.pow(2).sum(1) * usable
    pooled = den > 0
    own = chain[0].var.sum(1) ** 2 / chain[0].var.pow(2).sum(1).clamp_min(1e-300)
    deff = torch.where(pooled, num / den.clamp_min(1e-300), torch.ones_like(num))
    dof = torch.where(pooled, den**2 / den_sq.clamp_min(1e-300), own).clamp_min(1.0)
    return deff, dof, pooled


def library_se(chain: list[Prefix], valid: torch.Tensor) -> torch.Tensor:
    """(B, F) the library's standard errors (``stages.design_error``: ``design_factor`` of the prefixes'
    least-squares fits and ``scaled_se``, what a designed call's ``coef_se`` gives) of a chain of nested fits,
    most samples first."""
    n_features = valid.sum(1)
    levels = [least_squares_level(p.normal, valid, sobol_width(p.n) >= n_features) for p in chain[: LEVELS + 1]]
    factor = design_factor(levels, valid)[:, :1]
    return scaled_se(chain[0].se.unsqueeze(1), chain[0].var.unsqueeze(1), factor)[:, 0]


def halvings(x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, n: int, levels: int = LEVELS) -> list[Prefix]:
    """The fits of the first n, n/2, ..., n/2^levels samples."""
    return [prefix_fit(x, y, valid, max(2, n >> i)) for i in range(levels + 1)]


def quantile(dist: str, dof: torch.Tensor, p: float) -> torch.Tensor:
    """The p-quantile of Student's t or χ² with ``dof`` (B,) degrees of freedom (scipy)."""
    from scipy import stats

    law: Callable = stats.t.ppf if dist == "t" else stats.chi2.ppf
    return torch.tensor(law(p, dof.numpy()), dtype=torch.float64)


def lime_rule_stops(
    x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, start: int, cap: int, levels: int, confidence: float = 0.95
) -> list[Optional[int]]:
    """Per input, the samples the rule gives it (module docstring), None where not settled by ``cap``."""
    chain = halvings(x, y, valid, start)[1:][::-1]  # the first round's halves, fewest samples first
    used: list[Optional[int]] = [None] * x.shape[0]
    m = start
    while True:
        chain.append(prefix_fit(x, y, valid, m))
        recent = chain[::-1]  # most samples first
        now = recent[0]
        if levels == 1:  # the library's rule (n_samples="auto")
            earlier = Earlier(recent[1].fit.coef, recent[1].n)
            settings = (LIME_SAMPLES, confidence)
            alpha = ENGINE["surrogate"].alpha
            ok = as_precise_as_lime(now.normal, now.fit, valid, alpha, earlier, now.n, settings).tolist()
        else:
            deff, dof, _ = pooled_design_effect(recent, valid, levels)
            err2 = deff * now.var.sum(1)
            ok = (err2 * dof / quantile("chi2", dof, 1.0 - confidence) <= now.lime_err2).tolist()
        for b, settled in enumerate(ok):
            if used[b] is None and settled:
                used[b] = m
        if m >= cap or all(u is not None for u in used):
            return used
        m = min(2 * m, cap)
