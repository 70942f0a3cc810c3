"""Stage 6: batched weighted linear surrogates, one per (input, target), all B·T solved at once.

Objectives (w = proximity weights, X = masks, y = model outputs; the intercept b is not penalised):
``Ridge`` min Σ w (y - b - Xβ)² + α ||β||² (sklearn's ``Ridge``), ``Lasso`` min (1 / 2Σw) Σ w (y - b -
Xβ)² + α ||β||₁ (sklearn's ``Lasso``), ``KLasso`` the first K features on the Lasso path, refit by
least squares (lime's ``lasso_path`` selection). The score is sklearn's weighted R²; ``local_pred``
is the fit at the all-ones row. The fits need only the normal equations (``stages.normal``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch

from torchlime._util.checks import check_positive_float, check_positive_int
from torchlime.stages.normal import Fit as Fit
from torchlime.stages.normal import Normal as Normal
from torchlime.stages.normal import NormalAccumulator as NormalAccumulator
from torchlime.stages.normal import exact_matmul as exact_matmul
from torchlime.stages.normal import finish as finish
from torchlime.stages.normal import normal_equations as normal_equations
from torchlime.stages.normal import pad_identity
from torchlime.stages.normal import solve_spd as solve_spd
from torchlime.stages.standard_error import residual_ss, ridge_se


class Surrogate:
    """Base class: ``solve(normal, valid) -> beta (B, F, T)`` on the normal equations.

    ``dtype`` is the dtype of the per-block products while the statistics are
    accumulated and of the returned fit (the solve itself runs in float64).
    Every surrogate here needs only the weighted normal equations, O(B·F·(F + T))
    memory, never the samples themselves; a surrogate with ``sample_space`` True
    (``stages.sample_space``) fits on the samples instead, and the engine keeps them for it.
    """

    dtype: torch.dtype = torch.float32
    #: fits on the samples (``fit``) rather than on normal equations: the engine keeps the samples
    sample_space: ClassVar[bool] = False
    #: the estimator of ``Explanation.coef_se`` (``stages.standard_error.CoefSE.method``); "none": no estimate
    se_method: ClassVar[str] = "none"

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """The coefficients of every fit from the normal equations.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.

        Returns:
            Float64 (B, F, T) coefficients.
        """
        raise NotImplementedError

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """Fit B·T weighted linear models from their normal equations.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
            anchors: (B, 2, T) the outputs of samples 0 and 1 (the unperturbed input, and the
                sample a design may reserve, e.g. KernelSHAP's all-hidden coalition); most
                surrogates ignore them.

        Returns:
            ``Fit`` with coef (B, T, F), intercept (B, T), score (B, T), local_pred (B, T).
        """
        return finish(self.solve(ne, valid), ne, valid, self.dtype)  # coef_std None

    def coef_se(self, ne: Normal, fit: Fit, valid: torch.Tensor) -> Optional[torch.Tensor]:
        """Float64 (B, T, F) standard errors of a fit from its normal equations, or None (``stages.standard_error``).

        Args:
            ne: the normal equations the fit was solved from.
            fit: the fit, coef (B, T, F) and score (B, T).
            valid: bool (B, F) the features that exist for each input.
        """
        return None

    def fit(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor) -> Fit:
        """Fit B·T weighted linear models on samples held in memory.

        Args:
            x: (B, S, F) masks (bool or float).
            y: (B, S, T) outputs.
            w: (B, S) weights.
            valid: bool (B, F), features that exist for each input.

        Returns:
            ``Fit`` with coef (B, T, F), intercept (B, T), score (B, T), local_pred (B, T).
        """
        return self.fit_normal(normal_equations(x, y, w, self.dtype), valid)


@dataclass(frozen=True)
class Ridge(Surrogate):
    """Weighted ridge regression with an unpenalised intercept (lime: alpha=1).

    ``alpha=0`` gives ordinary weighted least squares via a rank-safe pseudo-inverse.

    Attributes:
        alpha: the ridge penalty α >= 0.
        dtype: dtype of the accumulated products and of the returned fit.
    """

    alpha: float = 1.0
    dtype: torch.dtype = torch.float32
    se_method: ClassVar[str] = "sandwich"

    def __post_init__(self) -> None:
        check_positive_float(self.alpha, "alpha", allow_zero=True)

    def coef_se(self, ne: Normal, fit: Fit, valid: torch.Tensor) -> Optional[torch.Tensor]:
        """Float64 (B, T, F): ``sqrt(σ² (G + αI)⁻¹ G (G + αI)⁻¹ + shrinkage²)`` (``standard_error.ridge_se``).

        Args:
            ne: the normal equations the fit was solved from.
            fit: the fit, coef (B, T, F).
            valid: bool (B, F) the features that exist for each input.
        """
        return ridge_se(ne, residual_ss(ne, fit.coef), valid, self.alpha, fit.coef)

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Float64 (B, F, T): the ridge coefficients (a batched Cholesky, or a pseudo-inverse at α = 0).

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        return solve_spd(pad_identity(ne.gram, valid), ne.rhs, self.alpha)


def _per_weight(ne: Normal) -> tuple[torch.Tensor, torch.Tensor]:
    """Gram (B, F, F) and rhs (B, F, T) divided by each fit's weight sum: the penalised paths' scale.

    Args:
        ne: the normal equations, gram (B, F, F), rhs (B, F, T) and weight_sum (B,).
    """
    sw = ne.weight_sum.view(-1, 1, 1)
    return ne.gram / sw, ne.rhs / sw


def _soft(v: torch.Tensor, thr: torch.Tensor) -> torch.Tensor:
    return torch.sign(v) * (v.abs() - thr).clamp_min(0)


def fista_lasso(
    gram: torch.Tensor,
    rhs: torch.Tensor,
    lam: torch.Tensor,
    beta0: torch.Tensor,
    max_iter: int,
    tol: float,
    check_every: int = 25,
) -> torch.Tensor:
    """Batched FISTA with adaptive restart for min ½βᵀGβ - cᵀβ + λ||β||₁.

    Args:
        gram: (B, F, F) normalised Gram (Xcᵀ W Xc / Σw).
        rhs: (B, F, T) normalised right-hand sides (Xcᵀ W yc / Σw).
        lam: (B, 1, T) or broadcastable penalties.
        beta0: (B, F, T) warm start.
        max_iter: iteration cap.
        tol: a fit stops (its coefficients are kept from then on) when its max |Δβ| < tol at a check, so
            each fit's answer is its own whatever the fits solved beside it; the loop ends when all have.
        check_every: iterations between the checks of ``tol``.

    Returns:
        (B, F, T) the coefficients.
    """
    eigenvalues: torch.Tensor = torch.linalg.eigvalsh(gram)  # torch.linalg is untyped
    lip = eigenvalues[..., -1].clamp_min(1e-12).view(-1, 1, 1)

    def grad(z: torch.Tensor) -> torch.Tensor:
        return gram @ z - rhs

    return fista(grad, 1.0 / lip, lam, beta0, max_iter, tol, check_every)


def fista(
    grad: Callable[[torch.Tensor], torch.Tensor],
    step: torch.Tensor,
    lam: torch.Tensor,
    beta0: torch.Tensor,
    max_iter: int,
    tol: float,
    check_every: int = 25,
) -> torch.Tensor:
    """Batched FISTA with adaptive restart for min f(β) + λ||β||₁, f smooth with gradient ``grad``.

    Args:
        grad: ∇f of (B, F, T) coefficients, (B, F, T).
        step: (B, 1, 1) steps, 1 / the Lipschitz constant of ∇f.
        lam: (B, 1, T) or broadcastable penalties.
        beta0: (B, F, T) warm start.
        max_iter: iteration cap.
        tol: a fit stops (its coefficients are kept from then on) when its max |Δβ| < tol at a check.
        check_every: iterations between the checks of ``tol``.

    Returns:
        (B, F, T) the coefficients.
    """
    beta = beta0
    z = beta0
    t = torch.ones_like(lam.expand(beta.shape[0], 1, beta.shape[-1]))
    done = torch.zeros_like(t, dtype=torch.bool)  # (B, 1, T) the fits that have converged
    for it in range(max_iter):
        new = torch.where(done, beta, _soft(z - step * grad(z), step * lam))
        delta = new - beta
        t_new = 0.5 * (1 + torch.sqrt(1 + 4 * t * t))
        # restart momentum of the fits that went uphill (O'Donoghue & Candès gradient scheme)
        uphill = ((z - new) * delta).sum(1, keepdim=True) > 0
        t_new = torch.where(uphill, torch.ones_like(t_new), t_new)
        mom = torch.where(uphill, torch.zeros_like(t), (t - 1) / t_new)
        z = new + mom * delta
        beta, t = new, t_new
        if (it + 1) % check_every == 0:
            done = done | (delta.abs().amax(1, keepdim=True) < tol)
            if bool(done.all()):
                break
    return beta


@dataclass(frozen=True)
class _LassoFields:
    """The settings of a Lasso fit and their checks: ``Lasso``'s, and ``sample_space.SampleLasso``'s.

    Attributes:
        alpha: the L1 penalty α >= 0 (captum's default 0.01).
        max_iter: FISTA's iteration cap.
        tol: FISTA stops when no coefficient moves by ``tol`` or more.
        dtype: dtype of the returned fit.
    """

    alpha: float = 0.01
    max_iter: int = 5000
    tol: float = 1e-7
    dtype: torch.dtype = torch.float32
    se_method: ClassVar[str] = "bootstrap"  # from kept samples (``stages.standard_error.bootstrap_se``)

    def __post_init__(self) -> None:
        check_positive_float(self.alpha, "alpha", allow_zero=True)
        check_positive_int(self.max_iter, "max_iter")


@dataclass(frozen=True)
class Lasso(_LassoFields, Surrogate):
    """Weighted Lasso (sklearn's objective), solved by batched FISTA on the Gram matrix.

    captum's default is alpha=0.01 (on probabilities).

    Attributes:
        alpha: the L1 penalty α >= 0.
        max_iter: FISTA's iteration cap.
        tol: FISTA stops when no coefficient moves by ``tol`` or more.
        dtype: dtype of the accumulated products and of the returned fit.
    """

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Float64 (B, F, T): the Lasso coefficients (batched FISTA from 0).

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        gram, rhs = _per_weight(ne)
        lam = torch.full((1, 1, 1), self.alpha, dtype=gram.dtype, device=gram.device)
        return fista_lasso(gram, rhs, lam, torch.zeros_like(rhs), self.max_iter, self.tol)


@dataclass(frozen=True)
class KLasso(Surrogate):
    """K-Lasso: the first ``k`` features to enter the Lasso path, refit by least squares.

    The path runs over ``n_lambdas`` penalties from λ_max (nothing selected) down
    to ``λ_max · eps``, warm-started, for all fits at once. Features are ranked by
    the path step at which they enter (ties: larger |β| at the end of the path);
    the first ``k`` are refit by weighted ridge with ``refit_alpha`` (0: least squares).
    Fewer than ``k`` are kept only when fewer ever enter the path.

    Attributes:
        k: the number of features kept per fit.
        refit_alpha: the ridge penalty of the refit (0: least squares).
        n_lambdas: the number of penalties on the path (>= 2).
        eps: the smallest penalty, as a fraction of λ_max.
        iters_per_lambda: FISTA iterations per penalty.
        dtype: dtype of the accumulated products and of the returned fit.
    """

    k: int = 10
    refit_alpha: float = 0.0
    n_lambdas: int = 40
    eps: float = 1e-4
    iters_per_lambda: int = 200
    dtype: torch.dtype = torch.float32
    se_method: ClassVar[str] = "bootstrap"  # from kept samples (``stages.standard_error.bootstrap_se``)

    def __post_init__(self) -> None:
        check_positive_int(self.k, "k")
        check_positive_float(self.refit_alpha, "refit_alpha", allow_zero=True)
        check_positive_int(self.n_lambdas, "n_lambdas", minimum=2)

    def select(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Bool (B, F, T): the chosen support of every fit.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        gram, rhs = _per_weight(ne)
        lam_max = rhs.abs().amax(1, keepdim=True).clamp_min(1e-30)  # (B, 1, T)
        ratios = torch.logspace(0, math.log10(self.eps), self.n_lambdas, dtype=gram.dtype)
        beta = torch.zeros_like(rhs)
        entry = torch.full_like(rhs, float(self.n_lambdas))  # step at which each feature entered
        for step, r in enumerate(ratios.tolist()):
            beta = fista_lasso(
                gram, rhs, lam_max * r, beta, self.iters_per_lambda, tol=0.0, check_every=self.iters_per_lambda + 1
            )
            entry = torch.where((beta != 0) & (entry == self.n_lambdas), float(step), entry)
        mag = beta.abs() / beta.abs().amax(1, keepdim=True).clamp_min(1e-30)
        key = -entry + 0.5 * mag  # earlier entry first, then larger final |β|
        key = key.masked_fill((entry == self.n_lambdas) | ~valid.unsqueeze(-1), float("-inf"))
        k = min(self.k, rhs.shape[1])
        idx = key.topk(k, dim=1).indices
        chosen = torch.zeros_like(rhs, dtype=torch.bool).scatter_(1, idx, True)
        return chosen & torch.isfinite(key)

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Float64 (B, F, T): the refitted coefficients, zero outside the chosen features.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        chosen = self.select(ne, valid)  # (B, F, T)
        sel = chosen.transpose(1, 2).to(ne.gram.dtype)  # (B, T, F)
        gram = ne.gram.unsqueeze(1) * sel.unsqueeze(-1) * sel.unsqueeze(-2)
        gram = gram + torch.diag_embed(1.0 - sel)
        rhs = (ne.rhs.transpose(1, 2) * sel).unsqueeze(-1)  # (B, T, F, 1)
        beta = solve_spd(gram, rhs, self.refit_alpha).squeeze(-1) * sel  # (B, T, F)
        return beta.transpose(1, 2)
