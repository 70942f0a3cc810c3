"""lime's tabular neighbourhood as a sampler (the binary rows) and a ``perturb_fn`` (the values).

lime draws a value for every column, then marks whether it lands in the instance's level
(bin or category). The same joint law, factored "mask first, value given the mask", fits the
engine's stages: with ``P_b,f`` the probability that column f of a sample of input b lands
in the instance's level,

    Z[b, s, f] ~ Bernoulli(P_b,f)                                  (``TabularSampler``)
    value | Z  ~ the column's law restricted to the instance's level (Z = 1)
                 or to the other levels (Z = 0)                      (``TabularPerturbation``)

* discretised sampling (lime's default): levels are drawn by training frequency ``freq``;
  ``P = freq[level of x]``; a bin's value is a normal with the bin's training mean and std,
  truncated to the bin's range (lime's ``undiscretize``); a category is its value;
* Gaussian sampling (``discretize_continuous=False``): ``value = c + scale · z``, z ~ N(0, 1),
  c the training mean (lime) or the instance (``sample_around_instance``); ``P`` is the
  normal mass of the instance's bin ``Φ(b) - Φ(a)``; categorical columns as above.

``stats.gaussian_draws`` draws lime's undiscretised neighbourhood itself (the raw values of every column,
no masks): lime's ``LimeTabularExplainer(discretize_continuous=False)`` fits its surrogate on those
values, scaled, rather than on "same level" masks.

Values are drawn by inverse CDF from counter-based uniforms (``Rows``: a hash of the seed, the
input's index, the sample and the column), so every row is the same whatever the chunking,
the device or the other inputs, and the values always agree with the masks they are given
(masks from any sampler, or a metric's, are valid). Sample 0 is the input itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Optional

import torch

from torchlime.stages.perturb.blend import Chunk
from torchlime.stages.sampling import Rows, Sampler, make_key
from torchlime.tabular.stats import TabularStats

_MASK, _LEVEL, _VALUE = 101, 102, 103  # hash streams (the engine's samplers use 0..3)
_TINY = 1e-300


def _ndtr(x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = torch.special.ndtr(x)  # torch.special is untyped
    return out


def truncated_normal(u: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Standard normal values truncated to [a, b], by inverse CDF of uniforms u in [0, 1).

    ``z = Φ⁻¹(Φ(a) + u (Φ(b) - Φ(a)))``, computed in the lower tail (by symmetry when a > 0)
    so that far tails keep their precision; results are clamped to [a, b].

    Example:
        >>> z = truncated_normal(torch.rand(1000, dtype=torch.float64), torch.tensor(1.0), torch.tensor(2.0))
        >>> bool(((z >= 1) & (z <= 2)).all())
        True
    """
    return _truncated(u, *_truncation(a, b))


