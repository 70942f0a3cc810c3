"""Stage 6: batched weighted linear surrogates.

Every (input, target) pair gets its own weighted linear model over the masks.
All B·T fits are solved at once: the T targets of one input share one weighted
Gram matrix, so ridge is one batched Cholesky with T right-hand sides.

Objectives (w = proximity weights, X = masks, y = model outputs):

* ``Ridge``:  min Σ w (y - b - Xβ)² + α ||β||²               (sklearn ``Ridge`` with sample_weight)
* ``Lasso``:  min (1 / 2Σw) Σ w (y - b - Xβ)² + α ||β||₁      (sklearn ``Lasso`` with sample_weight)
* ``KLasso``: the support of the last point on the Lasso path with at most K
  features, refit by weighted least squares (lime's ``lasso_path`` selection).

The intercept b is not penalised (data are centred by their weighted means).
The score is sklearn's weighted R²; ``local_pred`` is the fit at the all-ones row.
``torch.linalg.lstsq`` is never used: on CUDA it silently assumes full rank.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Iterator, NamedTuple, Optional

import torch

from torchlime._checks import check_positive_float, check_positive_int


class Fit(NamedTuple):
    """Result of a batched surrogate fit (all tensors in the fit dtype)."""

    coef: torch.Tensor  # (B, T, F)
    intercept: torch.Tensor  # (B, T)
    score: torch.Tensor  # (B, T)
    local_pred: torch.Tensor  # (B, T)
    coef_std: Optional[torch.Tensor] = None  # (B, T, F) posterior standard deviation (Bayesian surrogates)


@contextlib.contextmanager
def exact_matmul() -> Iterator[None]:
    """Keep TF32 off while normal equations are accumulated (restores the user's setting)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


class Normal(NamedTuple):
    """Weighted, centred normal equations of a batch of fits (float64).

    Attributes:
        gram: (B, F, F) Xcᵀ W Xc. rhs: (B, F, T) Xcᵀ W yc.
        x_mean: (B, F) and y_mean: (B, T) weighted means. weight_sum: (B,) Σw.
        ss_tot: (B, T) Σ w (y - ȳ)², the denominator of the weighted R².
        weight_sq_sum: (B,) Σw² (with Σw, Kish's effective sample size).
        raw: the uncentred moments ``(Σw x'xᵀ, Σw x'y', Σw x', Σw y', Σw y'²)`` of the shifted data
            x' = x - 1/2, y' = y - ``y_shift`` (for fits without a free intercept, e.g. KernelSHAP).
        y_shift: (B, T) the outputs of the unperturbed inputs (sample 0).
        n_samples: (B,) float64 number of samples accumulated per fit (lime's lasso-path stopping rule).
    """

    gram: torch.Tensor
    rhs: torch.Tensor
    x_mean: torch.Tensor
    y_mean: torch.Tensor
    weight_sum: torch.Tensor
    ss_tot: torch.Tensor
    weight_sq_sum: torch.Tensor
    raw: Optional[tuple] = None
    y_shift: Optional[torch.Tensor] = None
    n_samples: Optional[torch.Tensor] = None


class NormalAccumulator:
    """Weighted sufficient statistics, accumulated block by block of rows.

    Each block's products run in ``dtype`` (float32 by default, TF32 off) on
    shifted data (masks - 1/2, outputs - the input's own output ``y_shift``), so
    the sums stay well conditioned; the running sums are float64. Memory is
    O(B·F·(F + T)), whatever the number of samples.

    Args:
        batch, n_features, n_targets: B, F, T.
        y_shift: (B, T) a typical output per fit (the unperturbed input's).
        dtype: dtype of the per-block products.
    """

    def __init__(
        self, batch: int, n_features: int, n_targets: int, y_shift: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> None:
        dev = y_shift.device
        z = lambda *shape: torch.zeros(*shape, dtype=torch.float64, device=dev)  # noqa: E731
        self.dtype = dtype
        self.y_shift = y_shift.to(dtype)
        self.sw, self.sw2, self.sx, self.sy = z(batch), z(batch), z(batch, n_features), z(batch, n_targets)
        self.n = z(batch)
        self.sxx, self.sxy, self.syy = (
            z(batch, n_features, n_features),
            z(batch, n_features, n_targets),
            z(batch, n_targets),
        )

    def add(
        self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, start: int = 0, rows: Optional[torch.Tensor] = None
    ) -> None:
        """Add a block of rows to the fits ``start .. start + g - 1``, or to the fits ``rows``.

        Args:
            x: (g, r, F) masks (bool or float). y: (g, r, T) outputs. w: (g, r) weights.
            rows: optional long (g,) the fit of each of the g blocks (distinct).
        """
        g = torch.arange(start, start + x.shape[0], device=x.device) if rows is None else rows
        x = x.to(self.dtype) - 0.5
        y = y.to(self.dtype) - self.y_shift[g].unsqueeze(1)
        w = w.to(self.dtype)
        with exact_matmul():
            xw = x * w.unsqueeze(-1)
            self.sxx.index_add_(0, g, (xw.transpose(1, 2) @ x).double())
            self.sxy.index_add_(0, g, (xw.transpose(1, 2) @ y).double())
        self.sw.index_add_(0, g, w.sum(1).double())
        self.sw2.index_add_(0, g, (w * w).sum(1).double())
        self.n.index_add_(0, g, torch.full_like(g, x.shape[1], dtype=torch.float64))
        self.sx.index_add_(0, g, xw.sum(1).double())
        self.sy.index_add_(0, g, (w.unsqueeze(-1) * y).sum(1).double())
        self.syy.index_add_(0, g, (w.unsqueeze(-1) * y * y).sum(1).double())

    def normal(self) -> Normal:
        """The centred normal equations of everything added (float64)."""
        sw = self.sw.clamp_min(torch.finfo(torch.float64).tiny)
        xm, ym = self.sx / sw.unsqueeze(1), self.sy / sw.unsqueeze(1)
        gram = self.sxx - sw.view(-1, 1, 1) * xm.unsqueeze(2) * xm.unsqueeze(1)
        rhs = self.sxy - sw.view(-1, 1, 1) * xm.unsqueeze(2) * ym.unsqueeze(1)
        ss_tot = (self.syy - sw.unsqueeze(1) * ym * ym).clamp_min(0)
        return Normal(
            0.5 * (gram + gram.transpose(1, 2)),
            rhs,
            xm + 0.5,
            ym + self.y_shift.double(),
            self.sw,
            ss_tot,
            self.sw2,
            (self.sxx, self.sxy, self.sx, self.sy, self.syy),
            self.y_shift.double(),
            self.n,
        )


def normal_equations(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, dtype: torch.dtype = torch.float64) -> Normal:
    """The weighted centred normal equations of x (B, S, F), y (B, S, T), w (B, S), in one block."""
    acc = NormalAccumulator(x.shape[0], x.shape[2], y.shape[2], y[:, 0], dtype)
    acc.add(x, y, w)
    return acc.normal()


def finish(beta: torch.Tensor, ne: Normal) -> Fit:
    """Intercept, weighted R² and local prediction from coefficients beta (B, F, T), all from the
    normal equations (no samples needed): Σw(y - ŷ)² = ss_tot - 2βᵀ(XᵀWy) + βᵀ(XᵀWX)β."""
    intercept = ne.y_mean - (ne.x_mean.unsqueeze(1) @ beta).squeeze(1)  # (B, T)
    explained = (beta * ne.rhs).sum(1)
    quad = (beta * (ne.gram @ beta)).sum(1)
    ss_res = (ne.ss_tot - 2 * explained + quad).clamp_min(0)
    # sklearn's r2_score: a constant target scores 1 when predicted exactly, else 0
    score = torch.where(ne.ss_tot > 0, 1.0 - ss_res / ne.ss_tot.clamp_min(1e-300), (ss_res == 0).to(beta.dtype))
    local_pred = intercept + beta.sum(1)  # the row of all ones
    return Fit(beta.transpose(1, 2), intercept, score, local_pred)


def _pad_identity(gram: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Put 1 on the diagonal of padded features so their coefficient solves to 0."""
    return gram + torch.diag_embed((~valid).to(gram.dtype))


def solve_spd(gram: torch.Tensor, rhs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Solve (gram + αI) β = rhs for a batch; α = 0 uses the eigen pseudo-inverse (rank-safe).

    Args:
        gram: (..., F, F) symmetric PSD. rhs: (..., F, T).
    """
    if alpha > 0:
        eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
        chol, _ = torch.linalg.cholesky_ex(gram + alpha * eye)  # SPD by construction; no host sync
        return torch.cholesky_solve(rhs, chol)
    evals, evecs = torch.linalg.eigh(gram)
    tol = evals.amax(-1, keepdim=True).clamp_min(0) * gram.shape[-1] * torch.finfo(gram.dtype).eps
    inv = torch.where(evals > tol, 1.0 / evals.clamp_min(torch.finfo(gram.dtype).tiny), 0.0)
    return evecs @ (inv.unsqueeze(-1) * (evecs.transpose(-1, -2) @ rhs))


class Surrogate:
    """Base class: ``solve(normal, valid) -> beta (B, F, T)`` on the normal equations.

    ``dtype`` is the dtype of the per-block products while the statistics are
    accumulated and of the returned fit (the solve itself runs in float64).
    Every surrogate here needs only the weighted normal equations, O(B·F·(F + T))
    memory, never the samples themselves.
    """

    dtype: torch.dtype = torch.float32

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """Fit B·T weighted linear models from their normal equations.

        Args:
            ne: the normal equations. valid: bool (B, F).
            anchors: (B, 2, T) the outputs of samples 0 and 1 (the unperturbed input, and the
                sample a design may reserve, e.g. KernelSHAP's all-hidden coalition); most
                surrogates ignore them.
        """
        beta = self.solve(ne, valid) * valid.unsqueeze(-1).to(torch.float64)
        return Fit(*(None if t is None else t.to(self.dtype) for t in finish(beta, ne)))

    def fit(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor) -> Fit:
        """Fit B·T weighted linear models on samples held in memory.

        Args:
            x: (B, S, F) masks (bool or float). y: (B, S, T) outputs. w: (B, S) weights.
            valid: bool (B, F), features that exist for each input.

        Returns:
            ``Fit`` with coef (B, T, F), intercept (B, T), score (B, T), local_pred (B, T).
        """
        return self.fit_normal(normal_equations(x, y, w, self.dtype), valid)


@dataclass(frozen=True)
class Ridge(Surrogate):
    """Weighted ridge regression with an unpenalised intercept (lime: alpha=1).

    ``alpha=0`` gives ordinary weighted least squares via a rank-safe pseudo-inverse.
    """

    alpha: float = 1.0
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_float(self.alpha, "alpha", allow_zero=True)

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        return solve_spd(_pad_identity(ne.gram, valid), ne.rhs, self.alpha)


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
        gram: (B, F, F) normalised Gram (Xcᵀ W Xc / Σw). rhs: (B, F, T).
        lam: (B, 1, T) or broadcastable penalties. beta0: (B, F, T) warm start.
        max_iter: iteration cap. tol: stop when max |Δβ| < tol (checked every ``check_every``).
    """
    lip = torch.linalg.eigvalsh(gram)[..., -1].clamp_min(1e-12).view(-1, 1, 1)
    step = 1.0 / lip
    beta = beta0
    z = beta0
    t = torch.ones_like(lam.expand(beta.shape[0], 1, beta.shape[-1]))
    for it in range(max_iter):
        grad = gram @ z - rhs
        new = _soft(z - step * grad, step * lam)
        delta = new - beta
        t_new = 0.5 * (1 + torch.sqrt(1 + 4 * t * t))
        # restart momentum of the fits that went uphill (O'Donoghue & Candès gradient scheme)
        uphill = ((z - new) * delta).sum(1, keepdim=True) > 0
        t_new = torch.where(uphill, torch.ones_like(t_new), t_new)
        mom = torch.where(uphill, torch.zeros_like(t), (t - 1) / t_new)
        z = new + mom * delta
        beta, t = new, t_new
        if (it + 1) % check_every == 0 and bool(delta.abs().amax() < tol):
            break
    return beta


@dataclass(frozen=True)
class Lasso(Surrogate):
    """Weighted Lasso (sklearn's objective), solved by batched FISTA on the Gram matrix.

    captum's default is alpha=0.01 (on probabilities).
    """

    alpha: float = 0.01
    max_iter: int = 5000
    tol: float = 1e-7
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_float(self.alpha, "alpha", allow_zero=True)
        check_positive_int(self.max_iter, "max_iter")

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        sw = ne.weight_sum.view(-1, 1, 1)
        gram = ne.gram / sw
        rhs = ne.rhs / sw
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
    """

    k: int = 10
    refit_alpha: float = 0.0
    n_lambdas: int = 40
    eps: float = 1e-4
    iters_per_lambda: int = 200
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_int(self.k, "k")
        check_positive_float(self.refit_alpha, "refit_alpha", allow_zero=True)
        check_positive_int(self.n_lambdas, "n_lambdas", minimum=2)

    def select(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Bool (B, F, T): the chosen support of every fit."""
        sw = ne.weight_sum.view(-1, 1, 1)
        gram = ne.gram / sw
        rhs = ne.rhs / sw
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
        chosen = self.select(ne, valid)  # (B, F, T)
        sel = chosen.transpose(1, 2).to(ne.gram.dtype)  # (B, T, F)
        gram = ne.gram.unsqueeze(1) * sel.unsqueeze(-1) * sel.unsqueeze(-2)
        gram = gram + torch.diag_embed(1.0 - sel)
        rhs = (ne.rhs.transpose(1, 2) * sel).unsqueeze(-1)  # (B, T, F, 1)
        beta = solve_spd(gram, rhs, self.refit_alpha).squeeze(-1) * sel  # (B, T, F)
        return beta.transpose(1, 2)
