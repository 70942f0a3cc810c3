"""Stage 6, the data of the fits: weighted normal equations accumulated in blocks, and their solve.

``NormalAccumulator`` sums the weighted, centred normal equations (``Normal``) of B·T fits block by
block of rows, in float64 running sums (memory O(B·F·(F + T)), whatever the number of samples);
``solve_spd`` solves them (a batched Cholesky, or a rank-safe eigen pseudo-inverse) and ``finish``
turns coefficients into a ``Fit`` (intercept, weighted R², local prediction) without the samples.
``torch.linalg.lstsq`` is never used: on CUDA it silently assumes full rank.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, NamedTuple, Optional, Protocol

import torch

from torchlime import _backend
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, constant, tensor_key

#: the uncentred moments ``(Σw x'xᵀ, Σw x'y', Σw x', Σw y', Σw y'²)``: (B, F, F), (B, F, T), (B, F), (B, T), (B, T)
RawMoments = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
#: ``alpha * I`` of the ridge solves, made once per size, dtype, device and alpha (``stages.fixed_cost``)
_RIDGES: ShapeCache[torch.Tensor] = ShapeCache()
#: the unit diagonal of padded features (``pad_identity``), by ``valid`` tensor
_PADS: ShapeCache[torch.Tensor] = ShapeCache()
#: ``torch.promote_types``, remembered per pair (each call of it is one dispatched operator)
_promote: Callable[[torch.dtype, torch.dtype], torch.dtype] = functools.lru_cache(maxsize=None)(torch.promote_types)


class Fit(NamedTuple):
    """Result of a batched surrogate fit (all tensors in the fit dtype).

    Attributes:
        coef: (B, T, F) coefficients.
        intercept: (B, T) intercepts.
        score: (B, T) weighted R².
        local_pred: (B, T) the fit at the all-ones row (the unperturbed input).
        coef_std: (B, T, F) posterior standard deviation (Bayesian surrogates), else None.
    """

    coef: torch.Tensor
    intercept: torch.Tensor
    score: torch.Tensor
    local_pred: torch.Tensor
    coef_std: Optional[torch.Tensor] = None


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
        gram: (B, F, F) Xcᵀ W Xc.
        rhs: (B, F, T) Xcᵀ W yc.
        x_mean: (B, F) weighted mean of the masks.
        y_mean: (B, T) weighted mean of the outputs.
        weight_sum: (B,) Σw.
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
    raw: Optional[RawMoments] = None
    y_shift: Optional[torch.Tensor] = None
    n_samples: Optional[torch.Tensor] = None


class NormalAccumulator:
    """Weighted sufficient statistics, accumulated block by block of rows.

    Each block's products run in ``dtype`` (float32 by default, TF32 off) on
    shifted data (masks - 1/2, outputs - the input's own output ``y_shift``), so
    the sums stay well conditioned; the running sums are float64. Memory is
    O(B·F·(F + T)), whatever the number of samples.

    Args:
        batch: B, the number of inputs.
        n_features: F, the number of features.
        n_targets: T, the number of targets per input.
        y_shift: (B, T) a typical output per fit (the unperturbed input's).
        dtype: dtype of the per-block products.
    """

    def __init__(
        self, batch: int, n_features: int, n_targets: int, y_shift: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> None:
        dev = y_shift.device
        self.dtype = dtype
        self.y_shift = y_shift.to(_promote(y_shift.dtype, dtype))  # float64 outputs shift exactly
        # every running sum is a view of ONE float64 buffer (one allocation), one row per fit: the per-fit
        # sums (Σw, Σw², n, Σwx', Σwy', Σwy'²) side by side in its first columns, then Σwx'x'ᵀ and Σwx'y'
        # side by side as (F, F + T), so that a block adds all of them with one operator; it is filled with
        # zeros only if needed: the first block of every fit is written into it instead (``add``)
        self.f, self.t = n_features, n_targets
        width = 3 + n_features + 2 * n_targets + n_features * (n_features + n_targets)
        self.set_sums(torch.empty(batch, width, dtype=torch.float64, device=dev))
        self._written = False

    def set_sums(self, sums: torch.Tensor) -> None:
        """Make ``sums`` the running sums, each named sum (``sw``, ``sx``, ``sxx``, ...) a view of it.

        Args:
            sums: float64 (B, 3 + F + 2T + F(F + T)), one row per fit, in the layout ``__init__`` makes.
        """
        f, t = self.f, self.t
        self.sums, self._stats = sums, sums[:, : 3 + f + 2 * t]
        self._pairs = sums[:, 3 + f + 2 * t :].view(sums.shape[0], f, f + t)
        self.sw, self.sw2, self.n = self._stats[:, 0], self._stats[:, 1], self._stats[:, 2]
        self.sx, self.sy, self.syy = (
            self._stats[:, 3 : 3 + f],
            self._stats[:, 3 + f : 3 + f + t],
            self._stats[:, 3 + f + t :],
        )
        self.sxx, self.sxy = self._pairs[:, :, :f], self._pairs[:, :, f:]
        self._written = True

    def _zeros(self) -> None:
        """Fill the running sums with zeros, unless a block was written into them already."""
        if not self._written:
            self.sums.zero_()
            self._written = True

    def add(
        self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, start: int = 0, rows: Optional[torch.Tensor] = None
    ) -> None:
        """Add a block of rows to the fits ``start .. start + g - 1``, or to the fits ``rows``.

        Args:
            x: (g, r, F) masks (bool or float).
            y: (g, r, T) outputs.
            w: (g, r) weights.
            start: the first fit, when ``rows`` is None.
            rows: optional long (g,) the fit of each of the g blocks (distinct).
        """
        g, r = x.shape[0], x.shape[1]
        if x.dtype == torch.bool:  # x - 1/2 of a mask: ±1/2 (exactly 1 - 0.5 and 0 - 0.5), one operator
            x = torch.where(x, constant(0.5, self.dtype, x.device), constant(-0.5, self.dtype, x.device))
        else:
            x = x.to(self.dtype) - 0.5
        shift = self.y_shift[start : start + g] if rows is None else self.y_shift[rows]  # a slice: no operator
        y = (y.to(self.y_shift.dtype) - shift.unsqueeze(1)).to(self.dtype)
        w = w.to(self.dtype)
        with exact_matmul():
            xw = x * w.unsqueeze(-1)
            products = torch.cat((xw.transpose(1, 2) @ x, xw.transpose(1, 2) @ y), 2)  # (g, F, F + T)
        wy = w.unsqueeze(-1) * y
        exact = r <= 2 / torch.finfo(self.dtype).eps  # r is a number of the block's dtype (float32: up to 2²⁴)
        count = constant(float(r) if exact else 0.0, self.dtype, x.device).expand(g, 1)  # n (a view: no operator)
        sums = (w.sum(1, keepdim=True), (w * w).sum(1, keepdim=True), count, xw.sum(1), wy.sum(1), (wy * y).sum(1))
        parts = (*sums, products.view(g, -1))
        if rows is None and start == 0 and g == self.sums.shape[0] and not self._written and exact:
            # the first block of every fit: its sums written (cast to float64 by the concatenation) where adding
            # them to zeros would give the same values (0 + v is v; a sum over rows that hold sample 0, whose
            # terms are +0 or more, is never -0)
            torch.cat(parts, 1, out=self.sums)
            self._written = True
            return
        self._zeros()
        # each sum cast as it was made (by the concatenation into float64), then added: the same bits as
        # adding them one by one, in one operator
        block = torch.cat(parts, 1, out=torch.empty(g, self.sums.shape[1], dtype=torch.float64, device=x.device))
        if rows is None:
            self.sums[start : start + g].add_(block)  # in place on the view (``+=`` would also copy it back)
        else:
            self.sums.index_add_(0, rows, block)
        if not exact:
            self.n.index_add_(
                0, torch.arange(start, start + g, device=x.device) if rows is None else rows, block[:, 2] + r
            )

    def normal(self) -> Normal:
        """The centred normal equations of everything added (float64).

        Returns:
            ``Normal`` with gram (B, F, F), rhs (B, F, T) and the moments of the fits.
        """
        self._zeros()  # nothing added: zero sums
        gram, rhs, x_mean, y_mean, ss_tot, shift = _backend.normal_centre(self.sums, self.y_shift, self.f, self.t)
        return Normal(
            gram,
            rhs,
            x_mean,
            y_mean,
            self.sw,
            ss_tot,
            self.sw2,
            (self.sxx, self.sxy, self.sx, self.sy, self.syy),
            shift,
            self.n,
        )


def normal_equations(x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, dtype: torch.dtype = torch.float64) -> Normal:
    """The weighted centred normal equations of samples held in memory, in one block.

    Args:
        x: (B, S, F) masks (bool or float).
        y: (B, S, T) outputs.
        w: (B, S) weights.
        dtype: dtype of the products.

    Returns:
        ``Normal`` (float64) with gram (B, F, F) and rhs (B, F, T).
    """
    acc = NormalAccumulator(x.shape[0], x.shape[2], y.shape[2], y[:, 0], dtype)
    acc.add(x, y, w)
    return acc.normal()


def finish(
    beta: torch.Tensor, ne: Normal, valid: Optional[torch.Tensor] = None, dtype: Optional[torch.dtype] = None
) -> Fit:
    """Intercept, weighted R² and local prediction of coefficients, all from the normal equations.

    No samples are needed: Σw(y - ŷ)² = ss_tot - 2βᵀ(XᵀWy) + βᵀ(XᵀWX)β. One kernel door
    (``_backend.fit_summary``, ``kernels.reference_fit.summary_torch``: one launch on CUDA).

    Args:
        beta: float64 (B, F, T) coefficients.
        ne: the normal equations they were solved from.
        valid: bool (B, F) the features that exist (the others' coefficients become 0), or None (all).
        dtype: the dtype of the fit (None: float64).

    Returns:
        ``Fit`` with coef (B, T, F), intercept, score and local_pred (B, T).
    """
    return Fit(*_backend.fit_summary(beta, valid, (ne.gram, ne.rhs, ne.x_mean, ne.y_mean, ne.ss_tot), dtype))


class Spread(Protocol):
    """What the quality checks read of a fit's data (``Normal``, or a sample-space ``Design``)."""

    @property
    def ss_tot(self) -> torch.Tensor:
        """(B, T) Σ w (y - ȳ)²."""

    @property
    def weight_sum(self) -> torch.Tensor:
        """(B,) Σw."""

    @property
    def weight_sq_sum(self) -> torch.Tensor:
        """(B,) Σw²."""


def quality_flags(
    ne: Spread, score: torch.Tensor, n_features: torch.Tensor, thresholds: tuple[float, float, float]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The quality checks of fits (``engine.quality.assess``): one kernel door (``_backend.quality_flags``).

    Args:
        ne: the fits' data (their normal equations, or a sample-space design).
        score: (B, T) their weighted R².
        n_features: long (B,) F_b.
        thresholds: ``(min_std, min_r2, min_kish)``, see ``kernels.reference_fit.flags_torch``.

    Returns:
        Bool ``(saturated (B, T), poor_fit (B, T), few_samples (B,))``.
    """
    return _backend.quality_flags(ne.ss_tot, ne.weight_sum, ne.weight_sq_sum, score, n_features, thresholds)


def pad_identity(gram: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Put 1 on the diagonal of padded features so their coefficient solves to 0.

    Args:
        gram: (B, F, F) Gram matrices.
        valid: bool (B, F) the features that exist.

    Returns:
        (B, F, F) the padded Gram matrices.
    """
    one, zero = constant(1.0, gram.dtype, gram.device), constant(0.0, gram.dtype, gram.device)

    def make() -> torch.Tensor:
        return torch.diag_embed(torch.where(valid, zero, one))  # (~valid) as 1.0 / 0.0 in one operator

    # made once per ``valid`` tensor (a map passed again keeps its own: ``FeatureMap.valid``)
    known_as = tensor_key(valid)
    small = gram.numel() <= CACHED_ELEMENTS
    pad = make() if known_as is None or not small else _PADS.get(valid, (known_as, gram.dtype, str(gram.device)), make)
    return gram + pad


def solve_spd(gram: torch.Tensor, rhs: torch.Tensor, alpha: float) -> torch.Tensor:
    """Solve (gram + αI) β = rhs for a batch; α = 0 uses the eigen pseudo-inverse (rank-safe).

    Args:
        gram: (..., F, F) symmetric PSD.
        rhs: (..., F, T) right-hand sides.
        alpha: the ridge penalty α >= 0.

    Returns:
        (..., F, T) the solutions β.
    """
    if alpha > 0:
        f, dtype, dev = gram.shape[-1], gram.dtype, gram.device
        ridge = _RIDGES.get(None, (f, dtype, str(dev), alpha), lambda: alpha * torch.eye(f, dtype=dtype, device=dev))
        chol, _ = torch.linalg.cholesky_ex(gram + ridge)  # SPD by construction; no host sync
        return torch.cholesky_solve(rhs, chol)
    evals: torch.Tensor
    evecs: torch.Tensor
    evals, evecs = torch.linalg.eigh(gram)  # torch.linalg is untyped
    tol = evals.amax(-1, keepdim=True).clamp_min(0) * gram.shape[-1] * torch.finfo(gram.dtype).eps
    inv = torch.where(evals > tol, 1.0 / evals.clamp_min(torch.finfo(gram.dtype).tiny), 0.0)
    return evecs @ (inv.unsqueeze(-1) * (evecs.transpose(-1, -2) @ rhs))
