"""SLIC assignment and centre update (Triton).

``assign`` (every pixel takes the nearest of the up to 9 centres around its seeding cell) and
``update`` (a deterministic per-centre reduction: feature sums and pixel counts). The contract is
documented in ``kernels/torchlime_kernels/reference.py`` next to the torch references ``assign_torch`` and
``update_torch``, which have the same signatures. Kernels run on CUDA tensors (CPU tensors when this
module is imported under ``TRITON_INTERPRET=1``). Only absolute imports of torch/triton and
relative imports inside this folder: it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .reference import assign_torch, check_assign, check_update, launch_device, slic_features, update_torch

__all__ = [
    "ASSIGN_BLOCK",
    "UPDATE_BLOCK",
    "assign",
    "update",
    "supports_assign",
    "supports_update",
    "assign_torch",
    "update_torch",
    "slic_features",
    "interpreted",
]

ASSIGN_BLOCK = 256  # pixels per assign program
UPDATE_BLOCK = 256  # window pixels per step of a per-centre update program
NUM_WARPS = 4
_MAX_GRID_Y = 65535  # CUDA limit of grid dim 1 (images)
_I32 = 2**31 - 1


@triton.jit
def _pixel_block(H, W, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]  # triton reads jit annotations
    """This program's image ``b`` (grid dim 1) and its BLOCK pixels (grid dim 0).

    Returns ``b``, the flat index ``n``, ``valid`` (n < H*W), row ``y`` and column ``x``.
    """
    b = tl.program_id(1).to(tl.int64)
    n = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = n // W
    return b, n, n < H * W, y, n - y * W


@triton.jit
def _assign_kernel(  # type: ignore[no-untyped-def]  # triton reads jit annotations  # noqa: PLR0913
    feat_ptr,
    cent_ptr,
    lab_ptr,
    dist_ptr,
    H,
    W,
    GH,
    GW,
    SH,
    SW,
    fs_b,
    fs_d,
    fs_h,
    fs_w,
    cs_b,
    cs_y,
    cs_x,
    cs_d,
    D: tl.constexpr,
    BLOCK: tl.constexpr,
):
    b, n, valid, y, x = _pixel_block(H, W, BLOCK)
    cy = y // SH
    cx = x // SW
    fptr = feat_ptr + b * fs_b + y * fs_h + x * fs_w
    cptr = cent_ptr + b * cs_b
    best = tl.full((BLOCK,), float("inf"), tl.float32)
    lab = cy * GW + cx  # own cell: kept only if every distance is infinite
    for k in tl.static_range(9):  # neighbour slots in raster order
        ny = cy + (k // 3 - 1)
        nx = cx + (k % 3 - 1)
        ok = valid & (ny >= 0) & (ny < GH) & (nx >= 0) & (nx < GW)
        coff = ny * cs_y + nx * cs_x
        acc = tl.zeros((BLOCK,), tl.float32)
        for j in tl.static_range(D):  # features re-read per slot: L1 hits
            f = tl.load(fptr + j * fs_d, mask=valid, other=0.0)
            c = tl.load(cptr + coff + j * cs_d, mask=ok, other=0.0)
            diff = f - c
            acc = acc + diff * diff
        better = ok & (acc < best)
        best = tl.where(better, acc, best)
        lab = tl.where(better, ny * GW + nx, lab)
    out = b * H * W + n
    tl.store(lab_ptr + out, lab, mask=valid)
    tl.store(dist_ptr + out, best, mask=valid)


@triton.jit
def _update_cells_kernel(  # type: ignore[no-untyped-def]  # triton reads jit annotations  # noqa: PLR0913
    feat_ptr,
    lab_ptr,
    sum_ptr,
    cnt_ptr,
    H,
    W,
    GW,
    SH,
    SW,
    NC,
    fs_b,
    fs_d,
    fs_h,
    fs_w,
    ls_b,
    ls_h,
    ls_w,
    D: tl.constexpr,
    DP: tl.constexpr,
    BLOCK: tl.constexpr,
    WINDOW: tl.constexpr,
):
    k = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)
    ky = k // GW
    kx = k - ky * GW
    # window of the 3x3 seeding cells around centre (ky, kx), clipped to the image
    y0 = tl.maximum(ky - 1, 0) * SH
    y1 = tl.minimum((ky + 2) * SH, H)
    x0 = tl.maximum(kx - 1, 0) * SW
    x1 = tl.minimum((kx + 2) * SW, W)
    ww = x1 - x0
    n = (y1 - y0) * ww
    dd = tl.arange(0, DP)
    dmask = dd < D
    fbase = feat_ptr + b * fs_b
    lbase = lab_ptr + b * ls_b
    acc = tl.zeros((BLOCK, DP), tl.float32)
    cnt = tl.zeros((BLOCK,), tl.int32)
    for start in range(0, WINDOW, BLOCK):  # a compile-time bound (the largest window), masked by n
        i = start + tl.arange(0, BLOCK)
        inw = i < n
        r = i // ww
        y = y0 + r
        x = x0 + (i - r * ww)
        lab = tl.load(lbase + y * ls_h + x * ls_w, mask=inw, other=-1)
        hit = inw & (lab == k)
        f = tl.load(
            fbase + (y * fs_h + x * fs_w)[:, None] + dd[None, :] * fs_d, mask=hit[:, None] & dmask[None, :], other=0.0
        )
        acc += f
        cnt += hit.to(tl.int32)
    row = b * NC + k
    tl.store(sum_ptr + row * D + dd, tl.sum(acc, axis=0), mask=dmask)
    tl.store(cnt_ptr + row, tl.sum(cnt, axis=0))


def interpreted() -> bool:
    """True when this module was imported under ``TRITON_INTERPRET=1`` (kernels run on CPU tensors)."""
    return not isinstance(_assign_kernel, JITFunction)


def _device_ok(device: torch.device) -> bool:
    return device.type == "cuda" or (device.type == "cpu" and interpreted())


def _span(t: torch.Tensor) -> int:
    """Largest element offset inside one image of ``t`` (dim 0 = image)."""
    return sum((s - 1) * st for s, st in zip(t.shape[1:], t.stride()[1:]) if s > 0)


def _why_not_images(features: torch.Tensor, other: torch.Tensor) -> Optional[str]:
    """None when the float32 ``features`` and their companion fit the kernels, else the reason.

    The companion is the centres or the labels; the kernels need their device and 32-bit indexing.
    """
    if features.dtype != torch.float32:
        return f"features must be float32, got {features.dtype}"
    if not _device_ok(features.device):
        return f"device {features.device} (CUDA, or CPU under TRITON_INTERPRET=1)"
    b, _, h, w = features.shape
    if b > _MAX_GRID_Y:
        return f"more than {_MAX_GRID_Y} images"
    if h * w > _I32 - ASSIGN_BLOCK or max(_span(features), _span(other)) > _I32:
        return "an image spans more than 2**31 elements"
    return None


def _why_not_assign(features: Any, centres: Any, cell: Any) -> Optional[str]:
    """None when ``assign`` handles these inputs, else the reason."""
    try:
        check_assign(features, centres, cell)
    except (TypeError, ValueError) as err:
        return str(err)
    return _why_not_images(features, centres)


def _why_not_update(features: Any, labels: Any, n_centres: Any, cell: Any) -> Optional[str]:
    """None when ``update`` handles these inputs, else the reason."""
    try:
        check_update(features, labels, n_centres, cell)
    except (TypeError, ValueError) as err:
        return str(err)
    reason = _why_not_images(features, labels)
    if reason is None and features.shape[0] * n_centres * max(features.shape[1], 1) > _I32:
        return "more than 2**31 sums"
    return reason


def supports_assign(features: torch.Tensor, centres: torch.Tensor, cell: tuple[int, int]) -> bool:
    """Whether ``assign`` handles these inputs (else use ``assign_torch``).

    Valid arguments, float32, CUDA (CPU under the interpreter), at most 65535 images, images under
    2**31 elements.

    Args:
        features: float32 (B, D, H, W) pixel features.
        centres: float32 (B, gh, gw, D) centres.
        cell: (sh, sw) the seeding cell size.
    """
    return _why_not_assign(features, centres, cell) is None


def supports_update(features: torch.Tensor, labels: torch.Tensor, n_centres: int, cell: tuple[int, int]) -> bool:
    """Whether ``update`` handles these inputs (else use ``update_torch``); as ``supports_assign``.

    Args:
        features: float32 (B, D, H, W) pixel features.
        labels: int32 / int64 (B, H, W) the centre of every pixel.
        n_centres: the number of centres per image.
        cell: (sh, sw) the seeding cell size.
    """
    return _why_not_update(features, labels, n_centres, cell) is None


def assign(features: torch.Tensor, centres: torch.Tensor, cell: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC assignment, see ``reference.assign_torch`` for the contract.

    By plain squared distance over the D features (colour channels + scaled y, x, see
    ``reference.slic_features``). Launch: one program per (block of ``ASSIGN_BLOCK`` pixels, image),
    grid ``(cdiv(H * W, ASSIGN_BLOCK), B)``. A program loads its pixels' features and, for each of
    the 9 neighbour slots in raster order, gathers the candidate centre (a tiny table, served from
    cache), accumulates ``(f_j - c_j)^2`` over j = 0..D-1 in order and keeps a strictly smaller
    distance; out-of-grid neighbours are skipped.

    Args:
        features: float32 (B, D, H, W), any strides.
        centres: float32 (B, gh, gw, D), any strides, grid covering the image.
        cell: (sh, sw) seeding cell size.

    Returns:
        int32 labels (B, H, W) (flat centre index ``gy * gw + gx``) and float32 squared
        distances (B, H, W), contiguous.

    Raises:
        ValueError / TypeError: for inputs ``supports_assign`` rejects.
    """
    why = _why_not_assign(features, centres, cell)
    if why is not None:
        check_assign(features, centres, cell)  # the argument errors first
        raise ValueError(f"slic assign kernel does not handle these inputs: {why}")
    sh, sw = int(cell[0]), int(cell[1])
    b, d, h, w = features.shape
    labels = torch.empty((b, h, w), dtype=torch.int32, device=features.device)
    dist = torch.empty((b, h, w), dtype=torch.float32, device=features.device)
    if labels.numel() == 0:
        return labels, dist
    grid = (triton.cdiv(h * w, ASSIGN_BLOCK), b)
    with launch_device(features):
        _assign_kernel[grid](
            features,
            centres,
            labels,
            dist,
            h,
            w,
            centres.shape[1],
            centres.shape[2],
            sh,
            sw,
            *features.stride(),
            *centres.stride(),
            D=d,
            BLOCK=ASSIGN_BLOCK,
            num_warps=NUM_WARPS,
        )
    return labels, dist


