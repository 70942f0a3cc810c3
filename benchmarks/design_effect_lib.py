"""Design-aware error estimates measured by ``bench_design_effect``: candidates, not the library's defaults.

The library's standard errors (``stages.standard_error.ridge_se``) assume independent samples. For the
Sobol design two candidates read the design's own error from nested prefixes of one call's samples, as
randomised quasi-Monte Carlo practice does with replicates:

- ``pooled_design_effect``: with fits at n_0 = N > n_1 > n_2 > n_3 (halvings, kept while
  ``sobol_width(n_l) >= F_b``), ``deff = Σ_l Σ_j (β_l - β_(l+1))² / Σ_l Σ_j max(v_(l+1) - v_l, 0)`` (v the
  i.i.d. variances; for independent samples each numerator term has its denominator term's expectation),
  ``se = se_iid · sqrt(deff)`` with Satterthwaite's degrees of freedom ν = (Σ d)² / Σ d² for a t interval;
  the i.i.d. se where no halving is usable.
- ``lime_rule_stops``: ``n_samples="auto"`` rounds (start, 2 start, ...) that stop an input once the upper
  95 % bound of its squared error, ``deff · Σ_j v_j`` (or the last round's movement alone, ``levels=1``),
  is at most the squared error of lime's design (Bernoulli masks, ``Ridge(alpha=1)``) at 1000 samples:
  ``ridge_se`` of the same normal equations scaled to 1000 samples with α = 1.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from torchlime.engine.fit import fit_samples
from torchlime.engine.presets import ENGINE
from torchlime.methods.designs import sobol_width
from torchlime.stages.normal import Normal
from torchlime.stages.standard_error import residual_ss, ridge_se

#: the most halvings pooled
LEVELS = 3
#: lime's design's samples and ridge penalty, the rule's yardstick
LIME_SAMPLES, LIME_ALPHA = 1000, 1.0


class Prefix(NamedTuple):
    """The default fit of the first n samples: coefficients, i.i.d. variances and coef_se (B, F), its normal
    equations, and lime's squared error at 1000 samples (B,), for the explained class."""

    n: int
    coef: torch.Tensor
    var: torch.Tensor
    se: torch.Tensor
    lime_err2: torch.Tensor


def prefix_fit(x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, n: int) -> Prefix:
    """The ``Prefix`` of the first n samples of masks x (B, S, F) and scores y (B, S, 1), fitted as the engine fits."""
    kernel, surrogate = ENGINE["kernel"], ENGINE["surrogate"]
    normal, fit, _ = fit_samples(x[:, :n], y[:, :n], kernel, surrogate, valid)
    assert isinstance(normal, Normal)
    ss_res = residual_ss(normal, fit.coef)
    var = ridge_se(normal, ss_res, valid, surrogate.alpha) ** 2
    se = ridge_se(normal, ss_res, valid, surrogate.alpha, fit.coef)
    c = LIME_SAMPLES / n
    scaled = normal._replace(
        gram=normal.gram * c, weight_sum=normal.weight_sum * c, weight_sq_sum=normal.weight_sq_sum * c
    )
    lime = ridge_se(scaled, ss_res * c, valid, LIME_ALPHA, fit.coef).pow(2).sum(-1)
    return Prefix(n, fit.coef[:, 0].double(), var[:, 0], se[:, 0], lime[:, 0])


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
        if levels == 1:
            ratio = recent[0].n / recent[1].n - 1.0
            err2 = ((recent[0].coef - recent[1].coef) * valid).pow(2).sum(1) / ratio
            v = recent[0].var
            dof = (v.sum(1) ** 2 / v.pow(2).sum(1).clamp_min(1e-300)).clamp_min(1.0)
            dof = torch.where(v.sum(1) > 0, dof, valid.sum(1).double())
        else:
            deff, dof, _ = pooled_design_effect(recent, valid, levels)
            err2 = deff * recent[0].var.sum(1)
        ok = (err2 * dof / quantile("chi2", dof, 1.0 - confidence) <= recent[0].lime_err2).tolist()
        for b, settled in enumerate(ok):
            if used[b] is None and settled:
                used[b] = m
        if m >= cap or all(u is not None for u in used):
            return used
        m = min(2 * m, cap)
