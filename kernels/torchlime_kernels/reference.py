"""Torch references of the kernels in this folder (no Triton needed).

Each reference has the same signature as its kernel and is what the kernel tests
compare against; ``torchlime._backend`` falls back to them where a kernel does
not apply.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Optional, Sequence, Union

import torch

Stat = Optional[Union[torch.Tensor, Sequence[float], float]]


def launch_device(t: torch.Tensor) -> ContextManager[object]:
    """The context a kernel on ``t`` is launched in: ``t``'s CUDA device made current.

    Triton launches on the current device, not the tensors'; on ``cuda:1`` tensors while ``cuda:0``
    is current a launch would fail or read the wrong memory. Nothing for CPU tensors (interpreter).

    Args:
        t: a tensor the kernel reads.

    Returns:
        The context manager.
    """
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the normalisation is computed in: float64 for float64 inputs, else float32.

    Args:
        dtype: the inputs' dtype.
    """
    return torch.float64 if dtype == torch.float64 else torch.float32


def channel_stats(
    mean: Stat, std: Stat, channels: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean`` and ``std`` as contiguous 1-D ``dtype`` tensors of length ``channels``.

    A missing ``mean`` is 0 and a missing ``std`` is 1; a scalar or a single value
    applies to every channel.

    Args:
        mean: the means: None, a number, a sequence or a tensor.
        std: the standard deviations, the same way.
        channels: C, the number of channels.
        dtype: the result's dtype.
        device: the result's device.

    Returns:
        ``(mean, std)``, each (C,).
    """

    def one(v: Stat, default: float, name: str) -> torch.Tensor:
        t = torch.as_tensor(default if v is None else v, dtype=dtype, device=device).reshape(-1)
        if t.numel() == 1:
            t = t.expand(channels)
        if t.numel() != channels:
            raise ValueError(f"{name} has {t.numel()} values, the output has {channels} channels (dim 1)")
        return t.contiguous()

    return one(mean, 0.0, "mean"), one(std, 1.0, "std")


def blend_torch(  # noqa: PLR0913
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    *,
    out_dtype: Optional[torch.dtype] = None,
    mean: Stat = None,
    std: Stat = None,
    channels_last: bool = False,
    block_rows: int = 1,
    sources: Optional[torch.Tensor] = None,
    into: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Torch reference of ``kernels.blend.blend``, and the blend on the CPU.

    Labels whose rows repeat in blocks (``block_rows`` > 1: grid cells, time-frequency rectangles)
    have their masks expanded once per block and broadcast over its rows by ``lerp``, which writes
    the same values with a fraction of the memory traffic.

    Args:
        x: (1 or c, *shape) float tensor (or token ids, complex spectra).
        base: (1 or c, *shape) the fill, the same dtype.
        labels: integer (1 or c, *fshape), feature ids in ``[0, F)``, ``fshape`` broadcastable
            to ``shape`` (same number of dims).
        masks: bool (c, F); True keeps the feature (value from ``x``), False hides it
            (value from ``base``).
        out_dtype: dtype of the result (default ``x.dtype``).
        mean: optional per-channel means (channel = dim 1 of the output); the blended value
            ``v`` becomes ``(v - mean[ch]) / std[ch]``, computed in float32 (float64 for float64
            inputs) before the cast to ``out_dtype``.
        std: optional per-channel standard deviations, the same way.
        channels_last: return a 4-D result in ``torch.channels_last`` memory format.
        block_rows: k > 1 promises that rows ``jk .. jk + k - 1`` (dim -2) of ``labels`` are equal
            (``torchlime.stages.features.block_rows``); 1 makes no promise.
        sources: optional long (c,): output row i reads row ``sources[i]`` of x, base and labels,
            which may then have any number of rows (1: shared by all).
        into: optional (c, *shape) tensor of the result's dtype and layout to write the result
            into (a slice of a larger chunk: no copy where the blend can write it directly).

    Returns:
        (c, *shape): ``where(masks[i, labels[i]], x[i], base[i])`` with the extras applied
        (``into`` when given).
    """
    if sources is not None:  # the reference gathers; the kernel reads the source rows in place
        x, base, labels = (t if t.shape[0] == 1 else t.index_select(0, sources) for t in (x, base, labels))
    c, k = masks.shape[0], block_rows
    plain = mean is None and std is None and out_dtype in (None, x.dtype) and not channels_last
    direct = into is not None and plain and into.dtype == x.dtype and into.is_contiguous()
    if x.is_floating_point() and base.is_floating_point() and k > 1 and labels.dim() >= 3:
        # rows repeat in blocks of k (grid cells, time-frequency rectangles): expand the masks once
        # per block and let lerp broadcast them over its k rows, half the memory traffic or less
        h, w = labels.shape[-2], labels.shape[-1]
        firsts = labels.long().reshape(*labels.shape[:-2], h // k, k, w)[..., 0, :]  # (1 or c, ..., H/k, W)
        small = firsts.reshape(firsts.shape[0], -1)
        weights = masks.to(x.dtype)
        keep = weights.index_select(1, small[0]) if small.shape[0] == 1 else weights.gather(1, small)
        keep = keep.view(c, *firsts.shape[1:-1], 1, w)
        blocks = (*x.shape[1:-2], h // k, k, x.shape[-1])
        target = into.view(c, *blocks) if direct and into is not None else None
        out = torch.lerp(base.reshape(base.shape[0], *blocks), x.reshape(x.shape[0], *blocks), keep, out=target)
        out = out.view(c, *x.shape[1:])
    elif x.is_floating_point() and base.is_floating_point():
        # index_select / gather of the masks as weights, then lerp: exact at weights 0 and 1 for
        # finite values, and several times faster on CPU than gather + where with broadcasting
        weights = masks.to(x.dtype)
        lab = labels.long().reshape(labels.shape[0], -1)
        keep = weights.index_select(1, lab[0]) if lab.shape[0] == 1 else weights.gather(1, lab)
        out = torch.lerp(base, x, keep.view(c, *labels.shape[1:]), out=into if direct else None)
    else:  # token ids, complex spectra
        lab = labels.long().reshape(labels.shape[0], -1)
        keep = masks.gather(1, lab.expand(c, -1)).view(c, *labels.shape[1:])
        out = torch.where(keep, x, base)
    if mean is not None or std is not None:
        if out.dim() < 2:
            raise ValueError("mean/std need an output with a channel dim (dim 1)")
        ct = compute_dtype(x.dtype)
        m, s = channel_stats(mean, std, out.shape[1], ct, out.device)
        view = (1, -1) + (1,) * (out.dim() - 2)
        out = (out.to(ct) - m.reshape(view)) / s.reshape(view)
    out = out.to(x.dtype if out_dtype is None else out_dtype)
    if channels_last:
        if out.dim() != 4:
            raise ValueError(f"channels_last needs a 4-D output, got {out.dim()}-D")
        out = out.contiguous(memory_format=torch.channels_last)
    if into is not None and out is not into:  # written elsewhere (extras, token ids): copied in
        out = into.copy_(out)
    return out


# ---------------------------------------------------------------------------------------- SLIC
#
# Contract of the SLIC kernels (``kernels/torchlime_kernels/slic.py``) and of these references. Every pixel carries
# a feature vector of D = C + 2 values, built by ``slic_features``: its C colour channels, then
# ``y * scale`` and ``x * scale`` (row and column index times ``scale = compactness / S``, with
# S = sqrt(H * W / n_segments) the seeding step). The distance between a pixel and a centre is
# then a plain squared Euclidean distance over the D features,
#
#     d = sum_j (f_j - c_j)^2 = d_colour^2 + (compactness / S)^2 d_xy^2,
#
# SLIC's distance (Achanta et al., 2012) in squared form. Centres are (B, gh, gw, D): centre
# (gy, gx) starts as the mean of seeding cell (gy, gx), the pixels y // sh == gy, x // sw == gx
# for cells of ``cell = (sh, sw)`` pixels; a centre's flat index is gy * gw + gx.


def blend_spans(
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    extras: Any,
    block_rows: int,
    sources: Optional[torch.Tensor],
    spans: Optional[Sequence[tuple[int, int, int]]],
) -> torch.Tensor:
    """``blend_torch`` of rows of several inputs (``sources`` (c,): each row's operand row), read where they are.

    ``spans``: host ``(lo, hi, source)`` stretches of one source each (-1: several, gathered) covering the rows;
    ``extras``: ``blend_torch``'s keywords. Without ``sources`` or ``spans``: one ``blend_torch``. Returns (c, *shape).
    """
    if sources is None or spans is None:
        return blend_torch(x, base, labels, masks, **extras, block_rows=block_rows, sources=sources)

    shape = torch.broadcast_shapes(x.shape[1:], base.shape[1:], labels.shape[1:])  # type: ignore[no-untyped-call]
    fmt = torch.channels_last if extras["channels_last"] and len(shape) == 3 else torch.contiguous_format
    into = torch.empty(
        (masks.shape[0], *shape), dtype=extras["out_dtype"] or x.dtype, device=x.device, memory_format=fmt
    )
    for lo, hi, b in spans:  # each span written into its rows of the chunk
        xb, bb, lb = (t if t.shape[0] == 1 or b < 0 else t[b : b + 1] for t in (x, base, labels))  # source b's
        src = sources[lo:hi] if b < 0 else None
        blend_torch(xb, bb, lb, masks[lo:hi], **extras, block_rows=block_rows, sources=src, into=into[lo:hi])
    return into


def slic_features(colour: torch.Tensor, scale: float) -> torch.Tensor:
    """SLIC features of ``colour`` (B, C, H, W): contiguous float32 (B, C + 2, H, W).

    Channels 0..C-1 are ``colour`` (cast to float32), channel C is ``y * scale`` and channel
    C + 1 is ``x * scale``, with y / x the pixel's row / column index as float32 and ``scale``
    (``compactness / S`` for SLIC) rounded to float32 before the product.

    Args:
        colour: (B, C, H, W) the images' colours.
        scale: the weight of the pixel coordinates.
    """
    b, _, h, w = colour.shape
    s = torch.tensor(scale, dtype=torch.float32).item()  # rounded to float32 on the host: no upload
    ys = torch.arange(h, dtype=torch.float32, device=colour.device) * s
    xs = torch.arange(w, dtype=torch.float32, device=colour.device) * s
    yx = torch.stack((ys.view(h, 1).expand(h, w), xs.view(1, w).expand(h, w)))
    return torch.cat((colour.float(), yx.expand(b, 2, h, w)), 1).contiguous()


def _cell(cell: Any) -> tuple[int, int]:
    """``cell`` as two positive Python ints (sh, sw)."""
    try:
        sh, sw = cell
    except (TypeError, ValueError):
        raise TypeError(f"cell must be a pair of ints (sh, sw), got {cell!r}") from None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (sh, sw)):
        raise TypeError(f"cell must be a pair of ints (sh, sw), got {cell!r}")
    if sh < 1 or sw < 1:
        raise ValueError(f"cell sizes must be >= 1, got {cell!r}")
    return sh, sw


def check_assign(features: Any, centres: Any, cell: Any) -> tuple[int, int]:
    """Validate ``assign`` arguments.

    Args:
        features: float (B, D, H, W) pixel features.
        centres: (B, gh, gw, D) centres of the same dtype.
        cell: (sh, sw) the seeding cell size.

    Returns:
        ``cell`` as ints.

    Raises:
        TypeError / ValueError: anything else.
    """
    if not isinstance(features, torch.Tensor) or not isinstance(centres, torch.Tensor):
        raise TypeError("features and centres must be tensors")
    if features.dim() != 4 or centres.dim() != 4:
        raise ValueError(
            f"features must be (B, D, H, W) and centres (B, gh, gw, D), got "
            f"{tuple(features.shape)} and {tuple(centres.shape)}"
        )
    if not features.dtype.is_floating_point or centres.dtype != features.dtype:
        raise TypeError(f"features and centres must share a float dtype, got {features.dtype} and {centres.dtype}")
    if features.device != centres.device:
        raise ValueError(f"features ({features.device}) and centres ({centres.device}) must be on one device")
    b, d, h, w = features.shape
    if centres.shape[0] != b or centres.shape[3] != d:
        raise ValueError(f"centres {tuple(centres.shape)} must be (B, gh, gw, D) with (B, D) = {(b, d)}")
    sh, sw = _cell(cell)
    gh, gw = centres.shape[1], centres.shape[2]
    if h and w and ((h - 1) // sh >= gh or (w - 1) // sw >= gw):
        raise ValueError(f"a {gh} x {gw} grid of {sh} x {sw} cells does not cover {h} x {w} pixels")
    return sh, sw


def check_update(features: Any, labels: Any, n_centres: Any, cell: Any) -> tuple[int, int]:
    """Validate ``update`` arguments.

    Args:
        features: float (B, D, H, W) pixel features.
        labels: int32 / int64 (B, H, W) the centre of every pixel.
        n_centres: the number of centres per image.
        cell: (sh, sw) the seeding cell size.

    Returns:
        ``cell`` as ints.

    Raises:
        TypeError / ValueError: anything else.
    """
    if not isinstance(features, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("features and labels must be tensors")
    if features.dim() != 4 or not features.dtype.is_floating_point:
        raise ValueError(f"features must be a float (B, D, H, W) tensor, got {features.dtype} {tuple(features.shape)}")
    b, _, h, w = features.shape
    if labels.dtype not in (torch.int32, torch.int64) or tuple(labels.shape) != (b, h, w):
        raise ValueError(
            f"labels must be int32/int64 (B, H, W) = {(b, h, w)}, got {labels.dtype} {tuple(labels.shape)}"
        )
    if labels.device != features.device:
        raise ValueError(f"features ({features.device}) and labels ({labels.device}) must be on one device")
    if not isinstance(n_centres, int) or isinstance(n_centres, bool) or n_centres < 1:
        raise ValueError(f"n_centres must be an int >= 1, got {n_centres!r}")
    sh, sw = _cell(cell)
    if n_centres != -(-h // sh) * -(-w // sw):
        raise ValueError(
            f"with cell {(sh, sw)}, n_centres must be ceil(H / sh) * ceil(W / sw) = "
            f"{-(-h // sh) * -(-w // sw)}, got {n_centres}"
        )
    return sh, sw


def assign_torch(
    features: torch.Tensor, centres: torch.Tensor, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of ``kernels.slic.assign``: SLIC's assignment step.

    Args:
        features: float (B, D, H, W) pixel features (``slic_features``).
        centres: (B, gh, gw, D) centres, same dtype; the grid must cover the image,
            ``(H - 1) // sh < gh`` and ``(W - 1) // sw < gw``.
        cell: (sh, sw) seeding cell size in pixels.

    Returns:
        labels: int32 (B, H, W), the flat index ``gy * gw + gx`` of the nearest of the (up to 9)
            centres around the pixel's seeding cell ``(y // sh, x // sw)``; neighbours outside the
            grid are skipped. Candidates are tried in raster order (gy - 1, gx - 1), (gy - 1, gx),
            ... (gy + 1, gx + 1) and only a strictly smaller distance replaces the best one, so
            ties go to the first; a pixel whose distances are all infinite keeps its own cell.
        dist: (B, H, W) that smallest squared distance ``sum_j (f_j - c_j)^2``, accumulated over
            j = 0..D-1 in order (the kernel does the same, so under the interpreter both match
            bit for bit; compiled kernels may fuse the multiply-add).
    """
    sh, sw = check_assign(features, centres, cell)
    b, d, h, w = features.shape
    gh, gw = centres.shape[1], centres.shape[2]
    dev = features.device
    cy = torch.arange(h, device=dev) // sh
    cx = torch.arange(w, device=dev) // sw
    flat = centres.reshape(b, gh * gw, d)
    best = torch.full((b, h, w), float("inf"), dtype=features.dtype, device=dev)
    labels = (cy.view(h, 1) * gw + cx).to(torch.int32).expand(b, h, w).clone()
    for k in range(9):
        ny, nx = cy + (k // 3 - 1), cx + (k % 3 - 1)
        ok = ((ny >= 0) & (ny < gh)).view(h, 1) & ((nx >= 0) & (nx < gw)).view(1, w)
        idx = ny.clamp(0, gh - 1).view(h, 1) * gw + nx.clamp(0, gw - 1)  # (H, W)
        acc = torch.zeros((b, h, w), dtype=features.dtype, device=dev)
        for j in range(d):
            diff = features[:, j] - flat[:, :, j][:, idx]
            acc = acc + diff * diff
        better = ok & (acc < best)
        best = torch.where(better, acc, best)
        labels = torch.where(better, idx.to(torch.int32), labels)
    return labels, best


def update_torch(
    features: torch.Tensor, labels: torch.Tensor, n_centres: int, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference of ``kernels.slic.update``: per-centre feature sums and pixel counts.

    Args:
        features: float (B, D, H, W).
        labels: int32/int64 (B, H, W) centre index of every pixel; labels outside
            ``[0, n_centres)`` are ignored.
        n_centres: number of centres per image.
        cell: the seeding cell size (sh, sw) of ``assign``: ``n_centres`` must be
            ``ceil(H / sh) * ceil(W / sw)`` and a pixel only counts for its label if that centre
            is one of the 3x3 around the pixel's seeding cell (always true for ``assign``'s
            labels and for the seeding cells themselves). This is the contract of the kernel's
            deterministic per-centre reduction.

    Returns:
        sums: (B, n_centres, D) feature sums, dtype of ``features``.
        counts: int32 (B, n_centres) pixel counts.

    Sums use ``index_add_``: deterministic on CPU, and on CUDA under
    ``torch.use_deterministic_algorithms(True)``; summation order differs from the kernel's, so
    compare sums with a tolerance (counts are exact).
    """
    cell = check_update(features, labels, n_centres, cell)
    b, d, h, w = features.shape
    dev = features.device
    lab = labels.long()
    ok = (lab >= 0) & (lab < n_centres)
    sh, sw = cell
    gw = -(-w // sw)
    safe = lab.clamp(0, n_centres - 1)
    cy = (torch.arange(h, device=dev) // sh).view(h, 1)
    cx = (torch.arange(w, device=dev) // sw).view(1, w)
    ok &= ((safe // gw - cy).abs() <= 1) & ((safe % gw - cx).abs() <= 1)
    idx = torch.where(ok, lab, n_centres) + torch.arange(b, device=dev).view(b, 1, 1) * (n_centres + 1)
    src = features.permute(0, 2, 3, 1).reshape(-1, d)
    sums = torch.zeros(b * (n_centres + 1), d, dtype=features.dtype, device=dev).index_add_(0, idx.view(-1), src)
    counts = torch.zeros(b * (n_centres + 1), dtype=torch.long, device=dev).scatter_add_(
        0, idx.view(-1), torch.ones_like(idx.view(-1))
    )
    return (
        sums.view(b, n_centres + 1, d)[:, :n_centres].contiguous(),
        counts.view(b, n_centres + 1)[:, :n_centres].to(torch.int32),
    )
