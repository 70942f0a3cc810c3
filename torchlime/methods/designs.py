"""Sample-efficient mask designs: the same explanation from fewer model calls.

``StratifiedSampler`` (stratified coalition sizes), ``AntitheticSampler`` (pairs of complementary
masks) and ``SobolSampler`` (quasi-random masks) are ``sampling.Sampler`` subclasses, counter-based
like the others (any block of rows can be drawn on its own), and every prefix of samples 1..S' is
itself a good design, so they suit ``n_samples="auto"``, which draws in rounds.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from torchlime.methods.aberration import BITS, MAX_FEATURES, raises_rank, row_of
from torchlime.methods.aberration import columns as factorial_columns
from torchlime.stages.features import FeatureMap
from torchlime.stages.fixed_cost import ShapeCache, columns
from torchlime.stages.sampling import (
    BernoulliSampler,
    KeepProbability,
    Rows,
    Sampler,
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


#: the hash stream of the Sobol design's digital shift (one hash word per input and feature)
_SHIFT_STREAM = 11

#: per (F, device): bit 29 of every direction number, float (30, F)
_LEADING: ShapeCache[torch.Tensor] = ShapeCache()


def _leading_bits(f_max: int, device: torch.device) -> torch.Tensor:
    """Float (30, F): bit 29 (the leading one) of direction number b of feature f over 2^b, made once per F and device.

    A row of sample bits weighted 2^b (``s & 2^b``) times this table counts the set bits exactly (powers of two).
    """

    def make() -> torch.Tensor:
        top = (_directions(max(f_max, 1))[:f_max] >> (_SOBOL_BITS - 1)).t().double()
        return (top / 2.0 ** torch.arange(_SOBOL_BITS, dtype=torch.float64).unsqueeze(1)).float().to(device)

    return _LEADING.get(None, (f_max, str(device)), make)


#: per (F, device): the factorial design's columns of every input width up to F
_FACTORIAL: ShapeCache[torch.Tensor] = ShapeCache()


def _factorial_bits(f_max: int, device: torch.device) -> torch.Tensor:
    """Float (F + 1, 30, F): entry [F_b, b, j] bit b of column j of an input of F_b features over 2^b, made once.

    The columns: bits 0..12 ``aberration.columns(F_b)``, bits 13..29 Sobol's leading bits of dimension j, one
    flipped where a bit would repeat earlier masks (``_raising``; Sobol's columns in the padding past F_b, which
    no fit reads); F <= 64 (``FactorialSampler.sample``). A row
    of sample bits weighted 2^b times one width's table counts the set bits of ``s & column`` exactly.
    """

    def make() -> torch.Tensor:
        lead = _directions(max(f_max, 1))[:f_max] >> (_SOBOL_BITS - 1)  # (F, 30): 0 or 1
        sobol = (lead << torch.arange(_SOBOL_BITS)).sum(1)  # (F,) Sobol's columns as ints
        table = sobol.repeat(f_max + 1, 1)  # (F + 1, F)
        low = (1 << BITS) - 1
        for f_b in range(1, f_max + 1):  # a loop over widths, once per F
            own = [(int(c) & ~low) | o for c, o in zip(sobol[:f_b].tolist(), factorial_columns(f_b))]
            table[f_b, :f_b] = torch.tensor(_raising(own, f_b), dtype=torch.long)
        bits = (table.unsqueeze(1) >> torch.arange(_SOBOL_BITS).view(1, -1, 1)) & 1  # (F + 1, 30, F)
        scale = 2.0 ** torch.arange(_SOBOL_BITS, dtype=torch.float64).view(1, -1, 1)
        return (bits.double() / scale).float().to(device)

    return _FACTORIAL.get(None, (f_max, str(device)), make)


def _raising(cols: list[int], n_features: int) -> list[int]:
    """The columns with every bit past ``BITS`` raising the rank until it is F: Sobol's, or its first flip that does.

    No prefix of 2^b samples repeats the masks of the first half before all 2^F are drawn
    (``aberration.raises_rank``).
    """
    rows = [row_of(cols, b) for b in range(BITS)]
    for b in range(BITS, _SOBOL_BITS):
        row = row_of(cols, b)
        if not raises_rank(rows, row, n_features):
            j = next(j for j in range(n_features) if raises_rank(rows, row ^ (1 << j), n_features))
            cols[j] ^= 1 << b
            row ^= 1 << j
        rows.append(row)
    return cols


def _shift_words(rows: Rows) -> torch.Tensor:
    """Long (c, F) 32-bit hash words of each row's input and feature, the same for every sample of an input.

    The input's own index stands in the sample's place, so one hash call gives a per-input digital shift.
    """
    return Rows(rows.key, rows.inputs, rows.inputs, rows.n_features, rows.f_max).words(_SHIFT_STREAM, rows.f_max)


def sobol_width(n_samples: int) -> int:
    """The most features whose columns stay distinct (up to complement) in the first S Sobol points at p = 1/2.

    A feature's column is the parity of the sample's bits with its direction numbers' leading bits, so
    samples 1..S-1 (about log2 S bits) tell at most 2^floor(log2(S - 1)) / 2 features apart: beyond that,
    features share a column (up to the digital shift) and no fit can tell their effects apart.

    Args:
        n_samples: S, the samples per input (sample 0 is the unperturbed input).

    Returns:
        The width, at least 1.

    Example:
        >>> sobol_width(250), sobol_width(1000), sobol_width(100)
        (64, 256, 32)
    """
    return max(1, (1 << max(int(n_samples) - 1, 1).bit_length() - 1) // 2)


@dataclass(frozen=True)
class SobolSampler(KeepProbability):
    """Quasi-random masks: feature f kept when coordinate f of the shifted Sobol point s is below ``p``.

    One dimension per feature, with a random digital shift per input drawn from the call's key. At
    ``p = 1/2`` only the leading bit of each coordinate decides, the parity of a product of the
    sample's bits with the direction numbers' leading bits: one small matrix product.

    Attributes:
        p: the probability of keeping a feature, in (0, 1).
        fallback: the sampler of calls with more features than the first S points tell apart (``sobol_width``)
            or than the Sobol tables' 21201 dimensions (None: Sobol masks for the first, an error for the
            second).

    Raises:
        ValueError: for more than 21201 features without a ``fallback``.
    """

    fallback: Optional[Sampler] = None

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> Sampler:
        """Itself, or ``fallback`` where the call has more features than its S points tell apart (``sobol_width``).

        Args:
            features: the call's feature map (None: itself).
            n_samples: S, the samples per input.

        Returns:
            The sampler the call draws from.
        """
        if self.fallback is not None and features is not None and features.f_max > sobol_width(n_samples):
            return self.fallback.bind(features, n_samples)
        return self

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): the shifted Sobol points of the rows' samples, below ``p``.

        Args:
            rows: the block's coordinates and random numbers.
        """
        if rows.f_max > torch.quasirandom.SobolEngine.MAXDIM:
            if self.fallback is not None:
                return self.fallback.sample(rows)
            raise ValueError(
                f"SobolSampler handles up to {torch.quasirandom.SobolEngine.MAXDIM} features (pass "
                f"`fallback=` for wider calls), got {rows.f_max}"
            )
        dev = rows.samples.device
        if self.p == 0.5:  # u < 1/2: bit 29 of (point ^ shift) is 0, i.e. the two leading bits agree
            powers = (rows.samples.unsqueeze(1) & columns(_SOBOL_BITS, dev, shift=True)).float()  # (c, 30): 2^b or 0
            leading = torch.fmod(powers @ _leading_bits(rows.f_max, dev), 2.0)  # (c, F) the parity: 0. or 1.
            return leading == _shift_words(rows) >> 31
        v = _directions(max(rows.f_max, 1)).to(dev)[: rows.f_max]  # (F, 30)
        x = torch.zeros(rows.samples.shape[0], rows.f_max, dtype=torch.long, device=dev)
        for bit in range(_SOBOL_BITS):  # Gray-code-free Sobol: XOR the direction numbers of the set bits
            on = ((rows.samples >> bit) & 1).bool().unsqueeze(1)
            x = torch.where(on, x ^ v[:, bit], x)
        shift = _shift_words(rows) >> (32 - _SOBOL_BITS)  # a random digital shift per input and feature
        u = (x ^ shift).double() / (1 << _SOBOL_BITS)
        return u < self.p


