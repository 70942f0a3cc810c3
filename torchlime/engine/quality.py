"""A quality check in every explanation: is the surrogate worth reading?

Three signs that a LIME surrogate is unreliable, each with a threshold (``assess``): a saturated
output, a poor fit, too few effective samples. ``Explanation.meta["quality"]`` records, per flag, the
inputs (and targets) it concerns, and ``meta["unreliable"]`` a one-line summary (None when all is
well); the engine warns once per call with ``UnreliableExplanationWarning``. Fidelity (R²) is
reported but never trusted alone: the audio veracity study shows it cannot tell a right explanation
from a wrong one.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import torch

MIN_OUTPUT_STD = 1e-4
MIN_R2 = 0.1
MIN_KISH_PER_FEATURE = 1.0


class UnreliableExplanationWarning(UserWarning):
    """Some surrogates of an explanation should not be trusted (see ``torchlime.engine.quality``)."""


class Flags(NamedTuple):
    """Device tensors of the three checks.

    Attributes:
        saturated: bool (B, T) outputs that barely vary.
        poor_fit: bool (B, T) surrogates of low weighted R².
        few_samples: bool (B,) inputs with fewer effective samples than features.
    """

    saturated: torch.Tensor
    poor_fit: torch.Tensor
    few_samples: torch.Tensor

    def counts(self) -> torch.Tensor:
        """Long (3,): how many fits (or inputs) each flag concerns, for a single host read."""
        return torch.stack((self.saturated.sum(), self.poor_fit.sum(), self.few_samples.sum()))


def assess(
    ss_tot: torch.Tensor,
    weight_sum: torch.Tensor,
    weight_sq_sum: torch.Tensor,
    score: torch.Tensor,
    n_features: torch.Tensor,
) -> Flags:
    """The checks, on the device, from quantities the fit already has.

    * ``saturated``: the explained output barely varies under perturbation: its weighted standard
      deviation over the samples is below ``MIN_OUTPUT_STD`` (1e-4). Typical of a saturated
      probability (softmax of a confident model): the coefficients are then noise-sized; explain
      the logits instead.
    * ``poor_fit``: the weighted R² of the surrogate is below ``MIN_R2`` (0.1): the linear model
      explains almost none of the output's variation.
    * ``few_samples``: Kish's effective sample size (Σw)² / Σw² is below ``MIN_KISH_PER_FEATURE`` (1)
      times the number of features: the kernel leaves too few samples with weight for the fit.

    Args:
        ss_tot: (B, T) Σ w (y - ȳ)².
        weight_sum: (B,) Σw.
        weight_sq_sum: (B,) Σw².
        score: (B, T) weighted R².
        n_features: long (B,) F_b.

    Returns:
        The ``Flags``.
    """
    sw = weight_sum.clamp_min(torch.finfo(weight_sum.dtype).tiny)
    std = torch.sqrt(ss_tot / sw.unsqueeze(1))
    saturated = std < MIN_OUTPUT_STD
    poor_fit = ~saturated & (score < MIN_R2)
    kish = weight_sum**2 / weight_sq_sum.clamp_min(torch.finfo(weight_sq_sum.dtype).tiny)
    few = kish < MIN_KISH_PER_FEATURE * n_features.to(kish.dtype)
    return Flags(saturated, poor_fit, few)


def report(flags: Flags, counts: list[int]) -> tuple[dict[str, Any], Optional[str]]:
    """``meta["quality"]`` and the one-line summary (None when no flag is raised).

    Reads the flagged indices from the device only when ``counts`` shows a flag.

    Args:
        flags: the checks.
        counts: how many fits (or inputs) each flag concerns (``Flags.counts``, read on the host).

    Returns:
        ``(quality, summary)``.
    """
    quality: dict[str, Any] = dict(
        thresholds=dict(min_output_std=MIN_OUTPUT_STD, min_r2=MIN_R2, min_kish_per_feature=MIN_KISH_PER_FEATURE)
    )
    parts = []
    names = ("saturated", "poor_fit", "few_samples")
    advice = {
        "saturated": "outputs barely vary (a saturated probability? explain logits: softmax=False)",
        "poor_fit": f"weighted R² below {MIN_R2}",
        "few_samples": "fewer effective samples (Kish) than features (more samples or a wider kernel)",
    }
    for name, count, flag in zip(names, counts, flags):
        where = flag.nonzero().tolist() if count else []
        quality[name] = where
        if count:
            inputs = sorted({w[0] for w in where})
            parts.append(f"{advice[name]} for input(s) {inputs[:10]}{' ...' if len(inputs) > 10 else ''}")
    return quality, ("; ".join(parts) or None)
