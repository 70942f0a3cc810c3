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
of a group of inputs are one call of torch's generator, and the rest is numpy on whole arrays (the repeats
found by a stable sort of packed coalitions): numpy runs single-threaded, where a parallel torch operation
on a shared CPU waits for threads that other processes hold (0.6 s instead of 0.04 s for 20 rows x 2108
samples x 30 features on a loaded 2-core machine).
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


def _keys(masks: np.ndarray) -> np.ndarray:
    """Int64 (G, D): a key per coalition (G, D, M), equal exactly when two coalitions of a row are.

    Up to 62 features the key is the coalition's bit field (feature j: bit j), packed by ``np.packbits``;
    beyond, the rank of its packed bytes among its row's.
    """
    g, d, m = masks.shape
    field = np.packbits(masks, axis=-1, bitorder="little")  # (G, D, ceil(M / 8)) bytes
    if m <= _WORD:
        wide = np.zeros((g, d, 8), dtype=np.uint8)
        wide[..., : field.shape[-1]] = field
        return wide.view("<i8")[..., 0].astype(np.int64)
    rows = np.broadcast_to(np.arange(g, dtype=np.int64).view(np.uint8).reshape(g, 1, 8), (g, d, 8))
    inverse = np.unique(np.concatenate((rows, field), -1).reshape(g * d, -1), axis=0, return_inverse=True)[1]
    return np.asarray(inverse, dtype=np.int64).reshape(g, d)


def _draw(p: Plan, inputs: int, draws: int, generator: torch.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` coalitions per input: sizes by the mass left (``size`` (G, D)), then uniform subsets (G, D, M)."""
    share = p.mass.copy()
    share[: p.paired] /= 2  # a paired draw brings two coalitions
    share = share[p.full :] / np.sum(share[p.full :])
    probs = torch.from_numpy(share).expand(inputs, -1).contiguous()
    size = (torch.multinomial(probs, draws, True, generator=generator) + p.full + 1).numpy()
    noise = torch.rand(inputs, draws, p.m, generator=generator).numpy()
    threshold = np.take_along_axis(np.sort(noise, axis=-1), (size - 1)[..., None], -1)
    return size, noise <= threshold  # the `size` features of smallest noise: a uniform subset


def drawn(p: Plan, inputs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The drawn part of the design of ``inputs`` inputs with M = ``p.m`` features.

    A first try draws a little more than the samples left; where repeats leave an input short, all of
    them are drawn again with shap's bound, 4x the samples left. The draws are torch's (``generator``);
    the rest is numpy, single-threaded (a parallel torch operation on a shared CPU waits for its threads).

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
        keys = _keys(masks)
        perm = np.argsort(keys, axis=1, kind="stable")  # stable: a repeat sorts after its first draw
        ordered = np.take_along_axis(keys, perm, 1)
        start = np.ones(ordered.shape, dtype=bool)
        start[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        new = np.zeros_like(start)
        np.put_along_axis(new, perm, start, 1)  # the first draw of each coalition
        group = np.zeros_like(perm)
        np.put_along_axis(group, perm, start.cumsum(1) - 1, 1)
        pair = size <= p.paired
        cost = new.astype(np.int64) * (1 + pair)
        if bool((cost.sum(1) >= left).all()):
            break
    before = cost.cumsum(1) - cost  # samples taken before each draw
    used = before < left
    flat = (np.arange(inputs)[:, None] * draws + group).ravel()
    counts = np.bincount(flat, weights=used.ravel(), minlength=inputs * draws).reshape(inputs, draws)
    weight = np.take_along_axis(counts, group, 1)  # the draws of each one's coalition
    out = np.zeros((inputs, left, m), dtype=bool)
    w = np.zeros((inputs, left), dtype=np.float64)
    g, d = np.nonzero(new & used)
    at = before[g, d]
    out[g, at] = masks[g, d]
    w[g, at] = weight[g, d]
    twin = pair[g, d] & (at + 1 < left)
    g, d, at = g[twin], d[twin], at[twin]
    out[g, at + 1] = ~masks[g, d]
    w[g, at + 1] = weight[g, d]
    mass_left = float(np.sum(p.mass[p.full :]))
    scale = (1.0 / w.sum(1, keepdims=True)) * mass_left  # as torch's mass_left / tensor computes it, to the bit
    return torch.from_numpy(out), torch.from_numpy(w * scale)


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
    fixed = np.broadcast_to(p.enumerated.numpy(), (inputs, *p.enumerated.shape))
    fixed_w = np.broadcast_to(p.weights.numpy(), (inputs, p.weights.shape[0]))
    both = np.concatenate((fixed, masks.numpy()), 1), np.concatenate((fixed_w, weights.numpy()), 1)
    return torch.from_numpy(both[0]), torch.from_numpy(both[1])
