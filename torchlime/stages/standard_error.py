"""Stage 6, the uncertainty of a fit: a standard error on every coefficient, from the normal equations.

One formula for the normal-equation surrogates (``Explanation.coef_se``, and ``n_samples="auto"``'s
tests, ``methods.adaptive``): with G the centred weighted Gram matrix Xcᵀ W Xc, α the ridge penalty
(0: least squares, a rank-safe pseudo-inverse), the residual sum of squares ``ss_res = Σw (y - ŷ)²``
(from the normal equations: no samples are needed) and Kish's effective sample size
``n_eff = (Σw)² / Σw²``,

    Var(β) = σ² (G + αI)⁻¹ G (G + αI)⁻¹,   σ² = ss_res / (n_eff - F_b - 1),

the weighted sandwich with one noise level per fit (σ² G stands for Σ w² σ² x xᵀ, which holds when the
weights do not depend on the residuals' size). A ridge fit is also shrunk towards 0 by α (G + αI)⁻¹ β
against the unpenalised fit that many samples give, so ``Explanation.coef_se`` adds that shrinkage in
quadrature (a root mean squared error about the large-N answer; 0 at α = 0): ``se_j = sqrt(Var(β)_jj
+ (α [(G + αI)⁻¹ β]_j)²)``, (B, T, F); padded features get 0. Without the shrinkage term, 95 % intervals
of the default fit (α = 1, N = 1000) covered the N = 16384 answer 88 % of the time on a random MLP of
16 features; with it, 94-97 % from N = 250 to 2000 (``tests/stages/test_standard_error.py`` holds
90-98 % with independent masks). The estimator assumes independent samples: the default factorial
masks err far less (their intervals would hold the answer 99-100 % of the time), so a designed call scales
these standard errors to its own error, read from nested prefixes of its samples (``stages.design_error``,
method "design").

KernelSHAP's constrained regression (``kernel_shap_se``) uses the same estimator on the subspace its
efficiency constraint leaves free: ``Var(φ) = σ² (P Gu P)⁺``, Gu the uncentred Gram matrix of u = z - 1
and P the projector orthogonal to 1 over the input's features, with F_b - 1 free coefficients. The
lasso and K-lasso have no closed form: ``bootstrap_se`` resamples their kept samples. ``CoefSE`` is the
record an explanation keeps: the value, or what computes it on first access (the call adds no operator).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional, Protocol, Union

import torch

from torchlime.stages.normal import Fit, Normal, normal_equations, pad_identity


def effective_size(normal: Normal) -> torch.Tensor:
    """Float64 (B,): Kish's effective sample size ``(Σw)² / Σw²`` of every input's weights.

    Args:
        normal: the normal equations, weight_sum and weight_sq_sum (B,).
    """
    return normal.weight_sum.double() ** 2 / normal.weight_sq_sum.double().clamp_min(1e-300)


def residual_ss(normal: Normal, coef: torch.Tensor) -> torch.Tensor:
    """Float64 (B, T): ``Σw (y - ŷ)²`` of coefficients fitted with a free intercept (``normal.finish``).

    Args:
        normal: the normal equations, gram (B, F, F), rhs (B, F, T), ss_tot (B, T).
        coef: (B, T, F) the coefficients.
    """
    beta = coef.double().transpose(1, 2)  # (B, F, T)
    explained = (beta * normal.rhs).sum(1)
    quad = (beta * (normal.gram @ beta)).sum(1)
    return (normal.ss_tot - 2 * explained + quad).clamp_min(0)


def _noise(ss_res: torch.Tensor, n_eff: torch.Tensor, n_free: torch.Tensor) -> torch.Tensor:
    """σ² (B, T) of ss_res (B, T) with n_free (B,) free coefficients: ss_res / (n_eff - n_free), dof >= 1."""
    dof = (n_eff - n_free.double()).clamp_min(1.0)
    return ss_res.double() / dof.unsqueeze(1)


def ridge_se(
    normal: Normal, ss_res: torch.Tensor, valid: torch.Tensor, alpha: float, coef: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Float64 (B, T, F): the standard errors of ridge (α > 0) or least-squares (α = 0) coefficients.

    ``se_j² = σ² [(G + αI)⁻¹ G (G + αI)⁻¹]_jj`` with ``σ² = ss_res / (n_eff - F_b - 1)`` (module
    docstring); from one eigendecomposition G = V Λ Vᵀ: ``Σ_k V_jk² λ_k / (λ_k + α)²`` (at α = 0 the
    pseudo-inverse's 1 / λ_k, eigenvalues below F·eps·λ_max dropped). With ``coef``, plus the squared
    shrinkage ``(α [(G + αI)⁻¹ β]_j)²``.

    Args:
        normal: the normal equations, gram (B, F, F) and the weight sums (B,).
        ss_res: (B, T) the residual sums of squares of the fits.
        valid: bool (B, F) the features that exist for each input.
        alpha: the ridge penalty α >= 0.
        coef: (B, T, F) the ridge coefficients β, to add their shrinkage; None: the variance alone.

    Returns:
        (B, T, F) the standard errors, 0 on padded features.

    Example:
        >>> x = torch.tensor([[[0.0], [1.0], [0.0], [1.0]]])
        >>> y, w = torch.tensor([[[0.0], [1.0], [0.2], [0.8]]]), torch.ones(1, 4)
        >>> from torchlime.stages.normal import normal_equations
        >>> ne = normal_equations(x, y, w)
        >>> se = ridge_se(ne, torch.tensor([[0.04]], dtype=torch.float64), torch.ones(1, 1, dtype=torch.bool), 0.0)
        >>> round(float(se), 4)  # sqrt(0.04 / 2 / 1): σ² = 0.04 / (4 - 2), G = 1
        0.1414
    """
    gram = pad_identity(normal.gram.double(), valid)
    evals: torch.Tensor
    evecs: torch.Tensor
    evals, evecs = torch.linalg.eigh(gram)  # torch.linalg is untyped
    tol = evals.amax(-1, keepdim=True).clamp_min(0) * gram.shape[-1] * torch.finfo(gram.dtype).eps
    lam = evals.clamp_min(0)
    shrink = torch.where(evals > tol, lam / (lam + alpha).clamp_min(torch.finfo(gram.dtype).tiny) ** 2, 0.0)
    diag = (evecs * evecs * shrink.unsqueeze(-2)).sum(-1)  # (B, F): Σ_k V_jk² s_k
    sigma2 = _noise(ss_res, effective_size(normal), valid.sum(1) + 1)  # (B, T)
    var = sigma2.unsqueeze(2) * diag.unsqueeze(1)  # (B, T, F)
    if coef is not None and alpha > 0:
        inv = torch.where(evals > tol, 1.0 / (lam + alpha), 0.0)  # (G + αI)⁻¹ on G's range
        along = evecs.transpose(1, 2) @ coef.double().transpose(1, 2)  # (B, F, T): Vᵀβ
        shrink_t = alpha * (evecs @ (inv.unsqueeze(-1) * along))  # (B, F, T)
        var = var + shrink_t.transpose(1, 2) ** 2
    return var.sqrt() * valid.unsqueeze(1)


