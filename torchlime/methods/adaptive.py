"""``n_samples="auto"``: draw samples in rounds until each input's explanation is settled.

The idea of S-LIME (Zhou et al., 2021): instead of a fixed N, keep sampling while the explanation
would still change. Every round doubles the samples of the inputs still being sampled (the samples
drawn so far are kept: masks do not depend on the round), refits, and stops an input once it is
settled for every target (``Adaptive.stable``), or at ``cap`` samples. Three rules:

- ``"lime"`` (the default): the explanation is, at ``confidence``, at least as precise as lime's
  (Bernoulli(1/2) masks, ``Ridge(alpha=1)``) at ``lime_samples`` samples, lime's default 1000; the
  fit's error is estimated from how far it moved since the last round (``methods.lime_precision``).
- ``"top_k"``: the gap between the k-th and (k+1)-th coefficient is significant.
- ``"se"`` (``se=s``): every coefficient is known to within s of the largest (max_j se_j <= s · max_j |β_j|).

All read the standard errors of ``stages.standard_error``. ``Explanation.meta["samples_used"]`` records
how many samples each input got.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from torchlime._util.checks import check_choice, check_positive_float, check_positive_int, describe
from torchlime.methods.lime_precision import Earlier, as_precise_as_lime
from torchlime.stages.design_error import normal_quantile
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.standard_error import ridge_se
from torchlime.typing import NSamples as NSamples

#: the stopping rules of ``Adaptive``
RULES = ("lime", "top_k", "se")


@dataclass(frozen=True)
class Adaptive:
    """Settings of ``n_samples="auto"``: rounds of doubling samples until the explanation is settled.

    Attributes:
        start: the samples of the first round (>= 2).
        cap: the most samples an input gets (>= ``start``).
        rule: "lime" (as precise as lime at ``lime_samples``), "top_k" (the top k are stable) or "se"
            (the standard errors are at most ``se`` of the largest coefficient); None: "se" when ``se``
            is given, else "lime" (module docstring).
        k: how many of the top features must be stable (the "top_k" rule).
        confidence: the one-sided confidence of the "lime" and "top_k" tests, in [0.5, 1).
        se: s > 0 for the "se" rule: stop an input once ``max_j se_j <= s · max_j |β_j|`` for every
            target; None for the others.
        lime_samples: the "lime" rule's yardstick: lime's precision at this many samples (lime's default).

    Example:
        >>> Adaptive()
        Adaptive(start=250, cap=8192, rule='lime', lime_samples=1000, confidence=0.95)
        >>> Adaptive(se=0.05)
        Adaptive(start=250, cap=8192, se=0.05)
    """

    start: int = 250
    cap: int = 8192
    rule: Optional[str] = None
    k: int = 5
    confidence: float = 0.95
    se: Optional[float] = None
    lime_samples: int = 1000

    def __post_init__(self) -> None:
        check_positive_int(self.start, "start", minimum=2)
        check_positive_int(self.cap, "cap", minimum=2)
        check_positive_int(self.k, "k")
        check_positive_int(self.lime_samples, "lime_samples", minimum=2)
        c = check_positive_float(self.confidence, "confidence")
        if not 0.5 <= c < 1.0:
            raise ValueError(f"`confidence` must be in [0.5, 1), got {self.confidence}")
        if self.cap < self.start:
            raise ValueError(f"`cap` must be >= `start` ({self.start}), got {self.cap}")
        if self.rule is not None:
            check_choice(self.rule, "rule", RULES)
        if self.se is not None:
            check_positive_float(self.se, "se")
        if self.rule == "se" and self.se is None:
            raise ValueError("`se` must be a number > 0 with rule 'se' (its bound), got None")
        if self.rule in ("lime", "top_k") and self.se is not None:
            raise ValueError(f"`se` is the bound of rule 'se' only, got se={self.se} with rule={self.rule!r}")

    @property
    def stopping(self) -> str:
        """The rule in force: ``rule``, or "se" when ``se`` is given, else "lime"."""
        return self.rule if self.rule is not None else ("se" if self.se is not None else "lime")

    @property
    def needs_earlier(self) -> bool:
        """Whether the rule compares each round's fit with an earlier one (``lime_precision.Earlier``): "lime"."""
        return self.stopping == "lime"

    def __repr__(self) -> str:
        head = f"Adaptive(start={self.start}, cap={self.cap}"
        if self.stopping == "se":
            return f"{head}, se={self.se})"
        if self.stopping == "top_k":
            return f"{head}, rule='top_k', k={self.k}, confidence={self.confidence})"
        return f"{head}, rule='lime', lime_samples={self.lime_samples}, confidence={self.confidence})"

    def stable(
        self,
        normal: Normal,
        fit: Fit,
        valid: torch.Tensor,
        alpha: float,
        earlier: Optional[Earlier] = None,
        n: int = 0,
    ) -> torch.Tensor:
        """Bool (B,): inputs settled for every target under the rule in force (``stopping``).

        "lime": the upper ``confidence`` bound of the fit's squared error, from how far it moved since
        ``earlier``, is at most lime's at ``lime_samples`` samples (``lime_precision.as_precise_as_lime``;
        False for every input without ``earlier``). "top_k": ``(β_(k) - β_(k+1)) / sqrt(se_(k)² +
        se_(k+1)²) >= z_confidence`` (a one-sided normal test). "se": ``max_j se_j <= se · max_j |β_j|``.
        The standard errors are those of the weighted fit (``stages.standard_error.ridge_se``, with ss_res =
        (1 - R²) · ss_tot and α the ridge penalty; the top-k test: the variance alone, α at least 1e-6; the
        ``se`` rule: ``coef_se``'s, shrinkage included).

        Args:
            normal: the accumulated normal equations, gram (B, F, F), n_samples (B,) for "lime".
            fit: their fit, coef (B, T, F) and score (B, T).
            valid: bool (B, F) the features that exist for each input.
            alpha: the surrogate's ridge penalty (0 for others).
            earlier: for "lime", the fit of a prefix of the same samples (the last round's), or None.
            n: for "lime", the samples of this fit.

        Returns:
            Bool (B,).
        """
        ss_res = (1.0 - fit.score.double()).clamp_min(0) * normal.ss_tot  # (B, T)
        rule = self.stopping
        if self.se is not None:  # the "se" rule, coef_se's estimate: the ridge shrinkage included
            se_max = ridge_se(normal, ss_res, valid, alpha, fit.coef).amax(-1)  # (B, T)
            return (se_max <= self.se * fit.coef.double().abs().amax(-1)).all(1)
        if rule == "lime":
            if earlier is None:
                return torch.zeros(valid.shape[0], dtype=torch.bool, device=valid.device)
            return as_precise_as_lime(normal, fit, valid, alpha, earlier, n, (self.lime_samples, self.confidence))
        var = ridge_se(normal, ss_res, valid, max(alpha, 1e-6)) ** 2  # (B, T, F)
        coef = fit.coef.double().masked_fill(~valid.unsqueeze(1), float("-inf"))
        k = min(self.k, coef.shape[-1] - 1)
        if k < 1:
            return torch.ones(coef.shape[0], dtype=torch.bool, device=coef.device)
        order = coef.argsort(-1, descending=True)[..., k - 1 : k + 1]  # the k-th and (k+1)-th
        gap = coef.gather(-1, order).diff(dim=-1).squeeze(-1).neg()
        se = var.gather(-1, order).sum(-1).sqrt().clamp_min(1e-300)
        z = normal_quantile(self.confidence)
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