def update(
    features: torch.Tensor, labels: torch.Tensor, n_centres: int, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-centre feature sums and pixel counts, see ``reference.update_torch`` for the contract.

    A deterministic per-centre reduction: one program per (centre, image), grid ``(n_centres, B)``,
    walks the window of the 3x3 seeding cells around its centre (the only pixels ``assign`` can give
    it) in blocks of ``UPDATE_BLOCK`` pixels, accumulates the features of the pixels labelled with it
    per lane and reduces the lanes at the end. No atomics: the result does not depend on scheduling,
    batch size or the other images. Every pixel is read by up to 9 programs (mostly from L2). The
    summation order differs from ``update_torch``'s: compare sums with a tolerance (counts are exact).

    Args:
        features: float32 (B, D, H, W), any strides.
        labels: int32 / int64 (B, H, W), any strides; labels outside ``[0, n_centres)`` are ignored.
        n_centres: centres per image.
        cell: (sh, sw) the seeding cell size; a pixel counts only for centres among the 3x3
            around its seeding cell (always true for ``assign``'s labels and the seeding cells).

    Returns:
        float32 sums (B, n_centres, D) and int32 counts (B, n_centres), contiguous.

    Raises:
        ValueError / TypeError: for inputs ``supports_update`` rejects.
    """
    why = _why_not_update(features, labels, n_centres, cell)
    if why is not None:
        check_update(features, labels, n_centres, cell)
        raise ValueError(f"slic update kernel does not handle these inputs: {why}")
    b, d, h, w = features.shape
    dev = features.device
    if b == 0 or d == 0 or h * w == 0:
        return (
            torch.zeros((b, n_centres, d), dtype=torch.float32, device=dev),
            torch.zeros((b, n_centres), dtype=torch.int32, device=dev),
        )
    sh, sw = int(cell[0]), int(cell[1])
    sums = torch.empty((b, n_centres, d), dtype=torch.float32, device=dev)
    counts = torch.empty((b, n_centres), dtype=torch.int32, device=dev)
    window = triton.cdiv(min(3 * sh, h) * min(3 * sw, w), UPDATE_BLOCK) * UPDATE_BLOCK
    with launch_device(features):
        _update_cells_kernel[(n_centres, b)](
            features,
            labels,
            sums,
            counts,
            h,
            w,
            -(-w // sw),
            sh,
            sw,
            n_centres,
            *features.stride(),
            *labels.stride(),
            D=d,
            DP=triton.next_power_of_2(d),
            BLOCK=UPDATE_BLOCK,
            WINDOW=window,
            num_warps=NUM_WARPS,
        )
    return sums, counts
