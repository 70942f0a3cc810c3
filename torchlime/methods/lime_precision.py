"""The "lime" rule of ``n_samples="auto"``: stop an input once its explanation is as precise as lime's default.

The yardstick is lime's design (Bernoulli(1/2) masks, ``Ridge(alpha=1)``) at ``lime_samples`` samples, lime's
default 1000: its squared error ``Σ_j se_j²``, variance and shrinkage, is ``stages.standard_error.ridge_se`` of
the same normal equations scaled to that many samples, with α = 1 (``lime_error2``).

The fit's own squared error is read from how far it moved since the last round: for nested fits of n' < n
independent samples ``E ||β_n - β_n'||² = Σ_j Var(β_n,j) (n / n' - 1)``, so ``d² = ||β_n - β_n'||² / (n / n' - 1)``
estimates it, and with a design whose prefixes behave so it measures the design's own error, below the i.i.d.
formula's. The default factorial masks do (``benchmarks/bench_design_effect.py``: every input at least as precise
as lime's design at N = 1000 on the 14 models measured); one Sobol sequence's error can stall between rounds, and
the rule then stops early (44-100 % of the inputs as precise there). The first round compares with the fit of its
first half. An input stops once the upper ``confidence`` bound ``d² ν / χ²_ν(1 - confidence)`` is at most lime's
squared error for every target, ν Satterthwaite's ``(Σ_j v_j)² / Σ_j v_j²`` of the fit's i.i.d. variances v
(F_b for an exact fit, v = 0).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from torchlime.stages.design_error import normal_quantile
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.standard_error import ridge_se

#: lime's ridge penalty (``lime_base``'s ``Ridge(alpha=1)``), the yardstick's
LIME_ALPHA = 1.0


class Earlier(NamedTuple):
    """The fit of a prefix of an input's samples: the last round's, or the first round's first half.

    Attributes:
        coef: (B, T, F) its coefficients.
        n: the samples it fitted.
    """

    coef: torch.Tensor
    n: int


def lime_error2(normal: Normal, fit: Fit, valid: torch.Tensor, n: int, lime_samples: int) -> torch.Tensor:
    """Float64 (B, T): lime's squared error ``Σ_j se_j²`` at ``lime_samples`` samples (module docstring).

    Args:
        normal: the normal equations of the fit of n samples, gram (B, F, F), ss_tot (B, T) and weight sums (B,).
        fit: the fit, coef (B, T, F) and score (B, T).
        valid: bool (B, F) the features that exist for each input.
        n: the samples fitted.
        lime_samples: the samples of lime's design to compare with.
    """
    c = lime_samples / max(n, 1)
    ss_res = (1.0 - fit.score.double()).clamp_min(0) * normal.ss_tot
    scaled = normal._replace(
        gram=normal.gram * c, weight_sum=normal.weight_sum * c, weight_sq_sum=normal.weight_sq_sum * c
    )
    return ridge_se(scaled, ss_res * c, valid, LIME_ALPHA, fit.coef).pow(2).sum(-1)


def as_precise_as_lime(
    normal: Normal, fit: Fit, valid: torch.Tensor, alpha: float, earlier: Earlier, n: int, settings: tuple[int, float]
) -> torch.Tensor:
    """Bool (B,): inputs whose fit of n samples is, at the confidence, as precise as lime's, for every target.

    Args:
        normal: the normal equations of the fit, gram (B, F, F), ss_tot (B, T) and weight sums (B,).
        fit: the fit, coef (B, T, F) and score (B, T).
        valid: bool (B, F) the features that exist for each input.
        alpha: the surrogate's ridge penalty (at least 1e-6 is used for the variances).
        earlier: the fit of the first ``earlier.n`` < n of the same samples.
        n: the samples fitted.
        settings: ``(lime_samples, confidence)``, the yardstick's samples and the bound's one-sided confidence.

    Returns:
        Bool (B,).
    """
    lime_samples, confidence = settings
    ratio = max(n / max(earlier.n, 1) - 1.0, 1e-12)
    moved = (fit.coef.double() - earlier.coef.double()).nan_to_num(0.0) * valid.unsqueeze(1)
    d2 = moved.pow(2).sum(-1) / ratio  # (B, T): the fit's squared error
    ss_res = (1.0 - fit.score.double()).clamp_min(0) * normal.ss_tot
    v = ridge_se(normal, ss_res, valid, max(alpha, 1e-6)) ** 2  # (B, T, F): the i.i.d. variances
    total = v.sum(-1)
    n_free = valid.sum(1, keepdim=True).double().expand_as(total)
    dof = torch.where(total > 0, total**2 / v.pow(2).sum(-1).clamp_min(1e-300), n_free).clamp_min(1.0)
    bound = d2 * dof / chi2_quantile(dof, 1.0 - confidence)
    return (bound <= lime_error2(normal, fit, valid, n, lime_samples)).all(1)


def chi2_quantile(dof: torch.Tensor, p: float) -> torch.Tensor:
    """The p-quantile of χ² with ``dof`` (...) degrees of freedom (Wilson-Hilferty), at least 1e-12.

    ``dof · (1 - 2/(9 dof) + z_p sqrt(2/(9 dof)))³``: within about 1 % of the exact quantile from 10 degrees of
    freedom on; for fewer, and small p, below it (a more cautious bound).

    Args:
        dof: (...) the degrees of freedom (> 0).
        p: the probability, in (0, 1).

    Example:
        >>> round(float(chi2_quantile(torch.tensor(10.0, dtype=torch.float64), 0.05)), 2)  # exact: 3.94
        3.93
    """
    c = 2.0 / (9.0 * dof)
    return (dof * (1.0 - c + normal_quantile(p) * c.sqrt()).clamp_min(0.0) ** 3).clamp_min(1e-12)
