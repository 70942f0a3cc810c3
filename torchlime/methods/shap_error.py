"""KernelSHAP's standard errors under its paired designs: the stratified variance of the pairs' scores.

The paired designs (``shap_designs``: "leverage", "paired") draw p_t of the N_t pairs {z, 1 - z} of each
class t without replacement, and weigh each row by the Shapley kernel over its inclusion probability. The
constrained fit (``kernel_shap.KernelShapRegression``) sets the weighted score Σ_s w_s u_s e_s to zero on
the subspace orthogonal to 1 (u = z - 1, e the residual ``y - intercept - z . φ``), so to first order

    φ̂ - φ = Σ_q h_q,   h_q = M (w u e)_{row 2 + 2q} + M (w u e)_{row 3 + 2q},   M = (P Gu P)⁺,

a sum of one term per pair. The pairs of a class are a sample without replacement from the class (strata:
the classes), so the variance of that sum is estimated per class, with the finite-population correction:

    Var(φ̂_j) = Σ_t (1 - p_t / N_t) p_t / (p_t - 1) Σ_{q in t} (h_qj - mean_{q in t} h_qj)²,

scaled by (t_ν(0.975) / 1.96)², ν Satterthwaite's degrees of freedom of that sum (class t: p_t - 1), so that
``coef ± 1.96 coef_se`` is the t interval (a class of about five pairs reads its spread roughly).

Treating the rows as independent draws (``standard_error.kernel_shap_se``) ignores the pairing, the classes
and the correction, and overstated the spread of repeated fits 3-14x on random MLPs of 8-16 features; this
estimate was 0.90-1.21x of it, and its 95 % intervals held the exact Shapley values 91-96 % of the time. An
input whose coalitions were enumerated has no sampling error, and a class drawn whole adds none: what is
left there is the fit's arithmetic, added in quadrature (``ROUNDING``; without it, the intervals of float32 fits
of gradient-boosting games missed errors of a few eps). An input with a class of a single pair out of several
has no spread to read there and keeps the independent-draws estimate.
"""

from __future__ import annotations

import torch

from torchlime.methods.shap_designs import ShapDesign, plan
from torchlime.stages.design_error import Z95, t_quantile

_ELEMENTS = 1 << 24  # (inputs x pairs x targets x features) per step of ``PairVariance.add``
#: the fit's arithmetic, in units of its dtype's eps times ||φ||: the errors of float32 fits whose sampling error
#: is nil (classes drawn whole) reached 6.4 of them on the gradient-boosting games of bench_kernel_shap_designs
ROUNDING = 4.0


