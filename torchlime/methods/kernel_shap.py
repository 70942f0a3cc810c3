"""KernelSHAP on the engine: coalition designs, the Shapley kernel's weights and the constrained fit.

``preset="kernel_shap"`` bundles ``KernelShapSampler``, ``ShapleyKernel`` and ``KernelShapRegression``,
with the fill (``baseline``) as the reference. Inputs whose 2^F_b coalitions fit in S samples are
enumerated, and the result is then the exact Shapley value of the game v(S) = f(x with the features
outside S replaced by the baseline), whatever the model (Lundberg & Lee 2017, theorem 2); sampled,
it is KernelSHAP's estimate, exact for models additive in the features. The sampled design is
``design=`` of the sampler and the kernel (the same on both): "leverage" (Leverage SHAP, the default),
"paired" (``methods.shap_designs``) or "plain" (captum's: ``preset="kernel_shap_plain"``). Padded
features (f >= F_b) are always kept and get phi = 0.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch

from torchlime._util.checks import check_choice
from torchlime.methods.shap_designs import DESIGNS, ShapDesign, design_weights, sample_pairs
from torchlime.stages.features import FeatureMap
from torchlime.stages.normal import Fit, Normal, normal_equations, solve_spd
from torchlime.stages.sampling import Rows, Sampler, ShapleySampler
from torchlime.stages.standard_error import kernel_shap_se
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import Kernel

_MAX_BITS = 62  # enumeration bitmasks live in int64
#: ``torch.broadcast_tensors``, typed (torch leaves it unannotated)
_broadcast_tensors: Callable[..., tuple[torch.Tensor, ...]] = torch.broadcast_tensors


def max_enumerated(n_samples: int) -> int:
    """The largest F whose 2^F coalitions fit in ``n_samples`` samples (2^F <= S).

    Args:
        n_samples: S.

    Returns:
        F, at most 62 (enumeration bitmasks live in int64).

    Example:
        >>> max_enumerated(64), max_enumerated(100), max_enumerated(1)
        (6, 6, 0)
    """
    return min(max(int(n_samples), 1).bit_length() - 1, _MAX_BITS)


def shapley_kernel(n_features: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """The Shapley kernel ``pi(F, k) = (F-1) / (C(F, k) k (F-k))`` in float64, 0 at k = 0 and k = F.

    Args:
        n_features: F, long (...), broadcastable with ``kept``.
        kept: k, long (...), 0 <= k <= F.

    Returns:
        Float64 (...) the weights.

    Example:
        >>> shapley_kernel(torch.tensor(4), torch.arange(5)).tolist()
        [0.0, 0.25, 0.125, 0.25, 0.0]
    """
    f, k = _broadcast_tensors(n_features.long(), kept.long())
    inner = (k >= 1) & (k <= f - 1)
    ks = torch.where(inner, k, torch.ones_like(k))
    fs = torch.where(inner, f, ks + 1)
    table = _binomials(f.device)  # exact (correctly rounded) C(F, k) for F < 64, lgamma beyond
    small = fs < table.shape[0]
    exact = table[fs.clamp_max(table.shape[0] - 1), ks.clamp_max(table.shape[0] - 1)]
    fd, kd = fs.double(), ks.double()
    approx = torch.exp(torch.lgamma(fd + 1) - torch.lgamma(kd + 1) - torch.lgamma(fd - kd + 1))
    w = (fd - 1) / (torch.where(small, exact, approx) * kd * (fd - kd))
    return torch.where(inner, w, torch.zeros_like(w))


@functools.lru_cache(maxsize=8)
def _binomials(device: torch.device) -> torch.Tensor:
    """Float64 (64, 64) table of C(n, k) (0 for k > n)."""
    rows = [[float(math.comb(n, k)) for k in range(64)] for n in range(64)]
    return torch.tensor(rows, dtype=torch.float64, device=device)


def _bound(n_samples: Optional[int], what: str) -> int:
    if n_samples is None:
        raise RuntimeError(f"{what}.bind(features, n_samples) must run first (the engine binds it to each call)")
    return n_samples


@dataclass(frozen=True)
class KernelShapSampler(Sampler):
    """KernelSHAP's coalitions: sample 1 all hidden, then every coalition or coalitions by the kernel's mass.

    Sample 0 is the input itself (every feature kept, the engine's rule) and sample 1 the all-hidden
    coalition. An input whose 2^F_b coalitions fit in S samples (2^F_b <= S) is *enumerated*: sample
    s = 2 .. 2^F_b - 1 is the coalition whose bitmask is s - 1 (bit f set: feature f kept), so every
    non-trivial coalition appears exactly once; samples s >= 2^F_b repeat the grand coalition, which
    weighs 0. Any other input is *sampled* by ``design``: "leverage" (Leverage SHAP: pairs z, 1 - z,
    sizes uniformly, coalitions uniformly within a size, without replacement) or "paired" (the same, with
    sizes in proportion to the Shapley kernel's mass), see ``methods.shap_designs``; "plain" (captum's
    KernelShap): sizes k drawn with P(k) proportional to the kernel's mass (F-1) / (k (F-k)), 1 <= k < F,
    then k features uniformly, with replacement, unpaired (``sampling.ShapleySampler``).

    Attributes:
        design: "leverage", "paired" or "plain" (``ShapleyKernel`` must have the same).
        n_samples: S, set by ``bind`` (the engine binds every sampler to its call).

    Example:
        >>> sampler = KernelShapSampler().bind(None, 8)
        >>> sampler(torch.tensor([3]), 8, 3, generator=0)[0].int().tolist()
        [[1, 1, 1], [0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1]]
    """

    design: ShapDesign = "leverage"
    n_samples: Optional[int] = None
    adaptive = False  # a class attribute: the enumeration needs all S samples, not rounds

    def __post_init__(self) -> None:
        check_choice(self.design, "design", DESIGNS)

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> KernelShapSampler:
        """The sampler for a call of S = ``n_samples`` samples per input.

        Args:
            features: the call's feature map (unused).
            n_samples: S, at least 3.

        Returns:
            The sampler with its S.

        Raises:
            ValueError: S < 3.
        """
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 3:
            raise ValueError(
                f"`n_samples` must be an int >= 3 for KernelSHAP (sample 0: the input, 1: the all-hidden "
                f"coalition, then coalitions), got {n_samples!r}"
            )
        return dataclasses.replace(self, n_samples=n_samples)

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): the coalition of every row (enumerated, or drawn by the kernel's mass).

        Args:
            rows: the block's coordinates and random numbers.
        """
        n_samples = _bound(self.n_samples, "KernelShapSampler")
        nf, s = rows.n_features, rows.samples
        enumerated = nf <= max_enumerated(n_samples)
        full = torch.ones_like(nf) << nf.clamp(0, _MAX_BITS)  # 2^F_b
        code = torch.where(s < full, (s - 1).clamp_min(0), full - 1)  # s >= 2^F_b: the grand coalition
        bit = torch.arange(rows.f_max, device=s.device).clamp_max(_MAX_BITS)
        listed = ((code.unsqueeze(1) >> bit) & 1).bool()
        if rows.f_max <= max_enumerated(n_samples):  # every input enumerated
            drawn = listed
        elif self.design == "plain":
            drawn = ShapleySampler().sample(rows)
        else:
            drawn = sample_pairs(rows, n_samples, self.design)
        z = torch.where(enumerated.unsqueeze(1), listed, drawn)
        return z & (s != 1).unsqueeze(1)

    def __repr__(self) -> str:
        return "KernelShapSampler()" if self.design == "leverage" else f"KernelShapSampler(design={self.design!r})"


@dataclass(frozen=True)
class ShapleyKernel(Kernel):
    """KernelSHAP's weights of coalitions: ``pi(F_b, k)`` enumerated, over the inclusion probability sampled.

    The weight of a coalition of k kept features out of F_b is 0 for k = 0 and k = F_b (those two are
    constraints, imposed exactly by the fit); otherwise the Shapley kernel ``pi(F, k) = (F-1) /
    (C(F, k) k (F-k))`` for enumerated inputs (2^F_b <= S); for sampled ones, ``pi`` over the
    coalition's inclusion probability in ``design`` ("leverage", "paired":
    ``shap_designs.design_weights``), or 1 for "plain" (its sampling already follows the kernel).

    Attributes:
        design: "leverage", "paired" or "plain", as ``KernelShapSampler``'s.
        n_samples: S, set by ``bind``.

    Example:
        >>> kernel = ShapleyKernel(design="plain").bind(None, 16)
        >>> masks = torch.tensor([[[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0]]]).bool()
        >>> kernel.weigh_masks(masks, torch.ones(1, 3, dtype=torch.bool)).tolist()
        [[0.0, 0.0, 0.3333333333333333, 0.3333333333333333]]
    """

    design: ShapDesign = "leverage"
    n_samples: Optional[int] = None

    def __post_init__(self) -> None:
        check_choice(self.design, "design", DESIGNS)

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> ShapleyKernel:
        """The kernel for a call of S = ``n_samples`` samples per input.

        Args:
            features: the call's feature map (unused).
            n_samples: S.

        Returns:
            The kernel with its S.
        """
        return dataclasses.replace(self, n_samples=n_samples)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Not defined: a Shapley kernel weighs coalitions (``weigh_masks``), not distances.

        Args:
            distances: (...) distances of any shape (refused).

        Raises:
            TypeError: always.
        """
        raise TypeError("ShapleyKernel weighs coalitions, not distances: the engine calls weigh_masks")

    def weigh_masks(self, masks: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Float64 weights (g, r) of the coalitions.

        Args:
            masks: bool (g, r, F) the masks of r samples of g inputs.
            valid: bool (g, F) the features that exist for each input.
        """
        n_samples = _bound(self.n_samples, "ShapleyKernel")
        kept = (masks & valid.unsqueeze(1)).sum(-1)
        nf = valid.sum(-1, keepdim=True)
        pi = shapley_kernel(nf, kept)
        if self.design == "plain":
            sampled = ((kept >= 1) & (kept < nf)).double()
        else:
            sampled = design_weights(nf, kept, n_samples, masks.shape[-1], self.design)
        return torch.where(nf <= max_enumerated(n_samples), pi, sampled)

    def __repr__(self) -> str:
        return "ShapleyKernel()" if self.design == "leverage" else f"ShapleyKernel(design={self.design!r})"


@dataclass(frozen=True)
class KernelShapRegression(Surrogate):
    """Weighted least squares with KernelSHAP's two constraints, solved exactly (no free intercept).

    ``min sum_s w_s (y_s - phi_0 - z_s . phi)^2`` subject to ``phi_0 = f(baseline)`` (sample 1) and
    ``phi_0 + sum_f phi_f = f(x)`` (sample 0), by elimination on the engine's uncentred moments (no big
    weights standing in for the constraints). With u = z - 1 (so u = 0 for the input itself) and
    y~ = y - f(x), the constraints reduce the model to ``y~ = u . phi`` with
    ``sum_f phi_f = f(x) - f(baseline) =: Delta`` (over the input's F_b features). Writing
    phi = (Delta / F_b) 1 + theta with theta orthogonal to 1, theta solves
    ``(Q G Q + c 11'/F_b) theta = Q (b - G 1 Delta / F_b)``, where G = sum w u u', b = sum w u y~ (from
    the engine's uncentred moments ``Normal.raw``), Q the projector orthogonal to 1 and c > 0 any scale
    (the 1-direction is pinned by the constraint); a rank-safe eigen solve gives the minimum-norm theta
    when the samples do not determine it. phi_0 = f(baseline) is the intercept and ``local_pred`` = f(x).

    ``anchors`` (B, 2, T) must hold the outputs of the input (sample 0) and of the all-hidden
    coalition (sample 1), as ``KernelShapSampler`` lays them out; ``fit(x, y, w, valid)`` takes
    them from rows 0 and 1 of ``y``.

    Attributes:
        dtype: dtype of the accumulated products and of the returned fit.

    Example:
        >>> masks = torch.tensor([[[1, 1], [0, 0], [1, 0], [0, 1]]]).bool()
        >>> y = (3.0 * masks[..., :1] + 2.0 * masks[..., 1:] * masks[..., :1] + 1.0).double()  # v = 1 + 3a + 2ab
        >>> w = torch.tensor([[0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)
        >>> fit = KernelShapRegression(dtype=torch.float64).fit(masks, y, w, torch.ones(1, 2, dtype=torch.bool))
        >>> fit.coef.round(decimals=9).tolist(), fit.intercept.tolist()  # Shapley values: 3 + 2/2 and 2/2
        ([[[4.0, 1.0]]], [[1.0]])
    """

    dtype: torch.dtype = torch.float32
    se_method: ClassVar[str] = "kernel_shap"

    def coef_se(self, ne: Normal, fit: Fit, valid: torch.Tensor) -> Optional[torch.Tensor]:
        """Float64 (B, T, F): ``σ² (P Gu P)⁺`` on the constrained fit (``stages.standard_error.kernel_shap_se``).

        Args:
            ne: the normal equations, with the uncentred moments.
            fit: the fit, score (B, T).
            valid: bool (B, F) the features that exist for each input.
        """
        return kernel_shap_se(ne, fit.score, valid)

    def fit(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor) -> Fit:
        """Fit on samples held in memory; rows 0 and 1 of ``y`` are the anchors.

        Args:
            x: (B, S, F) masks (bool or float).
            y: (B, S, T) outputs.
            w: (B, S) weights.
            valid: bool (B, F) the features that exist for each input.

        Returns:
            ``Fit`` with coef (B, T, F) the Shapley values, intercept f(baseline) and local_pred f(x) (B, T).
        """
        return self.fit_normal(normal_equations(x, y, w, self.dtype), valid, anchors=y[:, :2])

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """Fit from the normal equations' uncentred moments and the anchors.

        Args:
            ne: the normal equations (with ``raw`` and ``y_shift``).
            valid: bool (B, F) the features that exist for each input.
            anchors: (B, 2, T) the outputs of sample 0 (the input) and 1 (the all-hidden coalition).

        Returns:
            ``Fit`` with coef (B, T, F) the Shapley values, intercept f(baseline) and local_pred f(x) (B, T).

        Raises:
            ValueError: anchors of the wrong shape, or normal equations without the uncentred moments.
        """
        if anchors is None or ne.raw is None or ne.y_shift is None or anchors.ndim != 3 or anchors.shape[1] != 2:
            got = "None" if anchors is None or ne.raw is None or ne.y_shift is None else f"shape {tuple(anchors.shape)}"
            raise ValueError(
                f"`anchors` (B, 2, T): KernelShapRegression needs the outputs of samples 0 (the input) "
                f"and 1 (the all-hidden coalition) and the uncentred moments, got {got}"
            )
        sxx, sxy, sx, sy, syy = ne.raw  # of x' = z - 1/2 and y' = y - y_shift
        sw = ne.weight_sum
        one = valid.double()
        nf = one.sum(1).clamp_min(1)  # (B,)
        fx, fb = anchors[:, 0].double(), anchors[:, 1].double()  # (B, T)
        # moments of u = z - 1 = x' - 1/2 and of y~ = y - f(x) = y' + d
        d = ne.y_shift - fx
        su = (sx - 0.5 * sw.unsqueeze(1)) * one  # (B, F)
        guu = (
            (sxx - 0.5 * (sx.unsqueeze(2) + sx.unsqueeze(1)) + 0.25 * sw.view(-1, 1, 1))
            * one.unsqueeze(2)
            * one.unsqueeze(1)
        )
        guy = (sxy - 0.5 * sy.unsqueeze(1)) * one.unsqueeze(2) + su.unsqueeze(2) * d.unsqueeze(1)  # (B, F, T)
        syy_t = syy + 2 * d * sy + d * d * sw.unsqueeze(1)
        delta = fx - fb
        base = one.unsqueeze(2) * (delta / nf.unsqueeze(1)).unsqueeze(1)  # (B, F, T): phi with theta = 0
        ones = one.unsqueeze(2) * one.unsqueeze(1) / nf.view(-1, 1, 1)  # 11'/F_b over the valid features
        proj = torch.diag_embed(one) - ones
        pgp = proj @ guu @ proj
        scale = torch.diagonal(pgp, dim1=1, dim2=2).sum(1) / nf
        scale = torch.where(scale > 0, scale, torch.ones_like(scale)).view(-1, 1, 1)
        lhs = pgp + scale * (ones + torch.diag_embed(1.0 - one))
        theta = solve_spd(0.5 * (lhs + lhs.transpose(1, 2)), proj @ (guy - guu @ base), 0.0)
        phi = (base + proj @ theta) * one.unsqueeze(2)  # (B, F, T)
        ss_res = (syy_t - 2 * (phi * guy).sum(1) + (phi * (guu @ phi)).sum(1)).clamp_min(0)
        score = torch.where(ne.ss_tot > 0, 1.0 - ss_res / ne.ss_tot.clamp_min(1e-300), (ss_res == 0).double())
        fit = Fit(phi.transpose(1, 2), fb, score, fb + phi.sum(1))
        return Fit(*(t.to(self.dtype) for t in fit[:4]))
