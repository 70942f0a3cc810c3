"""shap's KernelSHAP coalitions for M varying features: enumerated subset sizes first, then drawn ones.

The rules are shap's ``KernelExplainer`` ones (``nsamples="auto"`` = 2M + 2048, at most 2^M - 2 when
M <= 30, 2^30 otherwise): subset sizes k = 1 .. ceil((M-1)/2) carry the Shapley kernel's mass
(M-1) / (k (M-k)), doubled for the sizes whose complement (size M-k) differs; a size whose subsets
(with their complements) all fit in the samples left, given its share of the mass, is enumerated,
each subset weighing its Shapley kernel value; the samples left are drawn: a size by the remaining
mass, then that many features uniformly, with the complement beside it. A drawn coalition seen
before adds 1 to its weight (and its complement's) instead of taking a sample; 4x the samples left
are drawn at most. The drawn weights are scaled to the mass left over by the enumerated sizes, so
all weights sum to 1.

Everything is vectorised: the enumerated subsets come from ``itertools.combinations`` in C, the draws
of a group of inputs are one tensor, and the repeats are found with ``torch.unique``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from torchlime.methods.kernel_shap import shapley_kernel

_WORD = 62  # bits per int64 word of a packed coalition (the sign bit left alone)


def effective_nsamples(nsamples: int, m: int) -> tuple[int, int]:
    """The sample count (shap's rule) for M varying features and the size of the coalition space it is compared with.

    Args:
        nsamples: the samples asked for.
        m: M, the varying features.

    Returns:
        ``(samples, max_samples)``: samples = min(nsamples, 2^M - 2) for M <= 30, else nsamples; max_samples
        = 2^M - 2 for M <= 30, else 2^30.
    """
    if m <= 30:
        top = 2**m - 2
        return min(nsamples, top), top
    return nsamples, 2**30


@dataclass(frozen=True)
class Plan:
    """The enumerated part of the design for M features (shared by every input with that M).

    Attributes:
        m: M.
        samples: the samples per input (``effective_nsamples``).
        enumerated: bool (E, M) the enumerated coalitions (with their complements).
        weights: float64 (E,) their weights.
        full: how many subset sizes were enumerated.
        mass: float64 (ceil((M-1)/2),) the normalised mass of each subset size (doubled for paired ones).
        paired: how many sizes have a distinct complement size (floor((M-1)/2)).
    """

    m: int
    samples: int
    enumerated: torch.Tensor
    weights: torch.Tensor
    full: int
    mass: np.ndarray
    paired: int


def _combinations(m: int, k: int) -> torch.Tensor:
    """Bool (C(m, k), m): every subset of k of m features, in ``itertools`` order."""
    count = math.comb(m, k)
    flat = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(m), k)), np.int64, count * k)
    out = torch.zeros(count, m, dtype=torch.bool)
    out.scatter_(1, torch.from_numpy(flat).view(count, k), True)
    return out


def plan(m: int, nsamples: int) -> Plan:
    """The sizes shap enumerates for M features and ``nsamples`` samples, with their coalitions and weights.

    Args:
        m: M >= 2.
        nsamples: the samples asked for (>= 1).

    Returns:
        The ``Plan``.
    """
    samples = effective_nsamples(nsamples, m)[0]
    sizes = int(np.ceil((m - 1) / 2.0))
    paired = int(np.floor((m - 1) / 2.0))
    k = np.arange(1, sizes + 1)
    mass = (m - 1.0) / (k * (m - k))
    mass[:paired] *= 2
    mass /= np.sum(mass)
    left, remaining, full = samples, mass.copy(), 0
    parts, weights = [torch.zeros(0, m, dtype=torch.bool)], [torch.zeros(0, dtype=torch.float64)]
    # the raw Shapley kernel sums to this over one representative of every (paired) size: its scale
    norm = float(np.sum((m - 1.0) / (k * (m - k)) * np.where(k <= paired, 2.0, 1.0)))
    for size in range(1, sizes + 1):  # at most M/2 sizes, each one tensor
        subsets = math.comb(m, size) * (2 if size <= paired else 1)
        if left * remaining[size - 1] / subsets < 1.0 - 1e-8:
            break
        full += 1
        left -= subsets
        if remaining[size - 1] < 1.0:
            remaining /= 1 - remaining[size - 1]
        chosen = _combinations(m, size)
        if size <= paired:  # each subset followed by its complement
            chosen = torch.stack((chosen, ~chosen), 1).view(-1, m)
        parts.append(chosen)
        w = shapley_kernel(torch.tensor(m), torch.tensor(size)) / norm
        weights.append(w.expand(chosen.shape[0]))
    return Plan(m, samples, torch.cat(parts), torch.cat(weights), full, mass, paired)


def _keys(masks: torch.Tensor) -> torch.Tensor:
    """Long (G, D): a key per coalition (G, D, M), equal exactly when two coalitions of a row are.

    Up to 62 features the key is the coalition's bit field (feature j: bit j), packed by numpy's ``packbits``
    (a multiply-and-sum over (G, D, M) longs took ten times longer); beyond, the rank of its words.
    """
    g, d, m = masks.shape
    words = max(1, -(-m // _WORD))
    if words == 1:
        field = np.packbits(masks.numpy(), axis=-1, bitorder="little")  # (G, D, ceil(M / 8)) bytes
        wide = np.zeros((g, d, 8), dtype=np.uint8)
        wide[..., : field.shape[-1]] = field
        return torch.from_numpy(wide.view("<i8")[..., 0].astype(np.int64))
    padded = torch.nn.functional.pad(masks.long(), (0, words * _WORD - m))
    bits = torch.ones(_WORD, dtype=torch.long) << torch.arange(_WORD)
    packed = (padded.view(g, d, words, _WORD) * bits).sum(-1)  # (G, D, W) bit fields
    rows = torch.arange(g).view(g, 1, 1).expand(g, d, 1)
    inverse: torch.Tensor = torch.unique(torch.cat((rows, packed), -1).view(g * d, -1), dim=0, return_inverse=True)[1]
    return inverse.view(g, d)


def _draw(p: Plan, inputs: int, draws: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``draws`` coalitions per input: sizes by the mass left (``size`` (G, D)), then uniform subsets (G, D, M)."""
    share = p.mass.copy()
    share[: p.paired] /= 2  # a paired draw brings two coalitions
    share = share[p.full :] / np.sum(share[p.full :])
    probs = torch.from_numpy(share).expand(inputs, -1).contiguous()
    size = torch.multinomial(probs, draws, True, generator=generator) + p.full + 1
    noise = torch.rand(inputs, draws, p.m, generator=generator)
    # numpy sorts short rows an order of magnitude faster than torch (same values: a sort is a sort)
    ordered = torch.from_numpy(np.sort(noise.numpy(), axis=-1))
    threshold = ordered.gather(-1, (size - 1).unsqueeze(-1))
    return size, noise <= threshold  # the `size` features of smallest noise: a uniform subset


def drawn(p: Plan, inputs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The drawn part of the design of ``inputs`` inputs with M = ``p.m`` features.

    A first try draws a little more than the samples left; where repeats leave an input short, all of
    them are drawn again with shap's bound, 4x the samples left.

    Args:
        p: the plan for M.
        inputs: G, the inputs.
        generator: the CPU generator the draws come from.

    Returns:
        ``(masks, weights)``: bool (G, L, M) and float64 (G, L) with L = ``p.samples`` minus the enumerated
        coalitions; unused places (the draws ran out) weigh 0.
    """
    m, left = p.m, p.samples - p.enumerated.shape[0]
    if left <= 0 or p.full >= p.mass.shape[0]:
        return torch.zeros(inputs, 0, m, dtype=torch.bool), torch.zeros(inputs, 0, dtype=torch.float64)
    for draws in sorted({min(4 * left, left + left // 4 + 64), 4 * left}):
        size, masks = _draw(p, inputs, draws, generator)
        keys, perm = _keys(masks).sort(dim=1, stable=True)  # stable: a repeat sorts after its first draw
        start = torch.ones_like(keys, dtype=torch.bool)
        start[:, 1:] = keys[:, 1:] != keys[:, :-1]
        new = torch.zeros_like(start).scatter_(1, perm, start)  # the first draw of each coalition
        group = torch.zeros_like(perm).scatter_(1, perm, start.long().cumsum(1) - 1)
        pair = size <= p.paired
        cost = new.long() * (1 + pair.long())
        if bool((cost.sum(1) >= left).all()):
            break
    before = cost.cumsum(1) - cost  # samples taken before each draw
    used = before < left
    weight = torch.zeros(inputs, draws, dtype=torch.float64).scatter_add_(1, group, used.double()).gather(1, group)
    out = torch.zeros(inputs, left, m, dtype=torch.bool)
    w = torch.zeros(inputs, left, dtype=torch.float64)
    g, d = (new & used).nonzero(as_tuple=True)
    out[g, before[g, d]] = masks[g, d]
    w[g, before[g, d]] = weight[g, d]
    twin = pair[g, d] & (before[g, d] + 1 < left)
    g, d = g[twin], d[twin]
    out[g, before[g, d] + 1] = ~masks[g, d]
    w[g, before[g, d] + 1] = weight[g, d]
    mass_left = float(np.sum(p.mass[p.full :]))
    return out, w * (mass_left / w.sum(1, keepdim=True))


def design(p: Plan, inputs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole design of ``inputs`` inputs with M = ``p.m`` features: enumerated, then drawn.

    Args:
        p: the plan for M.
        inputs: G, the inputs.
        generator: the CPU generator the draws come from.

    Returns:
        ``(masks, weights)``: bool (G, p.samples, M) and float64 (G, p.samples), the weights of every
        input summing to 1.
    """
    masks, weights = drawn(p, inputs, generator)
    fixed = p.enumerated.unsqueeze(0).expand(inputs, -1, -1)
    return torch.cat((fixed, masks), 1), torch.cat((p.weights.unsqueeze(0).expand(inputs, -1), weights), 1)
