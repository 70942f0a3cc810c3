"""Image segmenters: the interpretable features of image explanations.

``slic`` is SLIC (Achanta et al., 2012) in pure torch, batched, on the images' device:
pixels are laid out seeding cell by cell, so one ``bmm`` scores every pixel against the
3x3 centres around its cell, and per-(cell, slot) sums folded onto the centre grid update
the centres. Connectivity is enforced on the device too (union-find over row runs).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence, Union

import numpy as np
import torch
import torch.nn.functional as F

from .._checks import (check_choice, check_integer, check_ndim, check_positive_float,
                      check_positive_int, check_same_device, check_tensor, describe)
from ..features import relabel

SegmentsArg = Union[None, str, Callable[[torch.Tensor], torch.Tensor], torch.Tensor]
METHODS = ("slic", "grid", "quickshift", "felzenszwalb", "skimage_slic")
_BIG = 1e30  # distance to a centre outside the grid
_CPU_CHUNK = 1 << 18  # pixels per chunk of images on CPU


def _check_images(images: Any) -> None:
    check_tensor(images, "images")
    check_ndim(images, "images", (4,), "(B, C, H, W)")
    if not images.dtype.is_floating_point:
        raise TypeError(f"`images` must have a floating dtype (e.g. torch.float32), got {images.dtype}")
    if images.numel() == 0:
        raise ValueError(f"`images` must not be empty, got shape {tuple(images.shape)}")


def _flatten(parent: torch.Tensor) -> torch.Tensor:
    """Pointer jumping until every entry points to a root (a fixed point)."""
    while True:
        jumped = parent.gather(0, parent)  # gather: much faster than [] indexing on CPU
        if torch.equal(jumped, parent):
            return parent
        parent = jumped


def _union(n: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Components of the graph with ``n`` nodes and edges ``a[i] - b[i]``: (n,) the smallest
    node of each node's component. Every round hooks each root onto the smallest root across
    its edges and flattens the trees, until nothing hooks (O(log) rounds, a host sync each)."""
    parent = torch.arange(n, device=a.device)
    while True:
        pa, pb = parent.gather(0, a), parent.gather(0, b)
        hooked = parent.scatter_reduce(0, torch.maximum(pa, pb), torch.minimum(pa, pb), "amin")
        if torch.equal(hooked, parent):
            return parent
        parent = _flatten(hooked)


def _connect(seg: torch.Tensor, min_size: int) -> torch.Tensor:
    """Split labels ``seg`` (B, H, W) into 4-connected components and merge those under
    ``min_size`` pixels into their largest neighbour (ties: the later one), round by round.
    Returns long (B, H, W) component ids in raster order. Graph nodes are row runs of equal
    labels; only vertical edges at a run start are needed (the others join the same runs)."""
    b, h, w = seg.shape
    n, dev = b * h * w, seg.device
    start = torch.ones_like(seg, dtype=torch.bool)
    start[:, :, 1:] = seg[:, :, 1:] != seg[:, :, :-1]
    first = start.view(-1).nonzero().squeeze(1)  # (R,) first pixel of every run
    run = start.view(-1).cumsum(0) - 1  # (N,) run of every pixel
    nruns = first.numel()
    edge = (start[:, 1:] | start[:, :-1]).reshape(-1).nonzero().squeeze(1)  # vertical edges (B, H-1, W)
    upper = edge + edge // max(1, (h - 1) * w) * w  # flat index of the upper pixel
    same = seg.view(-1).gather(0, upper) == seg.view(-1).gather(0, upper + w)
    ru, rv = run.gather(0, upper), run.gather(0, upper + w)
    comp = _union(nruns, ru[same], rv[same])  # (R,) smallest run of every component
    root = comp == torch.arange(nruns, device=dev)
    comp = (root.cumsum(0) - 1).gather(0, comp)  # components numbered 0..M-1 in raster order
    ncomp = int(root.sum())
    length = torch.diff(first, append=first.new_tensor([n]))
    size = torch.zeros(ncomp, dtype=torch.long, device=dev).scatter_add_(0, comp, length)
    # Neighbouring components: across cut vertical edges and between consecutive runs of a row.
    row = first[1:] % w != 0
    ca = torch.cat((comp.gather(0, ru[~same]), comp[:-1][row]))
    cb = torch.cat((comp.gather(0, rv[~same]), comp[1:][row]))
    ids = torch.arange(ncomp, device=dev)
    while True:
        key = size * ncomp + ids  # a strict order: merging only into a larger key makes no cycles
        src = torch.where(ca != cb, torch.cat((key.gather(0, cb), key.gather(0, ca))).view(2, -1), -1)
        best = torch.full_like(ids, -1).scatter_reduce_(0, torch.cat((ca, cb)), src.view(-1), "amax")
        merge = (size > 0) & (size < min_size) & (best > key)
        if not bool(merge.any()):
            return comp.gather(0, run).view(b, h, w)
        target = _flatten(torch.where(merge, best % ncomp, ids))
        size = torch.zeros_like(size).scatter_add_(0, target, size)
        ca, cb, comp = target.gather(0, ca), target.gather(0, cb), target.gather(0, comp)


