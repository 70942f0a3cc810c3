"""Stage 6, the uncertainty of a designed fit: its own error, read from nested prefixes of its samples.

``stages.standard_error.ridge_se`` assumes independent samples. The default factorial masks
(``methods.designs.FactorialSampler``) err far less than independent ones at equal N (their 95 % intervals held
the large-N answer 99-100 % of the time), and which interactions alias the coefficients is fixed by the design,
so no formula of one fit sees that error. Nested prefixes do: any prefix of the design is the design of a call
at that N, and the least-squares fits of the first n_l = N / 2^l samples (l = 1, 2, 3) move by
``m_l = ||β_(l-1) - β_l||²`` (least squares: a ridge's shrinkage grows as 1 / n and would move them by itself).
Each halving drops what the larger fit resolved and the smaller aliased, so the error of the fit of N is the sum
of the movements still to come, m_1 r + m_1 r² + ... = m_1 r / (1 - r) with r the ratio of one halving's
movement to the one before it; independent samples have r = 1/2 (``E m_1 = Var(β_N)``). The ratio is read
from the prefixes, ``r = (m_1 + m_2) / (m_2 + m_3)``, and held in [1/3, 1/2]: at most the i.i.d. error, and
an error falling at most as N^-1.58 (= 1/3 per doubling; the decay between prefixes is uneven: a larger fit
resolves at once interactions that the smaller ones aliased, and a faster fall read there undercovers). Then

    se_j² = v_j · deff · (t_ν(0.975) / z(0.975))² + s_j²,   deff = m_1 r / (1 - r) / Σ_j v_j,

with v the i.i.d. variances of the fit of N (of its least-squares fit in deff), s the ridge's shrinkage
against the large-N fit (no sampling error: kept as it is, ``scaled_se``), and ν Satterthwaite's degrees of
freedom ``(Σ_j d_j)² / Σ_j d_j²`` of the i.i.d. increments d = v_1 - v (the movement is a sum of F_b squares), the
t-quantile folded in so that ``coef ± 1.96 coef_se`` is the 95 % interval. A prefix with fewer samples than
its design needs to tell the features apart (``methods.designs.sobol_width``) is not used: without m_3,
r = m_1 / m_2; without m_2, r = 1/2; without m_1, the i.i.d. standard error is kept. On the 14 models of
``benchmarks/bench_design_effect.py`` (random MLPs of 12-40 features and six trained or planted vision,
audio, text and tabular models) these intervals held the large-N answer 94-99 % of the time at N = 1000,
where the i.i.d. ones held 98-100 %, and 89-100 % from N = 250 to 2000
(``benchmarks/results/design_effect_cpu.json``; the bounds of r were chosen on these runs).
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import torch

from torchlime.stages.normal import Normal, pad_identity, solve_spd
from torchlime.stages.standard_error import residual_ss, ridge_se

#: the halvings read: fits of N/2, N/4 and N/8 samples
LEVELS = 3
#: the bounds of the ratio r of one halving's movement to the one before (1/2: independent samples)
DECAY = (1 / 3, 0.5)
#: z(0.975), the normal quantile of two-sided 95 % intervals
Z95 = 1.959963984540054


class Level(NamedTuple):
    """The fit of a prefix of every input's samples.

    Attributes:
        coef: (B, T, F) its coefficients.
        var: (B, T, F) their i.i.d. variances (``ridge_se`` without the shrinkage, squared).
        usable: bool (B,) whether the prefix told the input's features apart (``sobol_width(n_l) >= F_b``).
    """

    coef: torch.Tensor
    var: torch.Tensor
    usable: torch.Tensor


def least_squares_level(ne: Normal, valid: torch.Tensor, usable: torch.Tensor) -> Level:
    """The ``Level`` of normal equations: their least-squares coefficients and those coefficients' i.i.d. variances.

    The movements are read without the ridge's penalty: its shrinkage grows as 1 / n, and would move the fits of
    nested prefixes by itself, with no sampling error (``scaled_se`` keeps it apart).

    Args:
        ne: the normal equations of a fit's samples, gram (B, F, F) and rhs (B, F, T).
        valid: bool (B, F) the features that exist.
        usable: bool (B,) whether the samples told each input's features apart.
    """
    coef = solve_spd(pad_identity(ne.gram, valid), ne.rhs, 0.0).transpose(1, 2) * valid.unsqueeze(1)
    return Level(coef, ridge_se(ne, residual_ss(ne, coef), valid, 0.0) ** 2, usable)


def design_factor(chain: list[Level], valid: torch.Tensor) -> torch.Tensor:
    """Float64 (B, T, 1): the factor ``sqrt(deff) · t_ν(0.975) / z(0.975)`` of the i.i.d. standard errors.

    Args:
        chain: the fit of every input's N samples (usable everywhere), then those of its first N/2, N/4, ...
            samples (``LEVELS`` of them at most), most samples first.
        valid: bool (B, F) the features that exist for each input.

    Returns:
        (B, T, 1): 1 where no halving is usable; 0 where the prefixes did not move.

    Example:
        >>> v = torch.full((1, 1, 4), 0.01, dtype=torch.float64)
        >>> ok = torch.ones(1, dtype=torch.bool)
        >>> moves = [Level(torch.full((1, 1, 4), 0.1 * k, dtype=torch.float64), v * 2**k, ok) for k in (0, 1, 2, 3)]
        >>> factor = design_factor(moves, torch.ones(1, 4, dtype=torch.bool))  # m = 0.04 each: r = 1/2
        >>> round(float(factor), 3)  # sqrt(0.04 / 0.04) · t_4(0.975) / 1.96
        1.416
    """
    keep = valid.unsqueeze(1).double()
    now = chain[0]
    if len(chain) == 1:  # no prefix: the i.i.d. standard errors
        return torch.ones_like(now.var.double()[..., :1])
    moves, usable = [], []
    for larger, smaller in zip(chain[:LEVELS], chain[1 : LEVELS + 1]):
        moves.append(((larger.coef.double() - smaller.coef.double()) * keep).pow(2).sum(-1))  # (B, T)
        usable.append(smaller.usable.unsqueeze(1).expand_as(moves[-1]))
    zero = torch.zeros_like(moves[0])
    while len(moves) < LEVELS:  # fewer halvings asked for: the missing ones unusable
        moves.append(zero)
        usable.append(torch.zeros_like(zero, dtype=torch.bool))
    m1, m2, m3 = (torch.where(u, m, zero) for m, u in zip(moves, usable))
    tiny = torch.finfo(torch.float64).tiny
    ratio = torch.where(usable[2], (m1 + m2) / (m2 + m3).clamp_min(tiny), m1 / m2.clamp_min(tiny))
    r = torch.where(usable[1], ratio.clamp(*DECAY), torch.full_like(ratio, DECAY[1]))
    total = (now.var.double() * keep).sum(-1)  # (B, T): Σ_j v_j of the fit of N
    deff = m1 * r / (1.0 - r) / total.clamp_min(tiny)
    d = (chain[1].var.double() - now.var.double()).clamp_min(0.0) * keep
    dof = (d.sum(-1) ** 2 / d.pow(2).sum(-1).clamp_min(tiny)).clamp_min(1.0)
    factor = deff.sqrt() * t_quantile(dof, 0.975) / Z95
    return torch.where(usable[0] & (total > 0), factor, torch.ones_like(factor)).unsqueeze(-1)


def scaled_se(se: torch.Tensor, var: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """(B, T, F) ``sqrt(factor² v + (se² - v)⁺)``: the i.i.d. variance scaled, the ridge's shrinkage kept.

    The sandwich ``se`` holds the sampling variance v and the shrinkage against the large-N fit in quadrature
    (``standard_error.ridge_se``); the shrinkage is no sampling error, so no design lessens it.

    Args:
        se: (B, T, F) the sandwich standard errors.
        var: (B, T, F) their i.i.d. variances v (without the shrinkage).
        factor: (B, T, 1) ``design_factor``.
    """
    shrink2 = (se.double() ** 2 - var.double()).clamp_min(0.0)
    scaled = (factor.double() ** 2 * var.double() + shrink2).sqrt()
    return torch.where(scaled.isnan() | se.isinf(), se.double(), scaled)  # an infinite sandwich stays as it is


def t_quantile(dof: torch.Tensor, p: float) -> torch.Tensor:
    """The p-quantile of Student's t with ``dof`` (...) degrees of freedom (Cornish-Fisher, to ν⁻⁴).

    Within 0.1 % of the exact quantile at p = 0.975 from 4 degrees of freedom on (0.2 % at 3); below 3 the series falls
    short, so there log t is interpolated in log ν between the closed forms at ν = 1 and 2 and the series at
    3 (above the exact quantile, by at most 13 %).

    Args:
        dof: (...) float64 degrees of freedom (>= 1).
        p: the probability, in (1/2, 1).

    Example:
        >>> [round(float(t_quantile(torch.tensor(v, dtype=torch.float64), 0.975)), 3) for v in (1.0, 2.0, 10.0)]
        [12.706, 4.303, 2.228]
    """
    z = normal_quantile(p)
    v = dof.double()
    one = math.tan(math.pi * (p - 0.5))  # ν = 1: Cauchy's
    two = (2 * p - 1) * math.sqrt(2 / (1 - (2 * p - 1) ** 2))  # ν = 2
    three = _series(3.0, z)
    lv = v.clamp(1.0, 3.0).log()
    low = torch.where(
        v < 2,
        math.log(one) + (math.log(two) - math.log(one)) * lv / math.log(2.0),
        math.log(two) + (math.log(three) - math.log(two)) * (lv - math.log(2.0)) / math.log(1.5),
    ).exp()
    return torch.where(v < 3, low, _series(v, z))


def _series(v: Any, z: float) -> Any:
    """The Cornish-Fisher series of t's quantile at ν = v (a number or a tensor), z the normal one."""
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def normal_quantile(p: float) -> float:
    """The p-quantile of the standard normal distribution.

    Args:
        p: the probability, in (0, 1).
    """
    icdf: Callable[[torch.Tensor], torch.Tensor] = torch.distributions.Normal(0.0, 1.0).icdf  # untyped in torch
    return float(icdf(torch.tensor(p, dtype=torch.float64)))