def _truncation(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """``truncated_normal``'s constants of the bounds [a, b]: (flip, lo, hi, Φ(lo), Φ(hi)), lower tail."""
    flip = a > 0
    lo, hi = torch.where(flip, -b, a), torch.where(flip, -a, b)
    return flip, lo, hi, _ndtr(lo), _ndtr(hi)


def _truncated(
    u: torch.Tensor, flip: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, cl: torch.Tensor, ch: torch.Tensor
) -> torch.Tensor:
    """``truncated_normal`` from the uniforms and the bounds' constants (``_truncation``)."""
    c = (cl + u * (ch - cl)).clamp(_TINY, 1.0 - 2.0**-53)
    z = torch.maximum(torch.minimum(torch.special.ndtri(c), hi), lo)
    return torch.where(flip, -z, z)


def outside_normal(u: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Standard normal values outside [a, b] (both tails, by their masses), from uniforms u.

    Where [a, b] holds all the mass, the values fall inside it (``truncated_normal``).
    """
    left, right = _ndtr(a), _ndtr(-b)
    t = u * (left + right)
    zl = torch.minimum(torch.special.ndtri(t.clamp_min(_TINY)), a)
    zr = torch.maximum(-torch.special.ndtri((t - left).clamp_min(_TINY)), b)
    z = torch.where(t < left, zl, zr)
    return torch.where(left + right > 0, z, truncated_normal(u, a, b))


def normal_mass(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``Φ(b) - Φ(a)``, computed in the lower tail."""
    return torch.where(a > 0, _ndtr(-a) - _ndtr(-b), _ndtr(b) - _ndtr(a))


def instance_bounds(stats: TabularStats, levels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, D) lower and upper boundary of every instance's bin (±inf at the ends; unused for categories)."""
    q = stats.boundaries
    d, width = q.shape
    inf = torch.full((d, 1), math.inf, dtype=q.dtype, device=q.device)
    lower = torch.cat((-inf, q), 1).gather(1, levels.T.clamp(0, width)).T  # q_{k-1}, -inf for k = 0
    upper = torch.cat((q, inf), 1).gather(1, levels.T.clamp(0, width)).T  # q_k, +inf past the last
    return lower, upper


def keep_probability(stats: TabularStats, levels: torch.Tensor, centre: Optional[torch.Tensor]) -> torch.Tensor:
    """P (B, D): probability that a sampled value falls in the instance's level.

    Args:
        stats: the training statistics (``fit_stats``).
        levels: long (B, D) the instances' levels (``TabularStats.levels``).
        centre: None for discretised sampling, else (B or 1, D) the Gaussian's centre.
    """
    freq = stats.freq.T.gather(0, levels.clamp_min(0)).masked_fill(levels < 0, 0.0)  # unseen: never drawn
    if centre is None:
        return freq
    lower, upper = instance_bounds(stats, levels)
    mass = normal_mass((lower - centre) / stats.scale, (upper - centre) / stats.scale)
    return torch.where(stats.categorical, freq, mass)


class TabularSampler(Sampler):
    """Masks ``Z[b, s, f] ~ Bernoulli(keep[b, f])``: does column f stay in input b's level.

    Args:
        keep: (B, D) probabilities (``keep_probability``).
    """

    def __init__(self, keep: torch.Tensor) -> None:
        self.keep = keep

    def sample(self, rows: Rows) -> torch.Tensor:
        pos = rows.inputs if rows.positions is None else rows.positions
        return rows.uniform(_MASK, rows.f_max).double() < self.keep[pos, : rows.f_max]

    def __repr__(self) -> str:
        return f"TabularSampler(inputs={self.keep.shape[0]}, columns={self.keep.shape[1]})"


@dataclass(frozen=True, eq=False)
class TabularPerturbation:
    """The engine's ``perturb_fn`` for tabular rows: the values of a chunk given its masks.

    Attributes:
        stats: the training statistics.
        levels: long (B, D) the instances' levels.
        centre: None (discretised sampling) or (B or 1, D) the Gaussian's centre.
        seed: the call's int seed.
        ids: long (B,) every input's index (its randomness).
        given: optional (B, S, D) explicit sample rows (e.g. lime's own), used instead.
    """

    stats: TabularStats
    levels: torch.Tensor
    centre: Optional[torch.Tensor]
    seed: int
    ids: torch.Tensor
    given: Optional[torch.Tensor] = None

    def __call__(self, inputs: torch.Tensor, baseline: object, index: object, chunk: Chunk) -> torch.Tensor:
        """Rows (c, D) in the inputs' dtype: perturbed values, the input itself for sample 0."""
        b, s, d = chunk.rows, chunk.samples, self.stats.n_columns
        keep = chunk.masks[:, :d]
        original = inputs[b]
        if self.given is not None:
            return self.given[b, s].to(inputs.dtype)
        rows = Rows(make_key(self.seed, inputs.device), self.ids[b], s, torch.full_like(b, d), d)
        out = self.values(rows, b, keep, original.double())
        exact = (s == 0) & keep.all(1)
        return torch.where(exact.unsqueeze(1), original, out.to(inputs.dtype))

    def values(self, rows: Rows, b: torch.Tensor, keep: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
        """Float64 (c, D) values of rows of inputs b with masks keep (c, D).

        Args:
            rows: the chunk's rows (``Rows``: the counter-based uniforms of every sample).
            b: long (c,) the input of every row.
            keep: bool (c, D) masks: True where the value stays in the instance's level.
            original: float64 (c, D) the inputs' own values (used for unseen categories).
        """
        st = self.stats
        lev = self.levels[b]  # (c, D)
        u = rows.uniform(_VALUE, st.n_columns).double() + 2.0**-25  # 24-bit uniforms, centred in their cells
        level = torch.where(keep, lev, self._other_level(rows, lev))
        if self.centre is None:  # a bin's value: normal truncated to the bin's range; a category's value
            value, lo, hi, mu, signed_sd, t_lo, t_hi, c_lo, width = self._pick(self._bin_tables, level)
            c = (c_lo + u * width).clamp(_TINY, 1.0 - 2.0**-53)  # ``_truncated``, its flip folded into the std
            z = torch.maximum(torch.minimum(torch.special.ndtri(c), t_hi), t_lo)
            numeric = torch.minimum(torch.maximum(mu + signed_sd * z, lo), hi)
        else:  # Gaussian around the centre, inside or outside the instance's bin
            (value,) = self._pick(st.values.nan_to_num(0.0).unsqueeze(-1), level)
            lower, upper = instance_bounds(st, lev)
            c = self.centre.expand_as(self.levels)[b]
            a, bb = (lower - c) / st.scale, (upper - c) / st.scale
            z = torch.where(keep, truncated_normal(u, a, bb), outside_normal(u, a, bb))
            numeric = c + st.scale * z
        category = torch.where(level >= 0, value, original)
        return torch.where(st.categorical, category, numeric)

    @staticmethod
    def _pick(tables: torch.Tensor, level: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """K (c, D) views: the entries of K tables (stacked (D, V, K)) at every row's level (c, D) of each column.

        One ``index_select`` of whole K-entry rows: on the CPU about 2.5x faster than K gathers of one
        table each (5000 x 64 entries, K = 10: 4.2 against 10.8 ms).
        """
        d, v, k = tables.shape
        at = torch.arange(d, device=level.device) * v + level.clamp_min(0)
        return tables.reshape(d * v, k).index_select(0, at.reshape(-1)).view(*level.shape, k).unbind(-1)

    @cached_property
    def _bin_tables(self) -> torch.Tensor:
        """(D, V, 9) tables per (column, level), built once a call instead of once a value.

        The category's value, the bin's range, mean and std (negated where ``_truncation`` flips to the
        lower tail: mu + (-sd) z is mu + sd (-z) exactly), and its truncated normal's bounds, Φ(lower)
        and Φ(upper) - Φ(lower).
        """
        st = self.stats
        lo, hi, mu, sd = st.level_lo, st.level_hi, st.level_mean, st.level_std
        flip, t_lo, t_hi, c_lo, c_hi = _truncation((lo - mu) / sd, (hi - mu) / sd)
        tables = (st.values.nan_to_num(0.0), lo, hi, mu, torch.where(flip, -sd, sd), t_lo, t_hi, c_lo, c_hi - c_lo)
        return torch.stack(tables, -1)

    @cached_property
    def _other_cumulative(self) -> torch.Tensor:
        """(D, V + 1, V): per column, the cumulative training frequency of its other levels.

        Row l leaves level l out; row V leaves none out (an unseen category).
        """
        freq = self.stats.freq
        v = freq.shape[1]
        out = torch.eye(v + 1, v, dtype=torch.bool, device=freq.device)  # (V + 1, V): row l drops level l
        return freq.unsqueeze(1).masked_fill(out, 0.0).cumsum(-1)

    def _other_level(self, rows: Rows, lev: torch.Tensor) -> torch.Tensor:
        """Long (c, D): a level other than the instance's, drawn by training frequency.

        The instance's own level where no other has mass.
        """
        table = self._other_cumulative
        d, v1, v = table.shape
        at = torch.arange(d, device=lev.device) * v1 + torch.where(lev >= 0, lev, v)
        cum = table.reshape(d * v1, v).index_select(0, at.reshape(-1)).view(*lev.shape, v)  # (c, D, V)
        total = cum[..., -1]
        t = rows.uniform(_LEVEL, lev.shape[1]).double() * total
        drawn = (cum <= t.unsqueeze(-1)).sum(-1).clamp_max(v - 1)
        return torch.where(total > 0, drawn, lev)