def check_slic_args(images: torch.Tensor, n_segments: int, compactness: float, n_iter: int,
                    max_size_factor: float, min_size_factor: float, lab: bool) -> tuple[float, float, float]:
    """Validates the arguments of ``slic`` / ``slic_triton``; returns ``compactness``,
    ``max_size_factor`` and ``min_size_factor`` as floats."""
    _check_images(images)
    check_positive_int(n_segments, "n_segments")
    check_positive_int(n_iter, "n_iter")
    compactness = check_positive_float(compactness, "compactness")
    max_size_factor = check_positive_float(max_size_factor, "max_size_factor")
    min_size_factor = check_positive_float(min_size_factor, "min_size_factor", allow_zero=True)
    if not isinstance(lab, bool):
        raise TypeError(f"`lab` must be a bool, got {describe(lab)}")
    if not bool(torch.isfinite(images).all()):
        raise ValueError("`images` must be finite, got NaN or infinite values")
    return compactness, max_size_factor, min_size_factor


def slic(images: torch.Tensor, n_segments: int = 100, compactness: float = 10.0, n_iter: int = 10, *,
         max_size_factor: float = 3.0, min_size_factor: float = 0.25, lab: bool = True) -> torch.Tensor:
    """SLIC superpixels, batched over images, on the images' device.

    Args:
        images: float (B, C, H, W). With C == 3 and ``lab`` the images are RGB in
            [0, 1] and are converted to CIELAB (then ``compactness`` means what it
            means in ``skimage.segmentation.slic``); otherwise channels are used as
            they are (for [0, 1] data, a compactness near 0.1 is comparable).
        n_segments: approximate number of superpixels (the seeding grid size).
        compactness: m in the distance d_colour^2 + (m / S)^2 d_xy^2, S = sqrt(H*W / n_segments).
        n_iter: assignment + update iterations.
        max_size_factor: SLIC clusters over ``max_size_factor * H*W / n_segments``
            pixels are cut along the seeding cells before the connectivity step.
        min_size_factor: 4-connected pieces under ``min_size_factor * H*W / n_segments``
            pixels are merged into their largest neighbouring piece.
        lab: convert 3-channel images from RGB to CIELAB.

    Returns:
        long (B, H, W): labels 0..F_b-1 for every image b, each label one
        4-connected region. Deterministic; ``images`` is not modified.
    """
    compactness, max_size_factor, min_size_factor = check_slic_args(
        images, n_segments, compactness, n_iter, max_size_factor, min_size_factor, lab)
    # On CPU, chunks of ~2^18 pixels keep the working set in cache (64 224x224 images at
    # once cost about twice as much per image as 4 at once); CUDA takes the whole batch.
    chunk = max(1, _CPU_CHUNK // images[0, 0].numel()) if images.device.type == "cpu" else images.shape[0]
    args = (n_segments, compactness, n_iter, max_size_factor, min_size_factor, lab)
    return torch.cat([_slic(images[i:i + chunk], *args) for i in range(0, images.shape[0], chunk)])


@torch.no_grad()
def _slic(images: torch.Tensor, n_segments: int, compactness: float, n_iter: int,
          max_size_factor: float, min_size_factor: float, lab: bool) -> torch.Tensor:
    """``slic`` on a checked batch (B, C, H, W)."""
    x = images if images.dtype == torch.float64 else images.float()
    if x.shape[1] == 3 and lab:
        import kornia

        x = kornia.color.rgb_to_lab(x)
    b, c, h, w = x.shape
    dev, dt, d = x.device, x.dtype, c + 2
    step = math.sqrt(h * w / n_segments)
    sh, sw = math.ceil(h / min(h, max(1, round(h / step)))), math.ceil(w / min(w, max(1, round(w / step))))
    gh, gw = math.ceil(h / sh), math.ceil(w / sw)  # seeding cells of sh x sw pixels, none empty
    ncell, npix, pad = gh * gw, sh * sw, (0, gw * sw - w, 0, gh * sh - h)

    def cells(t: torch.Tensor) -> torch.Tensor:  # (B, K, H, W) -> (B, L, P, K), pixels cell by cell
        t = F.pad(t, pad).view(t.shape[0], t.shape[1], gh, sh, gw, sw)
        return t.permute(0, 2, 4, 3, 5, 1).reshape(t.shape[0], ncell, npix, t.shape[1])

    yx = torch.stack(torch.meshgrid(torch.arange(gh * sh, device=dev, dtype=dt),
                                    torch.arange(gw * sw, device=dev, dtype=dt), indexing="ij"))
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
    labels = labels.view(b, gh, gw, sh, sw).permute(0, 1, 3, 2, 4).reshape(b, gh * sh, gw * sw)[:, :h, :w]
    segment = h * w / n_segments
    size = torch.bincount((labels + torch.arange(b, device=dev).view(b, 1, 1) * ncell).view(-1),
                          minlength=b * ncell).view(b, ncell)
    oversize = size.gather(1, labels.reshape(b, -1)).view(b, h, w) > int(max_size_factor * segment)
    cell = (torch.arange(h, device=dev) // sh).view(h, 1) * gw + torch.arange(w, device=dev) // sw
    labels = labels * (ncell + 1) + torch.where(oversize, cell + 1, 0)
    return relabel(_connect(labels, int(min_size_factor * segment)))[0]


def grid(images_or_shape: Union[torch.Tensor, Sequence[int]], rows: int, cols: int, *,
         device: Union[torch.device, str, None] = None) -> torch.Tensor:
    """Regular grid segmentation: ``rows`` x ``cols`` rectangles, numbered row-major.

    Args:
        images_or_shape: images (B, C, H, W) (labels go to their device), or a shape
            (B, C, H, W) or (B, H, W) (labels go to ``device``, default CPU).
        rows, cols: grid size, at most H and W.

    Returns:
        long (B, H, W) labels 0..rows*cols-1; pixel (y, x) is in row ``y * rows // H``.
    """
    if isinstance(images_or_shape, torch.Tensor):
        check_ndim(images_or_shape, "images_or_shape", (4,), "(B, C, H, W)")
        shape, device = tuple(images_or_shape.shape), images_or_shape.device
    elif (isinstance(images_or_shape, (tuple, list, torch.Size)) and len(images_or_shape) in (3, 4)
          and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in images_or_shape)):
        shape = tuple(images_or_shape)
    else:
        raise TypeError("`images_or_shape` must be a tensor (B, C, H, W) or a shape (B, C, H, W) or "
                        f"(B, H, W) of positive ints, got {describe(images_or_shape)}")
    b, h, w = shape[0], shape[-2], shape[-1]
    check_positive_int(rows, "rows")
    check_positive_int(cols, "cols")
    if rows > h or cols > w:
        raise ValueError(f"`rows` x `cols` must be at most the image size H x W = {h} x {w}, got {rows} x {cols}")
    r = torch.arange(h, device=device) * rows // h
    c = torch.arange(w, device=device) * cols // w
    return (r.view(h, 1) * cols + c).expand(b, h, w).contiguous()


def skimage_segments(images: torch.Tensor, method: str = "quickshift", **kwargs: Any) -> torch.Tensor:
    """Segment each image with scikit-image (an optional dependency), on the host.

    Args:
        images: float (B, C, H, W); RGB in [0, 1] for quickshift (C == 1 is repeated to 3).
        method: "quickshift" (lime's defaults kernel_size=4, max_dist=200, ratio=0.2),
            "felzenszwalb" or "slic" (skimage's defaults); ``kwargs`` override them.

    Returns:
        long (B, H, W) labels 0..F_b-1 per image, on the images' device.
    """
    _check_images(images)
    check_choice(method, "method", ("quickshift", "felzenszwalb", "slic"))
    try:
        import skimage.segmentation as skseg
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("skimage_segments needs scikit-image: pip install scikit-image") from err
    arr = images.detach().to("cpu", torch.float64).permute(0, 2, 3, 1).numpy()
    c = arr.shape[-1]
    if method == "quickshift":
        if c not in (1, 3):
            raise ValueError(f"`images` must have 1 or 3 channels for quickshift, got {c}")
        arr = np.repeat(arr, 3, -1) if c == 1 else arr
        params = {"kernel_size": 4, "max_dist": 200, "ratio": 0.2, **kwargs}
        out = [skseg.quickshift(im, **params) for im in arr]
    else:
        axis = {"channel_axis": None} if c == 1 else {"channel_axis": -1}
        arr = arr[..., 0] if c == 1 else arr
        fn = skseg.felzenszwalb if method == "felzenszwalb" else skseg.slic
        out = [fn(im, **{**axis, **kwargs}) for im in arr]
    labels = torch.from_numpy(np.stack(out).astype(np.int64))
    return relabel(labels)[0].to(images.device)


def boundaries(labels: torch.Tensor) -> torch.Tensor:
    """Segment borders of integer ``labels`` (B, H, W): bool (B, H, W), True where the
    right or lower neighbour has another label."""
    check_tensor(labels, "labels")
    check_integer(labels, "labels")
    check_ndim(labels, "labels", (3,), "(B, H, W)")
    out = torch.zeros(labels.shape, dtype=torch.bool, device=labels.device)
    out[:, :, :-1] |= labels[:, :, :-1] != labels[:, :, 1:]
    out[:, :-1, :] |= labels[:, :-1, :] != labels[:, 1:, :]
    return out


def resolve_segments(images: torch.Tensor, segments: SegmentsArg = None) -> torch.Tensor:
    """Turn any accepted ``segments`` argument into labels for ``images`` (B, C, H, W).

    ``segments``: None (torch ``slic(images)``), a name in ``METHODS`` ("grid" is 10 x 10),
    a callable images -> labels, or an integer tensor (H, W), (B, H, W) or (B, 1, H, W)
    (a batch of 1 is broadcast) on the images' device. Returns a new long (B, H, W)
    tensor, not necessarily numbered 0..F-1.
    """
    _check_images(images)
    b, _, h, w = images.shape
    name = "segments"
    if segments is None:
        return slic(images)
    if isinstance(segments, str):
        check_choice(segments, "segments", METHODS)
        if segments in ("slic", "grid"):
            return slic(images) if segments == "slic" else grid(images, 10, 10)
        return skimage_segments(images, "slic" if segments == "skimage_slic" else segments)
    if not isinstance(segments, torch.Tensor):
        if not callable(segments):
            raise TypeError("`segments` must be None, a method name, a callable or an integer tensor, "
                            f"got {describe(segments)}")
        segments, name = segments(images), "segments(images)"
        if not isinstance(segments, torch.Tensor):
            raise TypeError(f"`{name}` must return a torch.Tensor, got {describe(segments)}")
    check_integer(segments, name)
    check_ndim(segments, name, (2, 3, 4), "(H, W), (B, H, W) or (B, 1, H, W)")
    if segments.ndim == 4 and segments.shape[1] != 1:
        raise ValueError(f"`{name}` with 4 dimensions must be (B, 1, H, W), got shape {tuple(segments.shape)}")
    if tuple(segments.shape[-2:]) != (h, w):
        raise ValueError(f"`{name}` must have the spatial size (H, W) = {(h, w)} of `images` "
                         f"{tuple(images.shape)}, got shape {tuple(segments.shape)}")
    if segments.ndim > 2 and segments.shape[0] not in (1, b):
        raise ValueError(f"`{name}` must have batch size 1 or B = {b} like `images` "
                         f"{tuple(images.shape)}, got shape {tuple(segments.shape)}")
    check_same_device(segments, name, images, "images")
    return segments.reshape(-1, h, w).expand(b, h, w).to(torch.long, copy=True)
