"""``n_samples="auto"``: draw samples in rounds until each input's explanation is settled.

The idea of S-LIME (Zhou et al., 2021): instead of a fixed N, keep sampling while the explanation
would still change. Every round doubles the samples of the inputs still being sampled (the samples
drawn so far are kept: masks do not depend on the round), refits, and stops an input once it is
settled for every target (``Adaptive.stable``), or at ``cap`` samples. Two rules: by default the gap
between the k-th and (k+1)-th coefficient is significant; with ``se=s`` every coefficient is known
to within s of the largest (max_j se_j <= s · max_j |β_j|). Both read the standard errors of
``stages.standard_error``. ``Explanation.meta["samples_used"]`` records how many samples each input got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch

from torchlime._util.checks import check_positive_float, check_positive_int, describe
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.standard_error import ridge_se
from torchlime.typing import NSamples as NSamples


@dataclass(frozen=True)
class Adaptive:
    """Settings of ``n_samples="auto"``: rounds of doubling samples until the explanation is settled.

    Attributes:
        start: the samples of the first round (>= 2).
        cap: the most samples an input gets (>= ``start``).
        k: how many of the top features must be stable (the default rule).
        confidence: the one-sided confidence of the top-k test, in [0.5, 1).
        se: None (the top-k rule), or s > 0: stop an input once ``max_j se_j <= s · max_j |β_j|`` for
            every target (its standard errors are at most s of its largest coefficient).

    Example:
        >>> Adaptive(se=0.05)
        Adaptive(start=256, cap=8192, se=0.05)
    """

    start: int = 256
    cap: int = 8192
    k: int = 5
    confidence: float = 0.95
    se: Optional[float] = None

    def __post_init__(self) -> None:
        check_positive_int(self.start, "start", minimum=2)
        check_positive_int(self.cap, "cap", minimum=2)
        check_positive_int(self.k, "k")
        c = check_positive_float(self.confidence, "confidence")
        if not 0.5 <= c < 1.0:
            raise ValueError(f"`confidence` must be in [0.5, 1), got {self.confidence}")
        if self.cap < self.start:
            raise ValueError(f"`cap` must be >= `start` ({self.start}), got {self.cap}")
        if self.se is not None:
            check_positive_float(self.se, "se")

    def __repr__(self) -> str:
        if self.se is None:
            return f"Adaptive(start={self.start}, cap={self.cap}, k={self.k}, confidence={self.confidence})"
        return f"Adaptive(start={self.start}, cap={self.cap}, se={self.se})"

    def stable(self, normal: Normal, fit: Fit, valid: torch.Tensor, alpha: float) -> torch.Tensor:
        """Bool (B,): inputs settled for every target (the top-k rule, or the ``se`` rule).

        Top-k: ``(β_(k) - β_(k+1)) / sqrt(se_(k)² + se_(k+1)²) >= z_confidence`` (a one-sided normal
        test); ``se``: ``max_j se_j <= se · max_j |β_j|``. The standard errors are those of the weighted
        fit (``stages.standard_error.ridge_se``, with ss_res = (1 - R²) · ss_tot and α the ridge penalty;
        the top-k test: the variance alone, α at least 1e-6; the ``se`` rule: ``coef_se``'s, shrinkage included).

        Args:
            normal: the accumulated normal equations, gram (B, F, F).
            fit: their fit, coef (B, T, F) and score (B, T).
            valid: bool (B, F) the features that exist for each input.
            alpha: the surrogate's ridge penalty (0 for others).

        Returns:
            Bool (B,).
        """
        ss_res = (1.0 - fit.score.double()).clamp_min(0) * normal.ss_tot  # (B, T)
        if self.se is not None:  # coef_se's estimate: the ridge shrinkage included
            se_max = ridge_se(normal, ss_res, valid, alpha, fit.coef).amax(-1)  # (B, T)
            return (se_max <= self.se * fit.coef.double().abs().amax(-1)).all(1)
        var = ridge_se(normal, ss_res, valid, max(alpha, 1e-6)) ** 2  # (B, T, F)
        coef = fit.coef.double().masked_fill(~valid.unsqueeze(1), float("-inf"))
        k = min(self.k, coef.shape[-1] - 1)
        if k < 1:
            return torch.ones(coef.shape[0], dtype=torch.bool, device=coef.device)
        order = coef.argsort(-1, descending=True)[..., k - 1 : k + 1]  # the k-th and (k+1)-th
        gap = coef.gather(-1, order).diff(dim=-1).squeeze(-1).neg()
        se = var.gather(-1, order).sum(-1).sqrt().clamp_min(1e-300)
        icdf: Callable[[torch.Tensor], torch.Tensor] = torch.distributions.Normal(0.0, 1.0).icdf  # untyped in torch
        z = icdf(torch.tensor(self.confidence, dtype=torch.float64))
        ok = (gap / se >= z) | (valid.sum(1) <= self.k).unsqueeze(1)
        return ok.all(1)


def resolve_n_samples(n_samples: object) -> tuple[int, Optional[Adaptive]]:
    """S or the cap, and the adaptive settings or None, of ``n_samples``.

    Args:
        n_samples: an int >= 2, "auto" or an ``Adaptive``.

    Returns:
        ``(S, None)`` for an int, ``(cap, settings)`` otherwise.

    Raises:
        TypeError / ValueError: for anything else.
    """
    if isinstance(n_samples, Adaptive):
        return n_samples.cap, n_samples
    if n_samples == "auto":
        return Adaptive().cap, Adaptive()
    if isinstance(n_samples, str):
        raise ValueError(f"`n_samples` must be an int >= 2, 'auto' or an Adaptive, got {describe(n_samples)}")
    return check_positive_int(n_samples, "n_samples", minimum=2), None
