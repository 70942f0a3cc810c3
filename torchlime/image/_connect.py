"""Connectivity post-processing of segmentations, on the device, with few host synchronisations.

``connect`` splits every label of a (B, H, W) map into 4-connected components and merges
components under ``min_size`` pixels into their largest neighbour. The graph's nodes are
row runs of equal labels (about ten times fewer than pixels); one ``nonzero`` finds the
runs and the vertical edges at run starts together. Components come from union-find
rounds (hook each root onto the smallest root across an edge, then jump pointers); the
merging rounds flatten their merge forests with a fixed number of pointer jumps. Both
loops check for convergence only once per block of rounds, so a typical call costs three
host synchronisations whatever the batch size.
"""

from __future__ import annotations

import math

import torch

UNION_BLOCK = 6  # union-find rounds between convergence checks
MERGE_BLOCK = 4  # merging rounds between convergence checks


def _jump(parent: torch.Tensor, times: int) -> torch.Tensor:
    """``times`` rounds of pointer jumping (parent <- parent[parent])."""
    for _ in range(times):
        parent = parent.gather(0, parent)
    return parent


def _components(n: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Components of the graph with ``n`` nodes and edges ``a[i] - b[i]``.

    Returns (n,) the smallest node of each node's component, fully flattened. Hooks only roots (so
    no link is lost), jumps pointers twice a round, and stops after the first block whose last round
    changed nothing.
    """
    parent = torch.arange(n, device=a.device)
    while True:
        for _ in range(UNION_BLOCK):
            before = parent
            pa, pb = parent.gather(0, a), parent.gather(0, b)
            hi, lo = torch.maximum(pa, pb), torch.minimum(pa, pb)
            root = parent.gather(0, hi) == hi
            parent = parent.scatter_reduce(0, torch.where(root, hi, 0), torch.where(root, lo, 0), "amin")
            parent = _jump(parent, 2)
        if torch.equal(parent, before):  # the last round changed nothing: every edge joins one root
            return parent


def connect(seg: torch.Tensor, min_size: int) -> torch.Tensor:
    """4-connected components of ``seg`` (B, H, W), the small ones merged into a neighbour.

    Components under ``min_size`` pixels are merged into their largest neighbouring component (ties:
    the later one), round by round.

    Returns:
        long (B, H, W) component ids, unique across the batch but not contiguous (relabel them).
    """
    bsz, h, w = seg.shape
    n, dev = bsz * h * w, seg.device
    flat = seg.reshape(-1)
    start = torch.ones_like(seg, dtype=torch.bool)
    start[:, :, 1:] = seg[:, :, 1:] != seg[:, :, :-1]
    run = start.view(-1).cumsum(0) - 1  # (N,) run of every pixel
    vert = torch.zeros_like(start)
    vert[:, :-1] = start[:, :-1] | start[:, 1:]  # vertical edges worth checking: at a run start above or below
    # one nonzero for both: the runs' first pixels (indices < N, in order), then the edges
    idx = torch.cat((start.view(-1), vert.view(-1))).nonzero().squeeze(1)
    m = idx.numel()  # >= the number of runs R; run-indexed arrays have m slots, slots >= R are empty
    is_run = idx < n
    first = torch.where(is_run, idx, n)
    length = torch.diff(first, append=torch.full((1,), n, dtype=first.dtype, device=dev))  # 0 for empty slots
    upper = torch.where(is_run, 0, idx - n)
    lower = (upper + w).clamp_max(n - 1)
    edge = ~is_run
    same = edge & (flat.gather(0, upper) == flat.gather(0, lower))
    ru, rv = run.gather(0, upper), run.gather(0, lower)
    comp = _components(m, torch.where(same, ru, 0), torch.where(same, rv, 0))
    size = torch.zeros(m, dtype=torch.long, device=dev).scatter_add_(0, comp, length)
    # neighbouring components: across cut vertical edges and between consecutive runs of a row
    row = is_run[1:] & (first[1:] % w != 0)
    cut = edge & ~same
    ca = torch.cat((torch.where(cut, ru, 0), torch.where(row, torch.arange(m - 1, device=dev), 0)))
    cb = torch.cat((torch.where(cut, rv, 0), torch.where(row, torch.arange(1, m, device=dev), 0)))
    ca, cb = comp.gather(0, ca), comp.gather(0, cb)
    ids = torch.arange(m, device=dev)
    jumps = max(1, math.ceil(math.log2(max(m, 2))))
    while True:
        for _ in range(MERGE_BLOCK):
            key = size * m + ids  # a strict order: merging only into a larger key makes no cycles
            src = torch.where(ca != cb, torch.cat((key.gather(0, cb), key.gather(0, ca))).view(2, -1), -1)
            best = torch.full_like(ids, -1).scatter_reduce_(0, torch.cat((ca, cb)), src.view(-1), "amax")
            merge = (size > 0) & (size < min_size) & (best > key)
            target = _jump(torch.where(merge, best % m, ids), jumps)  # merge forests fully flattened
            size = torch.zeros_like(size).scatter_add_(0, target, size)
            ca, cb, comp = target.gather(0, ca), target.gather(0, cb), target.gather(0, comp)
        if not bool(merge.any()):  # the last round merged nothing: nothing more will
            return comp.gather(0, run).view(bsz, h, w)
