"""Stage 2: perturbation masks.

A sampler gives boolean masks ``Z``: ``Z[b, s, f]`` is True when feature ``f`` of input ``b`` is kept
in sample ``s``; row ``s = 0`` is all ones (the input itself) and features beyond an input's own F_b
are always kept. Randomness is counter-based: every number is a hash of the call's 64-bit key
(``make_key``) and its coordinates (input, sample, feature, stream), so any block of rows can be
drawn on its own, in any order and chunking, the same every time and on every device; the engine
draws each chunk's rows when it needs them and draws them again for the fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from torchlime._backend import GOLDEN as GOLDEN
from torchlime._backend import M32 as M32
from torchlime._backend import hash_words, mix32, row_hash
from torchlime._util.checks import check_positive_float, describe
from torchlime._util.upload import upload
from torchlime.stages.features import FeatureMap
from torchlime.stages.fixed_cost import columns, derived
from torchlime.typing import Seed


def _splitmix64(seed: int) -> int:
    """SplitMix64 of ``seed``: a well-mixed 64-bit number (pure Python: no tensor, no device)."""
    z = (seed + 0x9E3779B97F4A7C15) % (1 << 64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
    return z ^ (z >> 31)


def make_key(generator: Seed, device: torch.device) -> torch.Tensor:
    """The 64-bit key of a call's masks, as a long (2,) tensor of 32-bit words on ``device``.

    Args:
        generator: an int seed (mixed by SplitMix64, on the host), None (seed 0), or a
            ``torch.Generator``, from which one 62-bit number is drawn on the generator's
            device (a CUDA generator's number stays on the GPU: no host synchronisation),
            so two calls with the same generator object differ.
        device: where the key goes.

    Returns:
        Long (2,) the key's low and high 32-bit words.

    Raises:
        TypeError: for anything else.

    Example:
        >>> make_key(7, torch.device("cpu")).tolist() == make_key(7, torch.device("cpu")).tolist()
        True
    """
    if generator is None or (isinstance(generator, int) and not isinstance(generator, bool)):
        value = _splitmix64(0 if generator is None else generator % (1 << 64))
        return upload([value & M32, value >> 32], torch.long, device)
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"`generator` must be None, an int seed or a torch.Generator, got {describe(generator)}")
    seed = torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).to(device)
    return torch.cat((seed & M32, seed >> 32))


@dataclass(frozen=True)
class Rows:
    """Coordinates of a block of c mask rows and their random numbers.

    Attributes:
        key: long (2,) the call's key (``make_key``).
        inputs: long (c,) the input each row belongs to (its index in the data set for
            ``explain_dataset``, its position in the batch otherwise).
        samples: long (c,) the sample index s of each row (0 is the unperturbed input).
        n_features: long (c,) F_b of each row's input.
        f_max: F, the width of the masks.
        positions: long (c,) the position of each row's input in the batch (None: ``inputs``).
    """

    key: torch.Tensor
    inputs: torch.Tensor
    samples: torch.Tensor
    n_features: torch.Tensor
    f_max: int
    positions: Optional[torch.Tensor] = None

    def input_hash(self, stream: int) -> torch.Tensor:
        """A 32-bit hash (c,) of the key, each row's input and ``stream`` (not of the sample).

        Args:
            stream: which independent stream of numbers.

        Returns:
            Long (c,) values in [0, 2**32).
        """
        h = mix32(self.key[0] ^ (self.inputs & M32))
        h = mix32(h ^ self.key[1] ^ ((self.inputs >> 32) & M32))
        return mix32((h + stream * GOLDEN) & M32)

    def uniform(self, stream: int = 0, width: Optional[int] = None) -> torch.Tensor:
        """Uniform [0, 1) float32 numbers: (c,) or, with ``width``, (c, width) (one per feature).

        Args:
            stream: which independent stream: different values give independent numbers for the same rows.
            width: None (one number per row) or the number of columns (one per feature).

        Returns:
            Float32 (c,) or (c, width).
        """
        if width is None:
            h = row_hash(self.key, self.inputs, self.samples, stream)
        else:
            h = hash_words(self.key, self.inputs, self.samples, stream, width)
        return (h >> 8).to(torch.float32) * (1.0 / (1 << 24))

    def words(self, stream: int, width: int) -> torch.Tensor:
        """32-bit hash words of (row, column, stream): long (c, width) values in [0, 2**32).

        Args:
            stream: which independent stream of numbers.
            width: the number of columns.

        Returns:
            Long (c, width).
        """
        return hash_words(self.key, self.inputs, self.samples, stream, width)

    def bits(self, stream: int, width: int) -> torch.Tensor:
        """Fair coin flips, bool (c, width): bit j % 32 of the hash of (row, j // 32, stream).

        A 32-bit hash gives 32 independent fair bits, so Bernoulli(1/2) masks cost one hash
        per 32 features instead of one per feature.

        Args:
            stream: which independent stream of numbers.
            width: the number of columns (one per feature).

        Returns:
            Bool (c, width).
        """
        words = -(-width // 32)
        hw = hash_words(self.key, self.inputs, self.samples, stream, words)  # (c, words)
        bit = columns(32, hw.device, shift=True)  # bit j set: the same flips as (hw >> j) & 1
        return (hw.unsqueeze(2) & bit).bool().view(hw.shape[0], words * 32)[:, :width]

    @property
    def valid(self) -> torch.Tensor:
        """Bool (c, F): features that exist for each row's input."""
        return columns(self.f_max, self.n_features.device) < self.n_features.unsqueeze(1)


class Sampler:
    """Base class: ``sample(rows) -> bool (c, F)`` draws the masks of a block of rows.

    Subclasses implement ``sample`` from ``rows.uniform(...)`` (and, for structured
    designs, from ``rows.samples``); ``masks`` adds the common rules (row 0 all ones,
    padded features kept).
    """

    def sample(self, rows: Rows) -> torch.Tensor:
        """Draw the masks of a block of c rows, before the common rules of ``masks``.

        Args:
            rows: the block's coordinates and random numbers.

        Returns:
            Bool (c, F): True where a feature is kept.
        """
        raise NotImplementedError

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> Sampler:
        """The sampler for one call, given its feature map and S (default: itself).

        A design planned from the data (e.g. text's single-mask protocol) overrides it.

        Args:
            features: the call's relabelled feature map (None where a design does not need it).
            n_samples: S, the samples per input.

        Returns:
            The sampler the call draws its masks from.
        """
        return self

    def nested_error(self, f_max: int) -> bool:
        """Whether ``Explanation.coef_se`` reads this design's own error from nested prefixes of a call's samples.

        False here: independent masks, whose error the i.i.d. formula gives (``stages.standard_error``); a design
        whose every prefix is the design of a call at that N, and whose error that formula overstates, says True
        (``stages.design_error``).

        Args:
            f_max: F, the call's widest input's features.
        """
        return False

    def masks(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F) masks of ``rows``: row s = 0 all ones, features f >= F_b kept.

        Args:
            rows: the block's coordinates and random numbers.

        Returns:
            Bool (c, F).
        """
        nf, smp = rows.n_features, rows.samples

        def kept() -> torch.Tensor:  # ~rows.valid | row of sample 0: depends on the coordinates only (kept)
            return (columns(rows.f_max, nf.device) >= nf.unsqueeze(1)) | (smp == 0).unsqueeze(1)

        return self.sample(rows) | derived("kept", kept, nf, smp, extra=rows.f_max)

    def __call__(self, n_features: torch.Tensor, n_samples: int, f_max: int, generator: Seed = None) -> torch.Tensor:
        """All masks (B, S, F) of B inputs at once (the engine draws blocks of rows instead).

        Args:
            n_features: long (B,) F_b per input.
            n_samples: S.
            f_max: F.
            generator: the key's source (see ``make_key``).

        Returns:
            Bool (B, S, F).

        Example:
            >>> BernoulliSampler(0.5)(torch.tensor([3, 2]), 4, 3, generator=0).shape
            torch.Size([2, 4, 3])
        """
        batch, dev = n_features.shape[0], n_features.device
        b = torch.arange(batch, device=dev).repeat_interleave(n_samples)
        s = torch.arange(n_samples, device=dev).repeat(batch)
        rows = Rows(make_key(generator, dev), b, s, n_features[b], f_max)
        return self.masks(rows).view(batch, n_samples, f_max)


@dataclass(frozen=True)
class KeepProbability(Sampler):
    """The base of the samplers that keep a feature with probability ``p`` (checked once here).

    Attributes:
        p: the probability of keeping a feature, in (0, 1).
    """

    p: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < check_positive_float(self.p, "p") < 1.0:
            raise ValueError(f"`p` must be in (0, 1), got {self.p}")


@dataclass(frozen=True)
class BernoulliSampler(KeepProbability):
    """lime's image sampler: every feature kept independently with probability ``p``.

    The number of kept features is Binomial(F, p). lime uses p = 1/2.

    Attributes:
        p: the probability of keeping a feature, in (0, 1).
    """

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): every feature of ``rows`` kept with probability ``p``.

        Args:
            rows: the block's coordinates and random numbers.
        """
        if self.p == 0.5:  # one hash per 32 features
            return rows.bits(3, rows.f_max)
        return rows.uniform(0, rows.f_max) < self.p


@dataclass(frozen=True)
class UniformCountSampler(Sampler):
    """lime's text sampler: remove k ~ U{1..F_b} features, chosen uniformly without replacement."""

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): k ~ U{1..F_b} features of every row removed.

        Args:
            rows: the block's coordinates and random numbers.
        """
        nf = rows.n_features
        k = (rows.uniform(1) * nf).long().clamp_max(nf - 1) + 1  # 1..F_b removed
        return ~random_subset(rows, k)


@dataclass(frozen=True)
class ShapleySampler(Sampler):
    """KernelSHAP's coalition sampler: keep k features with P(k) ∝ (F-1) / (k (F-k)), 1 <= k < F.

    Pair it with ``UniformKernel`` and a plain least-squares surrogate to get a
    Kernel-SHAP-style estimate (with a fixed baseline).
    """

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): k features of every row kept, k drawn from the Shapley kernel's mass per size.

        Args:
            rows: the block's coordinates and random numbers.
        """
        nf = rows.n_features.unsqueeze(1).double()
        k = torch.arange(1, max(rows.f_max, 2), device=nf.device, dtype=torch.float64)  # (F-1,)
        prob = torch.where(k < nf, (nf - 1) / (k * (nf - k)), torch.zeros((), dtype=torch.float64, device=nf.device))
        cdf = prob.cumsum(1)
        u = rows.uniform(1).double().unsqueeze(1) * cdf[:, -1:]
        kept = (cdf <= u).sum(1).clamp_max(k.numel() - 1) + 1  # inverse CDF: 1..F-1
        return random_subset(rows, kept)


def random_subset(rows: Rows, k: torch.Tensor) -> torch.Tensor:
    """Bool (c, F): a uniform random subset of exactly ``k[i]`` of row i's F_b features (k long (c,))."""
    noise = rows.uniform(2, rows.f_max).masked_fill(~rows.valid, 2.0)  # padded features rank last
    rank = noise.argsort(-1).argsort(-1)
    return rank < k.unsqueeze(-1)


def valid_features(n_features: torch.Tensor, f_max: int) -> torch.Tensor:
    """Bool (B, F): True where feature f exists for input b (f < F_b).

    Args:
        n_features: long (B,) F_b per input.
        f_max: F.
    """
    return torch.arange(f_max, device=n_features.device) < n_features.unsqueeze(1)
