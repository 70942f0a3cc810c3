"""KernelSHAP's sampled designs: paired coalitions without replacement, sizes by leverage or by the kernel.

Used by ``kernel_shap.KernelShapSampler`` and ``kernel_shap.ShapleyKernel`` for inputs whose 2^F_b
coalitions do not fit in S samples. The S - 2 rows after the input and the all-hidden coalition are
``P = (S - 2) // 2`` *pairs* (z, 1 - z). The pairs of one input are split among *classes* t = 1 ..
F_b // 2, the pairs {z, 1 - z} with min(|z|, F_b - |z|) = t; class t holds N_t = C(F_b, t) pairs
(C(F_b - 1, t) when 2t = F_b). Class t gets about ``level * a_t`` pairs, all N_t of them where that is
more (water-filling, the same level for every class that is not full), rounded so that the counts add
up to P:

- ``"leverage"`` (Leverage SHAP, Musco & Witter, ICLR 2025): a_t = the number of sizes in the class (2,
  or 1 when 2t = F_b). The leverage score of a coalition of size k in the Shapley-kernel regression with
  the efficiency constraint projected out is 1 / C(F_b, k), so every size holds the same leverage: sizes
  uniformly, coalitions uniformly within a size.
- ``"paired"``: a_t = the Shapley kernel's mass of the class's sizes, (F-1) / (t (F-t)) per size (what
  unpaired KernelSHAP draws its sizes from).

Within a class the pairs are distinct (drawn without replacement): a systematic sample of the class's
coalitions in colexicographic order of a random relabelling of the features, where N_t <= 2^31; beyond,
uniform subsets drawn independently (two equal pairs then have probability below S^2 / 2^33). A row's
regression weight is its Shapley kernel weight over its inclusion probability, pi(F_b, k) N_t / p_t
for a class that got p_t pairs: the reweighted, constrained least squares of Leverage SHAP. Every row
is a pure function of the call's key, its input and its sample index, as for every sampler.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import torch

from torchlime._util.upload import upload
from torchlime.stages.sampling import Rows, random_subset

#: KernelSHAP's designs: "leverage" and "paired" (this module), "plain" (sizes drawn in proportion to the
#: Shapley kernel, with replacement, unpaired: captum's KernelShap; ``sampling.ShapleySampler``)
ShapDesign = Literal["leverage", "paired", "plain"]
DESIGNS: tuple[ShapDesign, ...] = ("leverage", "paired", "plain")

_EXACT = 1 << 31  # classes of at most this many pairs are sampled without replacement by rank
_CAP = 1 << 62  # binomials above this are stored as this (only compared with ranks < _EXACT)
_OFFSET, _RELABEL = 6, 7  # streams of random numbers (per input and class)


@functools.lru_cache(maxsize=64)
def _depth(f_max: int) -> int:
    """The largest class t of any n <= ``f_max`` with at most 2^31 pairs (at most 17)."""
    top = min(f_max, 40)  # C(n, t) grows with n: past n = 35 no class of more than 17 features fits
    pairs = [(t, math.comb(n - (2 * t == n), t)) for n in range(2, top + 1) for t in range(1, n // 2 + 1)]
    return max([0] + [t for t, size in pairs if size <= _EXACT])


@functools.lru_cache(maxsize=16)
def _table(f_max: int, depth: int, device: torch.device) -> torch.Tensor:
    """Long (depth + 1, f_max + 1): C(e, r) for r <= depth and e <= f_max, capped at 2^62."""
    rows = [[min(math.comb(e, r), _CAP) for e in range(f_max + 1)] for r in range(depth + 1)]
    return torch.tensor(rows, dtype=torch.long, device=device)


def class_sizes(n_features: torch.Tensor, f_max: int) -> torch.Tensor:
    """Float64 (c, K) N_t, the pairs of coalitions of class t = 1 .. K = f_max // 2 (0 where t > F_b // 2).

    Args:
        n_features: long (c,) F_b of each row's input.
        f_max: F.

    Returns:
        Float64 (c, K): C(F_b, t), C(F_b - 1, t) when 2t = F_b, exact up to 2^53 (inf past float64's range).

    Example:
        >>> class_sizes(torch.tensor([4, 5]), 5).tolist()
        [[4.0, 3.0], [5.0, 10.0]]
    """
    k = f_max // 2
    dev = n_features.device
    t = torch.arange(1, k + 1, device=dev)
    n = n_features.unsqueeze(1)
    top = torch.where(2 * t == n, n - 1, n)  # (c, K)
    ok = (t <= n // 2) & (top >= t)
    depth = _depth(40)  # the same exact values whatever F (the sampler and the kernel must agree)
    exact = _table(f_max, depth, dev)[t.clamp_max(depth), top.clamp(0, f_max)].double()
    td, topd = t.double(), top.double()
    approx = torch.exp(torch.lgamma(topd + 1) - torch.lgamma(td + 1) - torch.lgamma(topd - td + 1)).round()
    size = torch.where(t <= depth, exact, approx)
    return torch.where(ok, size, torch.zeros_like(size))


def class_counts(n_features: torch.Tensor, n_samples: int, f_max: int, design: ShapDesign) -> torch.Tensor:
    """Long (c, K) p_t, the pairs each class t = 1 .. K = f_max // 2 gets out of P = (S - 2) // 2.

    Water-filling: p_t = min(N_t, level * a_t) with the level that spends P (full classes first:
    N_t / a_t grows with t), rounded cumulatively (the running sums rounded to the nearest integer), so
    the counts add up to P, full classes get exactly N_t and no class more than N_t. Meant for inputs
    with 2^F_b > S (fewer pairs than there are); F_b < 2 gets none.

    Args:
        n_features: long (c,) F_b of each row's input.
        n_samples: S.
        f_max: F.
        design: "leverage" (a_t: the number of sizes in the class) or "paired" (their Shapley kernel mass).

    Returns:
        Long (c, K).

    Example:
        >>> class_counts(torch.tensor([6]), 30, 6, "leverage").tolist()  # 14 pairs, 2.8 per size
        [[6, 5, 3]]
    """
    size = class_sizes(n_features, f_max)  # (c, K)
    k = size.shape[1]
    dev = size.device
    t = torch.arange(1, k + 1, device=dev, dtype=torch.float64)
    n = n_features.unsqueeze(1).double()
    sizes_in = torch.where(2 * t == n, 1.0, 2.0)
    mass = sizes_in if design == "leverage" else sizes_in * (n - 1) / (t * (n - t)).clamp_min(1.0)
    mass = torch.where(size > 0, mass, torch.zeros_like(mass))
    pairs = float((n_samples - 2) // 2)
    inf = torch.full_like(size[:, :1], math.inf)
    ratio = torch.where(size > 0, size / mass.clamp_min(1e-300), inf.expand_as(size))  # grows with t
    zero = torch.zeros_like(inf)
    full_n = torch.cat((zero, size.cumsum(1)), 1)  # (c, K + 1): N of the first j classes
    rest_a = mass.sum(1, keepdim=True) - torch.cat((zero, mass.cumsum(1)), 1)  # a of the others
    level = (pairs - full_n) / rest_a.clamp_min(1e-300)
    below = torch.cat((-inf, ratio), 1)  # ratio of class j (the last full one)
    above = torch.cat((ratio, inf), 1)  # ratio of class j + 1 (the first one not full)
    ok = (below <= level) & (level < above) & (rest_a > 0)
    j = ok.long().argmax(1, keepdim=True)  # the one consistent number of full classes
    best = level.gather(1, j)
    full = torch.arange(1, k + 1, device=dev) <= j
    share = torch.where(full, size, torch.minimum(best * mass, size))
    running = torch.floor(torch.cat((zero, share.cumsum(1)), 1) + 0.5)
    return running.diff(dim=1).clamp_min(0).long()


@functools.lru_cache(maxsize=32)
def _host_plan(f_max: int, n_samples: int, design: ShapDesign) -> tuple[torch.Tensor, torch.Tensor, int, bool]:
    """N_t and p_t (F + 1, K) of every F_b = 0 .. F, on the host, and what the sampled F_b need.

    Returns ``(sizes, counts, depth, subsets)``: ``depth`` the largest class drawn by rank (with a pair,
    N_t <= 2^31), ``subsets`` whether a class with pairs is drawn as independent subsets (N_t > 2^31).
    """
    n = torch.arange(f_max + 1)
    size, count = class_sizes(n, f_max), class_counts(n, n_samples, f_max, design)
    sampled = n.double().exp2() > n_samples  # the others are enumerated
    drawn = (count > 0) & sampled.unsqueeze(1)
    by_rank = drawn & (size <= _EXACT)
    t = torch.arange(1, size.shape[1] + 1).expand_as(size)
    depth = int(t[by_rank].max()) if bool(by_rank.any()) else 0
    return size, count, depth, bool((drawn & ~by_rank).any())


@functools.lru_cache(maxsize=32)
def plan(f_max: int, n_samples: int, design: ShapDesign, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """N_t (float64) and p_t (long), (F + 1, K) tables indexed by F_b, on ``device`` (computed once per call shape).

    Args:
        f_max: F.
        n_samples: S.
        design: "leverage" or "paired".
        device: where the tables go.

    Returns:
        ``(class_sizes, class_counts)`` of every F_b = 0 .. F.
    """
    size, count, _, _ = _host_plan(f_max, n_samples, design)
    return upload(size, torch.float64, device), upload(count, torch.long, device)


def sample_pairs(rows: Rows, n_samples: int, design: ShapDesign) -> torch.Tensor:
    """Bool (c, F): the coalitions of rows s >= 2 of sampled inputs (see the module's description).

    Row s = 2 + 2q + h is pair q's coalition z (h = 0: the class's smaller side) or its complement
    (h = 1); rows past the last pair (odd S - 2) keep every feature (the grand coalition, weight 0).
    Rows s < 2 get a valid but unused coalition (the sampler overwrites them).

    Args:
        rows: the block's coordinates and random numbers.
        n_samples: S.
        design: "leverage" or "paired".

    Returns:
        Bool (c, F).
    """
    nf, f_max = rows.n_features, rows.f_max
    sizes, count_table = plan(f_max, n_samples, design, nf.device)
    _, _, depth, any_drawn = _host_plan(f_max, n_samples, design)
    counts = count_table[nf]  # (c, K)
    q = (rows.samples - 2).clamp_min(0) // 2
    ends = counts.cumsum(1)
    cls = (ends <= q.unsqueeze(1)).sum(1).clamp_max(max(counts.shape[1] - 1, 0))  # 0-based class
    start = ends.gather(1, cls.unsqueeze(1)).squeeze(1) - counts.gather(1, cls.unsqueeze(1)).squeeze(1)
    got = counts.gather(1, cls.unsqueeze(1)).squeeze(1).clamp_min(1)
    n_pairs = sizes[nf].gather(1, cls.unsqueeze(1)).squeeze(1)
    t = cls + 1
    # per (input, class): a random offset of the systematic sample and a random relabelling of the features
    per_class = Rows(rows.key, rows.inputs, t, nf, f_max, rows.positions)
    u = per_class.uniform(_OFFSET).double()
    rank = torch.floor(((q - start).double() + u) * n_pairs / got.double())
    rank = torch.minimum(rank, n_pairs - 1).clamp_min(0)
    exact = n_pairs <= _EXACT
    noise = per_class.uniform(_RELABEL, f_max).masked_fill(~rows.valid, 2.0)
    virtual = unrank(torch.where(exact, rank, torch.zeros_like(rank)).long(), torch.where(exact, t, 0), f_max, depth)
    small = torch.zeros_like(virtual).scatter(1, noise.argsort(-1), virtual)
    if any_drawn:  # classes of more than 2^31 pairs (F_b >= 35): uniform subsets, both rows of a pair from one
        first = Rows(rows.key, rows.inputs, 2 + 2 * q, nf, f_max, rows.positions)
        small = torch.where(exact.unsqueeze(1), small, random_subset(first, t))
    second = ((rows.samples - 2) % 2 == 1).unsqueeze(1)
    z = torch.where(second, ~small, small)
    past = (q >= ends[:, -1]).unsqueeze(1) if ends.shape[1] else torch.ones_like(second)
    return z | past


def unrank(rank: torch.Tensor, size: torch.Tensor, f_max: int, steps: int | None = None) -> torch.Tensor:
    """Bool (c, F): the subset of ``size`` elements with colexicographic rank ``rank`` (rank = sum C(e_i, i)).

    The i-th largest element is the largest e with C(e, size - i + 1) <= the rank left, found by one
    binary search per row in a ladder of the columns C(., r) of Pascal's triangle; one step per element, at
    most ``_depth(f_max)`` (17) steps, each over the c rows at once.

    Args:
        rank: long (c,) ranks, 0 <= rank < min(C(F, size), 2^31).
        size: long (c,) subset sizes, at most ``steps`` (0: the empty set).
        f_max: F.
        steps: the largest size (None: ``_depth(f_max)``, the largest a rank below 2^31 can have).

    Returns:
        Bool (c, F).

    Example:
        >>> unrank(torch.tensor([0, 1, 2, 3]), torch.tensor([2, 2, 2, 2]), 4).int().tolist()
        [[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]]
    """
    depth = _depth(f_max)
    n_steps = min(depth if steps is None else steps, f_max)
    ladder = _ladder(f_max, depth, rank.device)  # row r: C(e, r) (capped at 2^32) + r 2^33, e < F: sorted
    left, placed = rank, []
    for step in range(n_steps):  # one element per step (a bounded loop, not over samples or features)
        r = (size - step).clamp_min(0)  # the elements still to place
        on = r >= 1
        below = torch.searchsorted(ladder, left + (r << 33), right=True)  # entries <= the rank left
        e = (below - r * f_max - 1).clamp(0, f_max - 1)  # the largest e with C(e, r) <= left
        left = torch.where(on, left - (ladder[r * f_max + e] - (r << 33)), left)
        placed.append(torch.where(on, e, f_max))  # f_max: a column past the end, dropped
    out = torch.zeros(rank.shape[0], f_max + 1, dtype=torch.bool, device=rank.device)
    if placed:
        out = out.scatter(1, torch.stack(placed, 1), True)
    return out[:, :f_max]


@functools.lru_cache(maxsize=16)
def _ladder(f_max: int, depth: int, device: torch.device) -> torch.Tensor:
    """Long ((depth + 1) F,): row r holds min(C(e, r), 2^32) + r 2^33 for e < F (sorted as a whole)."""
    values = [min(math.comb(e, r), 1 << 32) + (r << 33) for r in range(depth + 1) for e in range(f_max)]
    return torch.tensor(values, dtype=torch.long, device=device)


def design_weights(
    n_features: torch.Tensor, kept: torch.Tensor, n_samples: int, f_max: int, design: ShapDesign
) -> torch.Tensor:
    """Float64 (g, r): a sampled row's weight pi(F_b, k) N_t / p_t (Shapley kernel over inclusion probability).

    With pi(F, k) = (F-1) / (C(F, k) k (F-k)) and N_t = C(F, k) (half of it when 2k = F), this is
    (F-1) / (k (F-k) p_t), halved when 2k = F; 0 for k = 0 and k = F_b.

    Args:
        n_features: long (g, 1) F_b of each input.
        kept: long (g, r) the kept features of each row, 0 <= k <= F_b.
        n_samples: S.
        f_max: F.
        design: "leverage" or "paired".

    Returns:
        Float64 (g, r).

    Example:
        >>> w = design_weights(torch.tensor([[6]]), torch.tensor([[1, 5, 2, 3, 6]]), 30, 6, "leverage")
        >>> w.round(decimals=4).tolist()  # counts (6, 5, 3): 5 / (1 * 5 * 6), 5 / (2 * 4 * 5), 5 / (3 * 3 * 3) / 2
        [[0.1667, 0.1667, 0.125, 0.0926, 0.0]]
    """
    counts = plan(f_max, n_samples, design, n_features.device)[1][n_features.reshape(-1)].double()  # (g, K)
    t = torch.minimum(kept, n_features - kept)  # (g, r)
    inner = t >= 1
    got = counts.gather(1, (t - 1).clamp(0, max(counts.shape[1] - 1, 0))) if counts.shape[1] else torch.ones_like(kept)
    nd, kd = n_features.double(), kept.double()
    half = torch.where(2 * kept == n_features, 0.5, 1.0)
    w = half * (nd - 1) / (kd * (nd - kd)).clamp_min(1.0) / got.double().clamp_min(1.0)
    return torch.where(inner, w, torch.zeros_like(w))
