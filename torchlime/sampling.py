"""Stage 2: perturbation masks.

A sampler draws boolean masks ``Z`` (B, S, F): ``Z[b, s, f]`` is True when
feature ``f`` of input ``b`` is kept in sample ``s``. Row 0 of every input is
all ones (the input itself). Features beyond an input's own count F_b (padding
when inputs have different F) are always True, so they never change the input.

Samplers are the only stage that touches randomness; they draw on the
generator's device from an explicit ``torch.Generator``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import check_positive_float


def valid_features(n_features: torch.Tensor, f_max: int) -> torch.Tensor:
    """Bool (B, F): True where feature f exists for input b (f < F_b)."""
    return torch.arange(f_max, device=n_features.device) < n_features.unsqueeze(1)


class Sampler:
    """Base class: ``sampler(n_features, n_samples, f_max, generator) -> (B, S, F) bool``."""

    def draw(self, n_features: torch.Tensor, n_samples: int, f_max: int,
             generator: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, n_features: torch.Tensor, n_samples: int, f_max: int,
                 generator: torch.Generator) -> torch.Tensor:
        """Draw masks with row 0 all ones and padded features kept.

        Args:
            n_features: long (B,), F_b per input, on the generator's device.
            n_samples: S, samples per input (including row 0).
            f_max: F, the largest F_b.
            generator: the only source of randomness.

        Returns:
            bool (B, S, F).
        """
        masks = self.draw(n_features, n_samples, f_max, generator)
        valid = valid_features(n_features, f_max).unsqueeze(1)
        masks = masks | ~valid
        masks[:, 0] = True
        return masks


@dataclass(frozen=True)
class BernoulliSampler(Sampler):
    """lime's image sampler: every feature kept independently with probability ``p``.

    The number of kept features is Binomial(F, p). lime uses p = 1/2.
    """

    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < check_positive_float(self.p, "p") < 1.0:
            raise ValueError(f"`p` must be in (0, 1), got {self.p}")

    def draw(self, n_features, n_samples, f_max, generator):
        batch = n_features.shape[0]
        u = torch.rand(batch, n_samples, f_max, generator=generator, device=generator.device)
        return u < self.p


@dataclass(frozen=True)
class UniformCountSampler(Sampler):
    """lime's text sampler: remove k ~ U{1..F_b} features, chosen uniformly without replacement."""

    def draw(self, n_features, n_samples, f_max, generator):
        batch = n_features.shape[0]
        dev = generator.device
        nf = n_features.to(dev)
        u = torch.rand(batch, n_samples, generator=generator, device=dev)
        k = (u * nf.unsqueeze(1)).long().clamp_max(nf.unsqueeze(1) - 1) + 1  # 1..F_b
        return ~_lowest_k(batch, n_samples, f_max, nf, k, generator)


@dataclass(frozen=True)
class ShapleySampler(Sampler):
    """KernelSHAP's coalition sampler: keep k features with P(k) ∝ (F-1) / (k (F-k)), 1 <= k < F.

    Pair it with ``UniformKernel`` and a plain least-squares surrogate to get a
    Kernel-SHAP-style estimate (with a fixed baseline).
    """

    def draw(self, n_features, n_samples, f_max, generator):
        batch = n_features.shape[0]
        dev = generator.device
        nf = n_features.to(dev)
        k = torch.arange(1, max(f_max, 2), device=dev, dtype=torch.float64)  # (F-1,)
        nfd = nf.unsqueeze(1).double()
        prob = torch.where(k < nfd, (nfd - 1) / (k * (nfd - k)), torch.zeros((), device=dev, dtype=torch.float64))
        prob = prob / prob.sum(1, keepdim=True).clamp_min(1e-300)
        kept = torch.multinomial(prob.float(), n_samples, replacement=True, generator=generator) + 1
        return _lowest_k(batch, n_samples, f_max, nf, kept, generator)


def _lowest_k(batch: int, n_samples: int, f_max: int, n_features: torch.Tensor,
              k: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Bool (B, S, F): a uniform random subset of exactly k[b, s] of input b's F_b features."""
    dev = generator.device
    noise = torch.rand(batch, n_samples, f_max, generator=generator, device=dev)
    valid = valid_features(n_features, f_max).unsqueeze(1)
    noise = noise.masked_fill(~valid, 2.0)  # padded features rank last
    rank = noise.argsort(-1).argsort(-1)
    return rank < k.unsqueeze(-1)


SAMPLERS = {
    "bernoulli": BernoulliSampler,
    "uniform_count": UniformCountSampler,
    "shapley": ShapleySampler,
}


def resolve_sampler(sampler: "Sampler | str") -> Sampler:
    """Accept a sampler object or one of the names in ``SAMPLERS``."""
    if isinstance(sampler, Sampler):
        return sampler
    if isinstance(sampler, str) and sampler in SAMPLERS:
        return SAMPLERS[sampler]()
    raise ValueError(f"`sampler` must be a Sampler or one of {list(SAMPLERS)}, got {sampler!r}")