def constrained_eigen(normal: Normal, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The eigenvectors (B, F, F) and pseudo-inverted eigenvalues (B, F) of KernelSHAP's ``P Gu P``.

    Gu = Σ w u uᵀ (u = z - 1) from the uncentred moments ``normal.raw``, P the projector orthogonal to 1 over
    the input's features; eigenvalues at rounding level invert to 0, so ``V diag(inv) Vᵀ = (P Gu P)⁺``.

    Args:
        normal: the normal equations, with the uncentred moments ``raw`` (not None).
        valid: bool (B, F) the features that exist for each input.
    """
    if normal.raw is None:
        raise ValueError("`normal` must hold the uncentred moments `raw` (KernelSHAP's fit keeps them), got None")
    f = valid.shape[1]
    sxx, _, sx, _, _ = normal.raw  # of x' = z - 1/2
    sw, one = normal.weight_sum.double(), valid.double()
    guu = sxx - 0.5 * (sx.unsqueeze(2) + sx.unsqueeze(1)) + 0.25 * sw.view(-1, 1, 1)  # Σ w u uᵀ, u = x' - 1/2
    nf = one.sum(1).clamp_min(1)
    proj = torch.diag_embed(one) - one.unsqueeze(2) * one.unsqueeze(1) / nf.view(-1, 1, 1)
    pgp = proj @ (guu * one.unsqueeze(2) * one.unsqueeze(1)) @ proj
    evals: torch.Tensor
    evecs: torch.Tensor
    evals, evecs = torch.linalg.eigh(0.5 * (pgp + pgp.transpose(1, 2)))  # torch.linalg is untyped
    tol = evals.amax(-1, keepdim=True).clamp_min(0) * f * torch.finfo(torch.float64).eps
    return evecs, torch.where(evals > tol, 1.0 / evals.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


def kernel_shap_se(normal: Normal, score: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Float64 (B, T, F): the standard errors of KernelSHAP's constrained regression.

    ``Var(φ) = σ² (P Gu P)⁺`` with ``σ² = ss_res / (n_eff - (F_b - 1))`` and ``ss_res = (1 - score) ·
    ss_tot`` (the regression's own weighted R², which is relative to ``ss_tot``); Gu = Σ w u uᵀ, u = z - 1,
    from the uncentred moments ``normal.raw`` (module docstring). An input whose coalitions were all
    enumerated has no sampling error at all; the formula still reports the model-based one.

    Args:
        normal: the normal equations, with the uncentred moments ``raw``.
        score: (B, T) the regression's weighted R².
        valid: bool (B, F) the features that exist for each input.

    Returns:
        (B, T, F) the standard errors, 0 on padded features; NaN without ``normal.raw``.
    """
    b, f = valid.shape
    if normal.raw is None:
        return torch.full((b, score.shape[1], f), float("nan"), dtype=torch.float64, device=valid.device)
    evecs, inv = constrained_eigen(normal, valid)
    diag = (evecs * evecs * inv.unsqueeze(-2)).sum(-1)  # (B, F): [(P Gu P)⁺]_jj
    ss_res = (1.0 - score.double()).clamp_min(0) * normal.ss_tot
    sigma2 = _noise(ss_res, effective_size(normal), valid.sum(1) - 1)
    return (sigma2.unsqueeze(2) * diag.unsqueeze(1)).sqrt() * valid.unsqueeze(1)


@dataclass(eq=False)
class CoefSE:
    """The record of ``Explanation.coef_se``: how it is computed, and its value or what computes it.

    ``get`` computes a pending value once (the first access) and keeps it; ``select`` and ``to`` stay
    lazy. ``method`` names the estimator: "sandwich" (ridge and least squares), "design" (the sandwich scaled
    to a designed call's own error, ``stages.design_error``), "kernel_shap" (independent draws), "pairs"
    (KernelSHAP's paired designs, ``methods.shap_error``),
    "bootstrap" (lasso, K-lasso), "posterior" (Bayesian surrogates), "stored" (read from a file).

    Attributes:
        method: the estimator's name.
        value: (B, T, F) the standard errors once known, else None.
        compute: what computes them (None once computed, or when nothing can).
    """

    method: str
    value: Optional[torch.Tensor] = None
    compute: Optional[Callable[[], Optional[torch.Tensor]]] = field(default=None, repr=False)

    def get(self) -> Optional[torch.Tensor]:
        """(B, T, F) the standard errors (computed now if pending), or None where none can be computed."""
        if self.value is None and self.compute is not None:
            self.value, self.compute = self.compute(), None
        return self.value

    def __getstate__(self) -> dict[str, object]:
        """The state pickled and deep-copied: the value, a pending one computed first (what computes it stays)."""
        return {"method": self.method, "value": self.get(), "compute": None}

    def select(self, start: int, stop: int) -> CoefSE:
        """The record of inputs ``start .. stop - 1`` (lazy while this one is).

        Args:
            start: the first input.
            stop: one past the last.
        """
        if self.value is not None or self.compute is None:
            return CoefSE(self.method, None if self.value is None else self.value[start:stop])
        return CoefSE(self.method, compute=lambda: _sliced(self.get(), start, stop))

    def to(self, device: Union[str, torch.device]) -> CoefSE:
        """The record with its value on ``device`` (lazy while this one is).

        Args:
            device: where the tensor goes.
        """
        if self.value is not None or self.compute is None:
            return CoefSE(self.method, None if self.value is None else self.value.to(device))
        return CoefSE(self.method, compute=lambda: _moved(self.get(), device))


def _sliced(value: Optional[torch.Tensor], start: int, stop: int) -> Optional[torch.Tensor]:
    return None if value is None else value[start:stop]


def _moved(value: Optional[torch.Tensor], device: Union[str, torch.device]) -> Optional[torch.Tensor]:
    return None if value is None else value.to(device)


#: the bootstrap's replicates
N_BOOT = 200
_BOOT_ELEMENTS = 1 << 24  # bound on the resampled mask elements held at once (replicates x B x S x F)


def bootstrap_se(
    solve: Callable[[Normal, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    w: torch.Tensor,
    valid: torch.Tensor,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> torch.Tensor:
    """Float64 (B, T, F): the bootstrap standard errors of a surrogate, from its kept samples.

    Each replicate draws S rows of every input with replacement (a seeded CPU generator: the same
    draws on every device), accumulates their normal equations and solves them; ``n_boot``
    replicates, as many solved as one batch as hold 2^24 resampled mask elements. The standard error is the replicates'
    standard deviation (unbiased). Used for the lasso and K-lasso, whose coefficients have no closed
    form; its calibration is measured (``benchmarks/bench_adaptive_se.py``), not promised.

    Args:
        solve: the surrogate's ``solve(normal, valid) -> (B', F, T)``.
        x: bool (B, S, F) the masks.
        y: (B, S, T) the outputs.
        w: (B, S) the weights.
        valid: bool (B, F) the features that exist for each input.
        n_boot: the replicates (>= 2).
        seed: the generator's seed.

    Returns:
        (B, T, F) the standard errors, 0 on padded features.
    """
    b, s, f = x.shape
    gen = torch.Generator().manual_seed(seed)
    betas = []
    block = max(1, _BOOT_ELEMENTS // max(1, b * s * f))
    for r0 in range(0, n_boot, block):
        r = min(block, n_boot - r0)
        rows = torch.randint(s, (r * b, s), generator=gen).to(x.device)  # (r·B, S): replicate-major
        fit_of = torch.arange(b, device=x.device).repeat(r)  # the input of each replicate's fit
        xr, yr, wr = x[fit_of.unsqueeze(1), rows], y[fit_of.unsqueeze(1), rows], w[fit_of.unsqueeze(1), rows]
        ne = normal_equations(xr, yr, wr, torch.float64)
        betas.append(solve(ne, valid.repeat(r, 1)).view(r, b, f, -1))
    beta = torch.cat(betas).double() * valid.view(1, b, f, 1)
    return beta.std(0, correction=1).transpose(1, 2)


class Estimates(Protocol):
    """What ``se_record`` reads of a surrogate (``stages.surrogate.Surrogate``)."""

    @property
    def se_method(self) -> str:
        """The estimator's name (``CoefSE.method``)."""
        ...

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Float64 (B, F, T) coefficients of normal equations (gram (B, F, F), rhs (B, F, T))."""
        ...

    def coef_se(self, ne: Normal, fit: Fit, valid: torch.Tensor) -> Optional[torch.Tensor]:
        """Float64 (B, T, F) standard errors of a fit, coef (B, T, F), or None."""
        ...


class DesignError(NamedTuple):
    """What a designed call's ``coef_se`` is: an estimator's standard errors turned into the design's own.

    Attributes:
        of: the surrogate's estimator it applies to ("sandwich", "kernel_shap").
        method: the record's method then ("design", "pairs").
        apply: (B, T, F) the estimator's standard errors -> (B, T, F) the design's.
    """

    of: str
    method: str
    apply: Callable[[torch.Tensor], torch.Tensor]


def se_record(
    surrogate: Estimates,
    normal: object,
    fit: Fit,
    valid: torch.Tensor,
    kept: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None,
    design: Optional[DesignError] = None,
) -> Optional[CoefSE]:
    """``Explanation.coef_se_record``: the standard errors of a fit, pending until first read.

    Nothing is computed here (the call adds no operator): the record keeps the normal equations (without
    their uncentred moments, which only KernelSHAP's estimator reads) or, for the bootstrap, the kept
    samples. None: a Bayesian surrogate (its ``coef_std`` is the record), a sample-space fit, or a
    surrogate with no estimator.

    Args:
        surrogate: the fitted surrogate.
        normal: its normal equations, gram (B, F, F) (``Normal``; a sample-space fit's ``Design``: None).
        fit: the fit, coef (B, T, F).
        valid: bool (B, F) the features that exist.
        kept: the kept masks (B, S, F), outputs (B, S, T) and weights (B, S), or None.
        design: for a designed call, what turns the surrogate's standard errors (B, T, F) into the design's
            own (``engine.design_se``), and the record's method then; it applies to the estimator it names.
    """
    method = surrogate.se_method
    if fit.coef_std is not None or not isinstance(normal, Normal) or method == "none":
        return None
    dtype = fit.coef.dtype
    if method == "bootstrap":
        if kept is None:
            return CoefSE(method)  # no samples to resample: coef_se None
        x, y, w = kept
        return CoefSE(method, compute=lambda: bootstrap_se(surrogate.solve, x, y, w, valid).to(dtype))
    ne = normal if method == "kernel_shap" else normal._replace(raw=None)

    designed = design if design is not None and design.of == method else None

    def compute() -> Optional[torch.Tensor]:
        se = surrogate.coef_se(ne, fit, valid)
        if se is not None and designed is not None:
            se = designed.apply(se)
        return None if se is None else se.to(dtype)

    return CoefSE(method if designed is None else designed.method, compute=compute)
