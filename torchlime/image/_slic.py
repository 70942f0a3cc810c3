"""SLIC superpixels (Achanta et al., 2012), batched, on the images' device, in two implementations.

* ``iterate_torch``: pure torch. Pixels are laid out seeding cell by seeding cell, so one
  ``bmm`` scores every pixel against the 3x3 centres around its cell, and per-(cell, slot)
  sums folded onto the centre grid update the centres. Fast on the CPU.
* ``iterate_triton``: the assignment and update steps are ``_backend.slic_assign`` and
  ``_backend.slic_update`` (the Triton kernels of ``kernels/torchlime_kernels/slic.py``): the CUDA path. Pixels
  carry features ``[colour, y * m / S, x * m / S]``, so the distance is a plain squared
  distance; the nearest centre is an exact first argmin; everything runs in float32.

Both share the seeding grid and the post-processing (``finish``): clusters larger than
``max_size_factor`` segments are cut along the seeding cells, then 4-connected pieces
under ``min_size_factor`` segments are merged into their largest neighbour
(``_connect.connect``), and labels are numbered 0..F_b-1 per image.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F

from torchlime import _backend
from torchlime.image._connect import connect
from torchlime.image._lab import rgb_to_lab
from torchlime.stages.features import relabel

_BIG = 1e30  # distance to a centre outside the grid


class SeedGrid(NamedTuple):
    """SLIC's seeding grid of an h x w image.

    Step S = sqrt(h * w / n_segments), cells of sh x sw pixels, a gh x gw grid of non-empty cells.
    """

    step: float
    sh: int
    sw: int
    gh: int
    gw: int


def seed_grid(h: int, w: int, n_segments: int) -> SeedGrid:
    """The seeding grid of an h x w image for ``n_segments`` superpixels.

    Example:
        >>> seed_grid(32, 32, 16)
        SeedGrid(step=8.0, sh=8, sw=8, gh=4, gw=4)
    """
    step = math.sqrt(h * w / n_segments)
    sh = math.ceil(h / min(h, max(1, round(h / step))))
    sw = math.ceil(w / min(w, max(1, round(w / step))))
    return SeedGrid(step, sh, sw, math.ceil(h / sh), math.ceil(w / sw))


def to_lab(images: torch.Tensor, lab: bool) -> torch.Tensor:
    """float32 (float64 kept) images, converted from RGB in [0, 1] to CIELAB when C == 3 and ``lab``."""
    x = images if images.dtype == torch.float64 else images.float()
    if x.shape[1] == 3 and lab:
        x = rgb_to_lab(x)
    return x


@torch.no_grad()
def iterate_torch(x: torch.Tensor, grid: SeedGrid, compactness: float, n_iter: int) -> torch.Tensor:
    """SLIC's assignment / update iterations in torch: long (B, H, W) seeding-cell ids of the clusters.

    Args:
        x: (B, C, H, W) colour features (float32 or float64).
        grid: the seeding grid (``seed_grid``).
        compactness: weight of the position against the colour in the distance.
        n_iter: assignment / update rounds.
    """
    b, c, h, w = x.shape
    dev, dt, d = x.device, x.dtype, c + 2
    step, sh, sw, gh, gw = grid
    ncell, npix, pad = gh * gw, sh * sw, (0, gw * sw - w, 0, gh * sh - h)

    def cells(t: torch.Tensor) -> torch.Tensor:  # (B, K, H, W) -> (B, L, P, K), pixels cell by cell
        t = F.pad(t, pad).view(t.shape[0], t.shape[1], gh, sh, gw, sw)
        return t.permute(0, 2, 4, 3, 5, 1).reshape(t.shape[0], ncell, npix, t.shape[1])

    yx = torch.stack(
        torch.meshgrid(
            torch.arange(gh * sh, device=dev, dtype=dt), torch.arange(gw * sw, device=dev, dtype=dt), indexing="ij"
        )
    )
    yx = cells(yx[None, :, :h, :w] * (compactness / step))  # (1, L, P, 2) scaled positions
    origin = yx[:, :, :1]  # (1, L, 1, 2): the first pixel of every cell
    col = cells(x)
    # Distances by one bmm: [-2 c, |c|^2, 1] . [p, 1, |p|^2] = |p - c|^2, positions relative to the cell.
    pix = torch.cat((col, (yx - origin).expand(b, -1, -1, -1)), -1)
    pix = torch.cat((pix, torch.ones_like(pix[..., :1]), (pix * pix).sum(-1, keepdim=True)), -1)
    pix = pix.reshape(b * ncell, npix, d + 2).transpose(1, 2).contiguous()  # (B*L, D+2, P)
    valid = cells(torch.ones(1, 1, h, w, device=dev, dtype=dt))
    upd = torch.cat((col, yx.expand(b, -1, -1, -1), valid.expand(b, -1, -1, -1)), -1) * valid  # (B, L, P, D+1)
    on_cpu = dev.type == "cpu"
    if on_cpu:  # scatter_add: fast, deterministic on CPU. 8 accumulators ("lanes") per (cell, slot):
        # neighbouring pixels mostly share a slot, and adding them into one address is latency-bound.
        upd = upd.permute(3, 0, 1, 2).reshape(d + 1, -1).contiguous()
        lane = torch.arange(b * ncell, device=dev).view(-1, 1, 1) * 72 + torch.arange(npix, device=dev) % 8
    else:  # one-hot bmm: no float atomics, so deterministic on CUDA
        upd = upd.reshape(b * ncell, npix, d + 1)
    ones = torch.ones(1, 1, gh, gw, device=dev, dtype=dt)
    absent = (F.unfold(ones, 3, padding=1) == 0).view(1, 9, ncell).transpose(1, 2).unsqueeze(3) * _BIG
    itype = torch.int32 if dt == torch.float32 else torch.int64
    nine = torch.arange(9, device=dev, dtype=itype).view(1, 9, 1)

    def cluster_sums(slot: torch.Tensor) -> torch.Tensor:  # (B, D+1, gh, gw): [colour, position, count]
        if on_cpu:  # per (cell, slot) sums, folded onto the centre grid (fold adds the 3x3 overlaps)
            idx = (lane + slot * 8).view(1, -1).expand(d + 1, -1)
            sums = torch.zeros(d + 1, b * ncell * 72, device=dev, dtype=dt).scatter_add_(1, idx, upd)
            sums = sums.view(d + 1, b, ncell, 9, 8).sum(-1).permute(1, 0, 3, 2)
        else:
            sums = torch.bmm((slot == nine).to(dt), upd).view(b, ncell, 9, d + 1).permute(0, 3, 2, 1)
        return F.fold(sums.reshape(b, (d + 1) * 9, ncell), (gh, gw), 3, padding=1)

    slot = torch.full((b * ncell, 1, npix), 4, dtype=itype, device=dev)  # start: own cell (slot 4)
    sums = cluster_sums(slot)
    centres = sums[:, :d] / sums[:, d:]  # (B, D, gh, gw); no cell is empty
    for it in range(n_iter):
        if it > 0:  # update; an empty cluster keeps its centre
            sums = cluster_sums(slot)
            centres = torch.where(sums[:, d:] > 0, sums[:, :d] / sums[:, d:].clamp_min(1), centres)
        # Assignment: distances to the 9 centres around each cell, lowest one wins.
        nb = F.unfold(centres, 3, padding=1).view(b, d, 9, ncell).permute(0, 3, 2, 1)  # (B, L, 9, D)
        nb = torch.cat((nb[..., :c], nb[..., c:] - origin), -1)
        nb = torch.cat((-2 * nb, (nb * nb).sum(-1, keepdim=True) + absent, torch.ones_like(nb[..., :1])), -1)
        dist = torch.bmm(nb.view(b * ncell, 9, d + 2), pix).clamp_min_(0)  # (B*L, 9, P)
        # First argmin over the 9 slots (a strided argmin is slow on CPU): distances >= 0 order
        # like their bit patterns, so put the slot in the 4 lowest mantissa bits and take the min.
        slot = dist.view(itype).bitwise_and_(-16).bitwise_or_(nine).amin(1, keepdim=True).bitwise_and_(15)
    # Cluster id of every (cell, slot), then back from the cell layout to (B, H, W).
    cy, cx, k = torch.arange(ncell, device=dev) // gw, torch.arange(ncell, device=dev) % gw, torch.arange(9, device=dev)
    ids = (cy.view(-1, 1) + k // 3 - 1) * gw + cx.view(-1, 1) + k % 3 - 1  # (L, 9)
    labels = torch.gather(ids.expand(b, ncell, 9), 2, slot.long().view(b, ncell, npix))  # (B, L, P)
    return labels.view(b, gh, gw, sh, sw).permute(0, 1, 3, 2, 4).reshape(b, gh * sh, gw * sw)[:, :h, :w]


@torch.no_grad()
def iterate_triton(x: torch.Tensor, grid: SeedGrid, compactness: float, n_iter: int) -> torch.Tensor:
    """SLIC's iterations through ``_backend.slic_assign`` / ``slic_update`` (the Triton kernels).

    Returns long (B, H, W) seeding-cell ids of the clusters. Deterministic: the update is a
    per-centre reduction without atomics.
    """
    b, _, h, w = x.shape
    dev = x.device
    step, sh, sw, gh, gw = grid
    ncell, cell = gh * gw, (sh, sw)
    feats = _backend.slic_features(x, compactness / step)  # (B, D, H, W) float32
    d = feats.shape[1]
    seeds = ((torch.arange(h, device=dev) // sh).view(h, 1) * gw + torch.arange(w, device=dev) // sw).to(torch.int32)
    labels = seeds.expand(b, h, w)
    sums, counts = _backend.slic_update(feats, labels, ncell, cell)
    centres = sums / counts.unsqueeze(-1)  # (B, L, D); no seeding cell is empty
    for it in range(n_iter):
        if it > 0:
            sums, counts = _backend.slic_update(feats, labels, ncell, cell)
            centres = torch.where(counts.unsqueeze(-1) > 0, sums / counts.clamp_min(1).unsqueeze(-1), centres)
        labels, _ = _backend.slic_assign(feats, centres.view(b, gh, gw, d), cell)
    return labels.long()


def finish(
    clusters: torch.Tensor, grid: SeedGrid, n_segments: int, max_size_factor: float, min_size_factor: float
) -> torch.Tensor:
    """Post-processing shared by both implementations: long (B, H, W) labels 0..F_b-1.

    Args:
        clusters: long (B, H, W) cluster (seeding-cell) id of every pixel.
        grid: the seeding grid the clusters come from.
        n_segments: superpixels asked for (sets the expected segment size h * w / n_segments).
        max_size_factor: clusters over this many expected segment sizes are split along the seeding cells.
        min_size_factor: components under this many expected segment sizes are merged into a neighbour.
    """
    b, h, w = clusters.shape
    dev = clusters.device
    ncell = grid.gh * grid.gw
    segment = h * w / n_segments
    flat = (clusters + torch.arange(b, device=dev).view(b, 1, 1) * ncell).view(-1)
    size = torch.zeros(b * ncell, dtype=torch.long, device=dev).scatter_add_(0, flat, torch.ones_like(flat))
    oversize = size.gather(0, flat).view(b, h, w) > int(max_size_factor * segment)
    cell = (torch.arange(h, device=dev) // grid.sh).view(h, 1) * grid.gw + torch.arange(w, device=dev) // grid.sw
    labels = clusters * (ncell + 1) + torch.where(oversize, cell + 1, 0)
    return relabel(connect(labels, int(min_size_factor * segment)))[0]