class PairVariance:
    """Running per-class sums of a paired design's terms h_q, and the standard errors they give.

    Args:
        coef: (B, T, F) the fit's Shapley values.
        intercept: (B, T) its intercepts f(baseline).
        evecs: (B, F, F) and ``inv`` (B, F): ``(P Gu P)⁺`` as ``V diag(inv) Vᵀ``
            (``standard_error.constrained_eigen``).
        valid: bool (B, F) the features that exist.
        n_samples: S, the call's samples per input.
        design: "leverage" or "paired".
    """

    def __init__(
        self,
        coef: torch.Tensor,
        intercept: torch.Tensor,
        evecs: torch.Tensor,
        inv: torch.Tensor,
        valid: torch.Tensor,
        n_samples: int,
        design: ShapDesign,
    ) -> None:
        b, t, f = coef.shape
        self.eps = torch.finfo(coef.dtype).eps
        self.coef, self.intercept, self.valid = coef.double(), intercept.double(), valid
        self.inverse = (evecs * inv.unsqueeze(-2)) @ evecs.transpose(1, 2)  # (B, F, F)
        self.nf = valid.sum(1)
        sizes, counts = plan(f, n_samples, design, valid.device)
        self.sizes, self.counts = sizes[self.nf], counts[self.nf].double()  # (B, K)
        self.sampled = self.nf.double().exp2() > n_samples  # (B,) the others were enumerated
        k = self.sizes.shape[1]
        self.sums = torch.zeros(b, k, t, f, dtype=torch.float64, device=valid.device)
        self.squares = torch.zeros_like(self.sums)

    def add(self, masks: torch.Tensor, weights: torch.Tensor, scores: torch.Tensor) -> None:
        """Add rows of whole pairs (row 2i and 2i + 1 of the block: a pair).

        Args:
            masks: bool (B, 2p, F) the rows' coalitions.
            weights: (B, 2p) their regression weights.
            scores: (B, 2p, T) their scores.
        """
        b, r, f = masks.shape
        z = masks.double() * self.valid.unsqueeze(1)
        kept = z[:, 0::2].sum(-1)  # (B, p): the first row of each pair
        cls = torch.minimum(kept, self.nf.unsqueeze(1) - kept).long() - 1
        onehot = torch.nn.functional.one_hot(cls.clamp(0, max(self.sums.shape[1] - 1, 0)), self.sums.shape[1])
        onehot = onehot.double() * (cls >= 0).unsqueeze(-1)  # (B, p, K)
        m = (z - self.valid.unsqueeze(1).double()) @ self.inverse  # (B, 2p, F): M u (M is symmetric)
        wm = weights.double().unsqueeze(-1) * m
        step = max(1, _ELEMENTS // max(1, b * r * f))
        for t0 in range(0, self.coef.shape[1], step):  # target slices bound the memory (not a hot path)
            coef, icpt = self.coef[:, t0 : t0 + step], self.intercept[:, t0 : t0 + step]
            e = scores[..., t0 : t0 + step].double() - icpt.unsqueeze(1) - z @ coef.transpose(1, 2)  # (B, 2p, t)
            h = e.unsqueeze(-1) * wm.unsqueeze(2)  # (B, 2p, t, F)
            h = h[:, 0::2] + h[:, 1::2]  # (B, p, t, F): the pairs' terms
            self.sums[:, :, t0 : t0 + step] += torch.einsum("bpk,bptf->bktf", onehot, h)
            self.squares[:, :, t0 : t0 + step] += torch.einsum("bpk,bptf->bktf", onehot, h * h)

    def se(self, independent: torch.Tensor) -> torch.Tensor:
        """Float64 (B, T, F): the standard errors, with the fit's rounding added in quadrature; 0 on padded features.

        The rounding is ``ROUNDING`` eps ||φ|| per fit (eps of the fit's dtype): all an enumerated input has.

        Args:
            independent: (B, T, F) the independent-draws estimate, kept by inputs with a lone pair in a class.
        """
        p = self.counts
        lone = ((p == 1) & (self.sizes > 1)).any(1) & self.sampled  # (B,)
        scale = torch.where(p >= 2, (1 - p / self.sizes) * p / (p - 1).clamp_min(1), 0.0)  # (B, K)
        spread = self.squares - self.sums.square() / p.clamp_min(1).view(*p.shape, 1, 1)
        parts = scale.view(*p.shape, 1, 1) * spread.clamp_min(0)  # (B, K, T, F): each class's variance
        var = parts.sum(1)  # (B, T, F)
        dof = var.square() / (parts.square() / (p - 1).clamp_min(1).view(*p.shape, 1, 1)).sum(1).clamp_min(1e-300)
        var = var * (t_quantile(dof.clamp_min(1.0), 0.975) / Z95).square()  # Satterthwaite's t, as a variance
        var = torch.where(lone.view(-1, 1, 1), independent.double().square(), var * self.sampled.view(-1, 1, 1))
        rounding: torch.Tensor = ROUNDING * self.eps * self.coef.norm(dim=-1, keepdim=True)  # (B, T, 1)
        return (var + rounding.square()).sqrt() * self.valid.unsqueeze(1)
