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

import numpy as np
import torch

from torchlime.stages.normal import Spread, quality_flags

MIN_OUTPUT_STD = 1e-4
MIN_R2 = 0.1
MIN_KISH_PER_FEATURE = 1.0
#: the three thresholds, in ``_backend.quality_flags``' order
THRESHOLDS = (MIN_OUTPUT_STD, MIN_R2, MIN_KISH_PER_FEATURE)


class UnreliableExplanationWarning(UserWarning):
    """Some surrogates of an explanation should not be trusted (see ``torchlime.engine.quality``)."""


#: flags of at most this many values are read with their counts (one host read instead of two when set)
READ_FLAGS_MAX = 1 << 16


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

    def read(self, *scalars: torch.Tensor) -> tuple[list[int], list[int], Optional[list[list[list[int]]]]]:
        """What the report needs in one host read (one synchronisation on CUDA).

        Args:
            scalars: integer tensors of one element each, read along (e.g. a count of bad outputs).

        Returns:
            ``(values, counts, where)``: the scalars' values, ``counts()`` as three ints, and per flag the
            indices where it is set (``nonzero().tolist()``), read along when the flags hold at most
            ``READ_FLAGS_MAX`` values, else None (``report`` reads the set ones: a second read, only then).
        """
        small = sum(f.numel() for f in self) <= READ_FLAGS_MAX
        n = len(scalars)
        head = [t.reshape(1).long() for t in scalars]
        if not small:
            values = torch.cat(head + [self.counts()]).tolist()
            return values[:n], values[n : n + 3], None
        # one concatenation (the bool flags promoted to long by it); the counts are summed on the host
        values = torch.cat(head + [f.reshape(-1) for f in self]).tolist()
        counts, where, at = [], [], n
        for f in self:  # the three flags: the set indices of each, on the host
            bits = np.asarray(values[at : at + f.numel()], dtype=bool).reshape(tuple(f.shape))
            at += f.numel()
            counts.append(int(bits.sum()))
            where.append(np.argwhere(bits).tolist())
        return values[:n], counts, where


def assess(normal: Spread, score: torch.Tensor, n_features: torch.Tensor) -> Flags:
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
        normal: the fits' data (``Normal`` or a sample-space ``Design``): ``ss_tot`` (B, T) Σ w (y - ȳ)²,
            ``weight_sum`` and ``weight_sq_sum`` (B,) Σw and Σw².
        score: (B, T) weighted R².
        n_features: long (B,) F_b.

    Returns:
        The ``Flags``.
    """
    return Flags(*quality_flags(normal, score, n_features, THRESHOLDS))


def _advice(name: str, softmax: bool, n_samples: int, f_max: int) -> str:
    """What each flag means, and what to do, given the call's own settings."""
    if name == "saturated":
        if softmax:
            return "outputs barely vary (saturated probabilities: explain logits, softmax=False)"
        return (
            "outputs barely vary under perturbation (the model ignores these features, or its output is "
            "saturated: explain logits rather than probabilities; check the fill is not the input itself)"
        )
    if name == "poor_fit":
        return f"weighted R² below {MIN_R2}"
    if f_max >= n_samples:
        return (
            f"fewer effective samples (Kish) than features: {f_max} features for {n_samples} samples (use fewer, "
            f"larger features: coarser segments or a grid, rather than more samples)"
        )
    return "fewer effective samples (Kish) than features (more samples or a wider kernel)"


def report(
    flags: Flags,
    counts: list[int],
    *,
    softmax: bool = False,
    n_samples: int = 0,
    f_max: int = 0,
    index: Optional[torch.Tensor] = None,
    where: Optional[list[list[list[int]]]] = None,
) -> tuple[dict[str, Any], Optional[str]]:
    """``meta["quality"]`` and the one-line summary (None when no flag is raised).

    Reads the flagged indices from the device only when ``counts`` shows a flag and ``where`` is not given.

    Args:
        flags: the checks.
        counts: how many fits (or inputs) each flag concerns (``Flags.counts``, read on the host).
        softmax: the call explained probabilities (the advice for saturated outputs depends on it).
        n_samples: S, samples per input (the advice for few samples depends on S against F).
        f_max: F, the largest feature count.
        index: long (B,) global index of every input in a larger data set, named beside the positions.
        where: per flag, the indices where it is set, when already read (``Flags.read``).

    Returns:
        ``(quality, summary)``.
    """
    quality: dict[str, Any] = dict(
        thresholds=dict(min_output_std=MIN_OUTPUT_STD, min_r2=MIN_R2, min_kish_per_feature=MIN_KISH_PER_FEATURE)
    )
    parts = []
    names = ("saturated", "poor_fit", "few_samples")
    for k, (name, count, flag) in enumerate(zip(names, counts, flags)):
        at = where[k] if where is not None else flag.nonzero().tolist() if count else []
        quality[name] = at
        if count:
            inputs = sorted({w[0] for w in at})
            more = " ..." if len(inputs) > 10 else ""
            which = f"input(s) {inputs[:10]}{more}"
            if index is not None:
                which += f" (data-set index {index[inputs[:10]].tolist()}{more})"
            parts.append(f"{_advice(name, softmax, n_samples, f_max)} for {which}")
    return quality, ("; ".join(parts) or None)
