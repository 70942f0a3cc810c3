"""SLIC on the GPU through Triton kernels: the CUDA fast path of ``segments.slic``.

``slic_triton`` runs SLIC with the same parameters, seeding grid and post-processing (cutting
oversized clusters along the seeding cells, 4-connectivity with small pieces merged, labels
0..F-1) as ``segments.slic``, but its assignment and update steps are ``_backend.slic_assign``
and ``_backend.slic_update``: the kernels in ``kernels/slic.py`` for CUDA tensors (Triton
installed, not disabled, torch's deterministic mode off), their torch references otherwise
(CPU, where it is slower than ``segments.slic``, which stays the CPU path).

How it differs from ``segments.slic`` (so the labels are close but not bit-identical):

* Pixels carry features ``[colour, y * m / S, x * m / S]`` (``kernels.reference.slic_features``),
  so the SLIC distance ``d_colour^2 + (m / S)^2 d_xy^2`` is a plain squared distance computed
  from differences (``slic`` expands it into a matrix product around each cell's origin).
* The nearest centre is an exact first argmin over the 9 candidates (``slic`` breaks near-ties
  within 16 ulps by slot order).
* Everything runs in float32 (``slic`` keeps float64 inputs in float64).

Deterministic on CUDA: the assignment is per pixel and the update a per-centre reduction without
atomics, so labels do not depend on scheduling or on the other images of the batch.
"""
from __future__ import annotations

import math

import torch

from .. import _backend
from ..features import relabel
from ..kernels.reference import slic_features
from .segments import _connect, check_slic_args

__all__ = ["slic_triton", "seed_grid"]


def seed_grid(h: int, w: int, n_segments: int) -> tuple[float, int, int, int, int]:
    """SLIC's seeding grid for an h x w image, as in ``segments.slic``: (S, sh, sw, gh, gw), with
    S = sqrt(h * w / n_segments), cells of sh x sw pixels and a gh x gw grid of non-empty cells."""
    step = math.sqrt(h * w / n_segments)
    sh = math.ceil(h / min(h, max(1, round(h / step))))
    sw = math.ceil(w / min(w, max(1, round(w / step))))
    return step, sh, sw, math.ceil(h / sh), math.ceil(w / sw)


@torch.no_grad()
def slic_triton(images: torch.Tensor, n_segments: int = 100, compactness: float = 10.0, n_iter: int = 10, *,
                max_size_factor: float = 3.0, min_size_factor: float = 0.25, lab: bool = True) -> torch.Tensor:
    """SLIC superpixels with the Triton kernels (CUDA fast path), batched, on the images' device.

    Arguments and result as ``segments.slic``: float images (B, C, H, W) (RGB in [0, 1] converted
    to CIELAB when C == 3 and ``lab``), ``n_segments`` seeding cells, ``compactness`` m in
    ``d_colour^2 + (m / S)^2 d_xy^2``, ``n_iter`` assignment steps (each after the first preceded
    by a centre update; an empty cluster keeps its centre), ``max_size_factor`` /
    ``min_size_factor`` for the post-processing.

    Returns:
        long (B, H, W): labels 0..F_b-1 per image, each label one 4-connected region.
        Deterministic; ``images`` is not modified.
    """
    compactness, max_size_factor, min_size_factor = check_slic_args(
        images, n_segments, compactness, n_iter, max_size_factor, min_size_factor, lab)
    x = images.float()
    if x.shape[1] == 3 and lab:
        import kornia

        x = kornia.color.rgb_to_lab(x)
    b, _, h, w = x.shape
    dev = x.device
    step, sh, sw, gh, gw = seed_grid(h, w, n_segments)
    ncell, cell = gh * gw, (sh, sw)
    feats = slic_features(x, compactness / step)  # (B, D, H, W) float32
    d = feats.shape[1]
    seeds = ((torch.arange(h, device=dev) // sh).view(h, 1) * gw
             + torch.arange(w, device=dev) // sw).to(torch.int32)  # (H, W) seeding cell of every pixel
    labels = seeds.expand(b, h, w)
    sums, counts = _backend.slic_update(feats, labels, ncell, cell)
    centres = sums / counts.unsqueeze(-1)  # (B, L, D); no seeding cell is empty
    for it in range(n_iter):
        if it > 0:
            sums, counts = _backend.slic_update(feats, labels, ncell, cell)
            centres = torch.where(counts.unsqueeze(-1) > 0, sums / counts.clamp_min(1).unsqueeze(-1), centres)
        labels, _ = _backend.slic_assign(feats, centres.view(b, gh, gw, d), cell)
    labels = labels.long()
    # Post-processing as in segments.slic: cut oversized clusters along the seeding cells, then
    # split into 4-connected pieces and merge the small ones.
    segment = h * w / n_segments
    size = torch.bincount((labels + torch.arange(b, device=dev).view(b, 1, 1) * ncell).view(-1),
                          minlength=b * ncell).view(b, ncell)
    oversize = size.gather(1, labels.reshape(b, -1)).view(b, h, w) > int(max_size_factor * segment)
    labels = labels * (ncell + 1) + torch.where(oversize, seeds.long() + 1, 0)
    return relabel(_connect(labels, int(min_size_factor * segment)))[0]
