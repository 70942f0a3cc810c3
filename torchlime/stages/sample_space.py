"""Stage 6 in sample space: weighted linear surrogates fitted on the samples, never on (F, F) normal equations.

With S samples and F features, the normal equations cost O(F²) memory and O(F³) time: 181 GB in float64
for one 3x224x224 image with one feature per element. When S <= F the same objectives are solved on the (S, F)
design and an (S, S) Gram instead. With w the weights, Σw their sum, x̄ and ȳ the weighted means, the
scaled, centred design and outputs are

    X̃ = sqrt(w / Σw) (X - x̄)    (S, F),        ỹ = sqrt(w / Σw) (y - ȳ)    (S, T),

so that Σ w (y - b - Xβ)² / Σw = ||ỹ - X̃β||² at the best intercept b = ȳ - x̄ᵀβ (the intercept is never
penalised). ``SampleRidge`` solves min ||ỹ - X̃β||² + (α / Σw) ||β||² through the eigendecomposition
K = U Λ Uᵀ of the (S, S) Gram K = X̃ X̃ᵀ: β = X̃ᵀ U (Λ + α / Σw)⁻¹ Uᵀ ỹ, and at α = 0 the minimum-norm least
squares of scikit-learn's ``LinearRegression`` (``lstsq`` of the weighted, centred design), eigenvalues
below max(``rcond``², S·eps) λ_max counted as zero (``rcond``: a relative cutoff on the singular values, as
lstsq's; S·eps: the float64 Gram's rounding). No ``torch.linalg.lstsq``: on CUDA it assumes full rank,
and a centred design never has it.
``SampleLasso`` solves ½ ||ỹ - X̃β||² + α ||β||₁ (scikit-learn's ``Lasso`` with sample weights) by the
LARS homotopy (``stages.sample_lasso``). A surrogate that fits here says so (``Surrogate.sample_space``): the engine
then keeps the samples instead of accumulating normal equations, and its size check counts (B, S, F) and
(B, S, S) instead of (B, F, F).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Optional

import torch

from torchlime._util.checks import check_positive_float
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.sample_lasso import lars_lasso
from torchlime.stages.surrogate import Lasso, Ridge, Surrogate, _LassoFields

__all__ = ["Design", "design", "finish_samples", "SampleSurrogate", "SampleRidge", "SampleLasso", "in_sample_space"]


_REFUSED = "{!r} fits in sample space: it needs the samples (fit), not normal equations"


class Design(NamedTuple):
    """The weighted, centred samples of B fits, scaled so that their sums of squares are weighted means.

    Attributes:
        x: float64 (B, S, F) X̃ = sqrt(w / Σw) (X - x̄), zero on the features that do not exist.
        y: float64 (B, S, T) ỹ = sqrt(w / Σw) (y - ȳ).
        gram: float64 (B, S, S) K = X̃ X̃ᵀ.
        x_mean: float64 (B, F) x̄.
        y_mean: float64 (B, T) ȳ.
        weight_sum: float64 (B,) Σw.
        weight_sq_sum: float64 (B,) Σw² (with Σw, Kish's effective sample size).
        ss_tot: float64 (B, T) Σ w (y - ȳ)², the denominator of the weighted R².
    """

    x: torch.Tensor
    y: torch.Tensor
    gram: torch.Tensor
    x_mean: torch.Tensor
    y_mean: torch.Tensor
    weight_sum: torch.Tensor
    weight_sq_sum: torch.Tensor
    ss_tot: torch.Tensor


def design(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor) -> Design:
    """The scaled, centred samples of B fits (module docstring), in float64.

    Args:
        x: (B, S, F) masks (bool or float).
        y: (B, S, T) outputs.
        w: (B, S) weights >= 0.
        valid: bool (B, F) the features that exist.

    Returns:
        The ``Design``.
    """
    x64, y64, w64 = x.double(), y.double(), w.double()
    sw = w64.sum(1)
    share = w64 / sw.clamp_min(torch.finfo(torch.float64).tiny).unsqueeze(1)  # w / Σw: (B, S)
    x_mean = (share.unsqueeze(-1) * x64).sum(1)
    y_mean = (share.unsqueeze(-1) * y64).sum(1)
    root = share.sqrt().unsqueeze(-1)
    xt = root * (x64 - x_mean.unsqueeze(1)) * valid.unsqueeze(1).to(torch.float64)
    yt = root * (y64 - y_mean.unsqueeze(1))
    ss_tot = sw.unsqueeze(1) * (yt * yt).sum(1)
    return Design(xt, yt, xt @ xt.transpose(1, 2), x_mean, y_mean, sw, (w64 * w64).sum(1), ss_tot)


def finish_samples(beta: torch.Tensor, d: Design) -> Fit:
    """Intercept, weighted R² and local prediction of coefficients, from the samples.

    Σ w (y - ŷ)² = Σw ||ỹ - X̃β||²; R² as ``stages.normal.finish`` (scikit-learn's ``r2_score``).

    Args:
        beta: float64 (B, F, T) coefficients.
        d: the design they were solved on.

    Returns:
        ``Fit`` (float64) with coef (B, T, F), intercept, score and local_pred (B, T).
    """
    intercept = d.y_mean - (d.x_mean.unsqueeze(1) @ beta).squeeze(1)
    residual = d.y - d.x @ beta
    ss_res = d.weight_sum.unsqueeze(1) * (residual * residual).sum(1)
    score = torch.where(d.ss_tot > 0, 1.0 - ss_res / d.ss_tot.clamp_min(1e-300), (ss_res == 0).to(beta.dtype))
    return Fit(beta.transpose(1, 2), intercept, score, intercept + beta.sum(1))


class SampleSurrogate(Surrogate):
    """Base class of the surrogates fitted on the samples: ``coefficients(design) -> beta (B, F, T)``.

    ``sample_space`` is True: the engine keeps the samples of a call and calls ``fit`` on them; there are
    no normal equations to solve (``solve`` and ``fit_normal`` refuse). Memory O(B·S·(S + F) + B·F·T).
    """

    sample_space: ClassVar[bool] = True

    def coefficients(self, d: Design) -> torch.Tensor:
        """Float64 (B, F, T): the coefficients of every fit.

        Args:
            d: the scaled, centred samples.
        """
        raise NotImplementedError

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Refused (``Surrogate.solve`` describes the arguments): this surrogate fits on the samples (``fit``)."""
        raise TypeError(_REFUSED.format(self))

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """Refused, as ``solve`` (``Surrogate.fit_normal`` describes the arguments)."""
        raise TypeError(_REFUSED.format(self))

    def fit(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor) -> Fit:
        """``Surrogate.fit`` (the same arguments and ``Fit``) on the samples' ``design``, never forming (F, F)."""
        d = design(x, y, w, valid)
        beta = self.coefficients(d) * valid.unsqueeze(-1).to(torch.float64)
        return Fit(*(t.to(self.dtype) for t in finish_samples(beta, d)[:4]))


def _spectral(d: Design, alpha: float, rcond: float) -> torch.Tensor:
    """β = X̃ᵀ U g(Λ) Uᵀ ỹ: g = 1 / (λ + α / Σw), or at α = 0 1 / λ above the cutoff and 0 below."""
    evals: torch.Tensor
    evecs: torch.Tensor
    evals, evecs = torch.linalg.eigh(d.gram)  # torch.linalg is untyped
    evals = evals.clamp_min(0)
    if alpha > 0:
        inv = 1.0 / (evals + alpha / d.weight_sum.clamp_min(torch.finfo(torch.float64).tiny).unsqueeze(1))
    else:  # the Gram's rounding noise (about S·eps·λ_max) stays below the cutoff
        floor = max(rcond * rcond, d.gram.shape[-1] * torch.finfo(torch.float64).eps)
        cut = evals.amax(-1, keepdim=True) * floor
        inv = torch.where(evals > cut, 1.0 / evals.clamp_min(torch.finfo(torch.float64).tiny), 0.0)
    return d.x.transpose(1, 2) @ (evecs @ (inv.unsqueeze(-1) * (evecs.transpose(1, 2) @ d.y)))


@dataclass(frozen=True)
class SampleRidge(SampleSurrogate):
    """``Ridge`` solved in sample space; at α = 0 the minimum-norm weighted least squares.

    The same objective as ``torchlime.Ridge`` (min Σ w (y - b - Xβ)² + α ||β||², the intercept free), by the
    (S, S) Gram's eigendecomposition (module docstring). At α = 0 with S <= F the least-squares fit is not
    unique: this is the solution of least norm, scikit-learn's ``LinearRegression`` (captum's KernelShap).

    Attributes:
        alpha: the ridge penalty α >= 0.
        rcond: at α = 0, singular values below ``rcond`` times the largest count as zero (scikit-learn's
            ``LinearRegression(tol=1e-6)`` default, handed to ``scipy.linalg.lstsq`` as ``cond``).
        dtype: dtype of the returned fit.
    """

    alpha: float = 0.0
    rcond: float = 1e-6
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_float(self.alpha, "alpha", allow_zero=True)
        check_positive_float(self.rcond, "rcond")

    def coefficients(self, d: Design) -> torch.Tensor:
        """Float64 (B, F, T): X̃ᵀ U (Λ + α / Σw)⁺ Uᵀ ỹ.

        Args:
            d: the scaled, centred samples.
        """
        return _spectral(d, self.alpha, self.rcond)


@dataclass(frozen=True)
class SampleLasso(_LassoFields, SampleSurrogate):
    """``Lasso`` solved in sample space by the LARS homotopy (scikit-learn's ``Lasso`` with sample weights).

    Objective: min (1 / 2Σw) Σ w (y - b - Xβ)² + α ||β||₁, the intercept free. The path runs from the
    largest correlation down to α, each step O(S·F) (``stages.sample_lasso``); the result is checked against the
    optimality conditions, and fits the path leaves unchecked (a degenerate path, past its step cap) are
    finished by FISTA on the design, warm-started. With S <= F the optimum may be one of many (features
    of equal columns: the lowest index takes the weight, as coordinate descent gives it); its fitted
    values are unique. α = 0 is least squares: the minimum-norm solution (``SampleRidge``).

    Attributes:
        alpha: the L1 penalty α >= 0 (captum's default 0.01).
        max_iter: FISTA's iteration cap, for fits the path leaves unchecked.
        tol: FISTA stops when no coefficient moves by ``tol`` or more.
        dtype: dtype of the returned fit.
    """

    def coefficients(self, d: Design) -> torch.Tensor:
        """Float64 (B, F, T): the Lasso coefficients of every fit.

        Args:
            d: the scaled, centred samples.
        """
        if self.alpha == 0:
            return _spectral(d, 0.0, SampleRidge.rcond)
        return lars_lasso(d.x, d.y, d.gram, self.alpha, self.max_iter, self.tol).transpose(1, 2)


def in_sample_space(surrogate: Surrogate) -> Optional[SampleSurrogate]:
    """The sample-space surrogate of the same objective, or None where there is none.

    Args:
        surrogate: a surrogate (a ``SampleSurrogate`` is returned as it is).

    Returns:
        ``SampleRidge`` for ``Ridge``, ``SampleLasso`` for ``Lasso`` (same α and dtype), else None.
    """
    if isinstance(surrogate, SampleSurrogate):
        return surrogate
    if type(surrogate) is Ridge:
        return SampleRidge(alpha=surrogate.alpha, dtype=surrogate.dtype)
    if type(surrogate) is Lasso:
        return SampleLasso(alpha=surrogate.alpha, max_iter=surrogate.max_iter, tol=surrogate.tol, dtype=surrogate.dtype)
    return None