@dataclass(frozen=True)
class FactorialSampler(SobolSampler):
    """Two-level fractional factorial masks of small aberration (``methods.aberration``), at p = 1/2.

    ``SobolSampler``'s masks at p = 1/2 (feature f kept by the parity of the sample's bits with its column,
    a random digital shift per input) with other columns: a fold-over whose first 2^k samples alias no main
    effect with a two-factor interaction at any N and far fewer with three-factor ones than Sobol's leading
    bits (``aberration.word_lengths``), so additive-plus-low-order models are fitted closer at equal N. Nested:
    any prefix of samples is the design a call at that N draws. Calls with more than 64 features draw
    Sobol's columns.

    Attributes:
        p: 0.5 (a two-level design keeps each feature half of the time).
        fallback: as ``SobolSampler``'s.

    Raises:
        ValueError: for p other than 0.5.
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.p != 0.5:
            raise ValueError(f"`p` must be 0.5 for FactorialSampler (a two-level design), got {self.p}")

    def nested_error(self, f_max: int) -> bool:
        """True up to 64 features: ``coef_se`` reads the design's own error from nested prefixes.

        Its intervals from the i.i.d. formula held the large-N answer 99-100 % of the time (``stages.design_error``).

        Args:
            f_max: F, the call's widest input's features (wider calls draw Sobol's columns: False).
        """
        return f_max <= MAX_FEATURES

    def sample(self, rows: Rows) -> torch.Tensor:
        """Bool (c, F): the parity of each row's sample bits with its input's columns, against the shift.

        Every input draws the columns of its own width F_b (``_factorial_bits``), so the inputs of a batch
        get the designs they would get alone.

        Args:
            rows: the block's coordinates and random numbers.
        """
        if rows.f_max > MAX_FEATURES:  # Sobol's columns for every width: SobolSampler's masks
            return super().sample(rows)
        dev = rows.samples.device
        powers = (rows.samples.unsqueeze(1) & columns(_SOBOL_BITS, dev, shift=True)).float()  # (c, 30): 2^b or 0
        table = _factorial_bits(rows.f_max, dev)[rows.n_features]  # (c, 30, F): each row its width's
        count = torch.bmm(powers.unsqueeze(1), table).squeeze(1)  # (c, F): the set bits of s & column
        return torch.fmod(count, 2.0) == _shift_words(rows) >> 31
