"""Sample-efficient mask designs: the same explanation from fewer model calls.

``StratifiedSampler`` (stratified coalition sizes), ``AntitheticSampler`` (pairs of complementary
masks) and ``SobolSampler`` (quasi-random masks) are ``sampling.Sampler`` subclasses, counter-based
like the others (any block of rows can be drawn on its own), and every prefix of samples 1..S' is
itself a good design, so they suit ``n_samples="auto"``, which draws in rounds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import torch

from torchlime.stages.sampling import (
    GOLDEN,
    M32,
    BernoulliSampler,
    KeepProbability,
    Rows,
    Sampler,
    mix32,
    random_subset,
)

_SOBOL_BITS = 30


def van_der_corput(n: torch.Tensor) -> torch.Tensor:
    """The base-2 radical inverse of long n >= 0: float64 in [0, 1) (bits of n mirrored).

    Args:
        n: long (...) non-negative integers.

    Returns:
        Float64 (...) the van der Corput numbers.

    Example:
        >>> van_der_corput(torch.arange(5)).tolist()
        [0.0, 0.5, 0.25, 0.75, 0.125]
    """
    out = torch.zeros(n.shape, dtype=torch.float64, device=n.device)
    scale = 0.5
    for bit in range(40):  # a fixed loop over bits, not over samples
        out += ((n >> bit) & 1).double() * scale
        scale /= 2
    return out


@dataclass(frozen=True)
class StratifiedSampler(KeepProbability):
    """Coalition sizes stratified over the samples.

    The number of kept features follows Binomial(F_b, p) as in lime, but stratified: sample s takes
    the quantile ``frac(vdc(s) + shift_b)`` of that distribution (the van der Corput sequence,
    randomly shifted per input), then a uniform random subset of that size.

    Attributes:
        p: the probability of keeping a feature, in (0, 1) (lime: 1/2).
    """

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): a stratified number of features of every row kept, uniformly chosen.

        Args:
            rows: the block's coordinates and random numbers.
        """
        nf = rows.n_features.double()
        shift = (rows.input_hash(4) >> 8).double() / (1 << 24)  # per input, not per sample
        u = torch.frac(van_der_corput(rows.samples) + shift)  # (c,)
        k = torch.arange(rows.f_max + 1, device=nf.device, dtype=torch.float64)
        binom = torch.distributions.Binomial(total_count=nf.unsqueeze(1), probs=torch.full_like(nf, self.p)[:, None])
        log_prob: Callable[[torch.Tensor], torch.Tensor] = binom.log_prob  # untyped in torch
        pmf = torch.where(k <= nf.unsqueeze(1), log_prob(torch.minimum(k, nf.unsqueeze(1))).exp(), 0.0)
        cdf = pmf.cumsum(1)
        kept = (cdf < u.unsqueeze(1) * cdf[:, -1:]).sum(1)  # inverse CDF: 0..F_b
        return random_subset(rows, kept)


@dataclass(frozen=True)
class AntitheticSampler(Sampler):
    """Pairs of samples: 2j+1 drawn from ``base``, 2j+2 its complement (over the existing features).

    The complement cancels the first-order noise of the fit.

    Attributes:
        base: the sampler of the first sample of every pair.
    """

    base: Sampler = field(default_factory=BernoulliSampler)

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): the base sampler's masks, complemented in every second sample.

        Args:
            rows: the block's coordinates and random numbers.
        """
        pair = (rows.samples - 1).clamp_min(0) // 2
        first = Rows(rows.key, rows.inputs, pair + 1, rows.n_features, rows.f_max, rows.positions)
        masks = self.base.sample(first)
        second = ((rows.samples - 1) % 2 == 1).unsqueeze(1)
        return torch.where(second, ~masks, masks)


@functools.lru_cache(maxsize=8)
def _directions(dimension: int) -> torch.Tensor:
    """Sobol direction numbers (dimension, 30) as long, from torch's SobolEngine (CPU, cached)."""
    engine: Callable[..., torch.quasirandom.SobolEngine] = torch.quasirandom.SobolEngine  # untyped in torch
    return engine(dimension=dimension, scramble=False).sobolstate.clone()


@dataclass(frozen=True)
class SobolSampler(KeepProbability):
    """Quasi-random masks: feature f kept when coordinate f of the shifted Sobol point s is below ``p``.

    One dimension per feature, with a random digital shift per input drawn from the call's key.

    Attributes:
        p: the probability of keeping a feature, in (0, 1).

    Raises:
        ValueError: for more than 21201 features (the Sobol tables' dimension).
    """

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): the shifted Sobol points of the rows' samples, below ``p``.

        Args:
            rows: the block's coordinates and random numbers.
        """
        if rows.f_max > torch.quasirandom.SobolEngine.MAXDIM:
            raise ValueError(
                f"SobolSampler handles up to {torch.quasirandom.SobolEngine.MAXDIM} features, got {rows.f_max}"
            )
        dev = rows.samples.device
        v = _directions(max(rows.f_max, 1)).to(dev)[: rows.f_max]  # (F, 30)
        x = torch.zeros(rows.samples.shape[0], rows.f_max, dtype=torch.long, device=dev)
        for bit in range(_SOBOL_BITS):  # Gray-code-free Sobol: XOR the direction numbers of the set bits
            on = ((rows.samples >> bit) & 1).bool().unsqueeze(1)
            x = torch.where(on, x ^ v[:, bit], x)
        # a random digital shift per input and feature, from the call's key
        cols = mix32(torch.arange(rows.f_max, device=dev, dtype=torch.long) * GOLDEN & M32)
        shift = mix32(rows.input_hash(5).unsqueeze(1) ^ cols) >> (32 - _SOBOL_BITS)
        u = (x ^ shift).double() / (1 << _SOBOL_BITS)
        return u < self.p
