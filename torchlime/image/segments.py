"""Image segmenters: the interpretable features of image explanations.

``slic`` is SLIC superpixels on the images' device (``_slic``): the Triton kernels for
CUDA tensors (the torch implementation under ``TORCHLIME_BACKEND=torch`` or torch's
deterministic mode), the torch implementation on the CPU; connectivity is enforced on the
device too. ``grid`` gives rectangles, ``skimage_segments`` wraps scikit-image's
segmenters (on the host), and ``resolve_segments`` turns any ``segments=`` argument of
``explain_image`` into labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

import numpy as np
import torch

from torchlime import _backend
from torchlime._util.checks import (
    check_choice,
    check_integer,
    check_ndim,
    check_positive_float,
    check_positive_int,
    check_same_device,
    check_tensor,
    describe,
    require,
)
from torchlime.image._slic import finish, iterate_torch, iterate_triton, seed_grid, to_lab
from torchlime.stages.features import cell_ids, relabel

SegmentsArg = Union[None, str, Callable[[torch.Tensor], torch.Tensor], torch.Tensor]
METHODS = ("slic", "grid", "quickshift", "felzenszwalb", "skimage_slic")
#: images within [-UNIT_SLACK, 1 + UNIT_SLACK] are segmented as they are (``unit_range``)
UNIT_SLACK = 0.25
_CPU_CHUNK = 1 << 18  # pixels per chunk of images of the torch SLIC on CPU (keeps the working set in cache)


def check_images(images: object, name: str = "images") -> None:
    """Raise unless ``images`` is a non-empty floating tensor (B, C, H, W); no host sync.

    Besides the type, rank and dtype, it refuses what looks like channels-last images (B, H, W, C)
    (the last axis 1, 3 or 4 and axis 1 not), and says how to convert each case.

    Args:
        images: anything.
        name: its name in the messages.

    Raises:
        TypeError: not a tensor, or not floating (uint8 pixels: ``images.float() / 255``).
        ValueError: not (B, C, H, W), channels last, or empty.
    """
    tensor = check_tensor(images, name)
    shape = tuple(tensor.shape)
    if tensor.ndim in (2, 3):
        if tensor.ndim == 2:
            hint = f"for one grayscale image (H, W), add the batch and channel dimensions: {name}[None, None]"
        elif shape[-1] in (1, 3, 4) and shape[0] not in (1, 3, 4):
            hint = f"for one image (H, W, C) (its last axis looks like channels): {name}.permute(2, 0, 1).unsqueeze(0)"
        else:
            hint = f"for one image (C, H, W), add the batch dimension: {name}.unsqueeze(0)"
        raise ValueError(
            f"`{name}` must have 4 dimensions (B, C, H, W), got {tensor.ndim} dimensions with shape {shape}; {hint}"
        )
    check_ndim(tensor, name, (4,), "(B, C, H, W)")
    if shape[-1] in (1, 3, 4) and shape[1] not in (1, 3, 4):
        raise ValueError(
            f"`{name}` must be (B, C, H, W) with channels on axis 1, got shape {shape}, whose last axis looks "
            f"like channels (B, H, W, C); pass {name}.permute(0, 3, 1, 2)"
        )
    if not tensor.dtype.is_floating_point:
        if tensor.dtype == torch.uint8:
            hint = f"; convert 8-bit pixels with {name}.float() / 255"
        elif not tensor.dtype.is_complex:
            hint = f"; convert with {name}.float() (scaled to [0, 1])"
        else:
            hint = ""
        raise TypeError(f"`{name}` must have a floating dtype (e.g. torch.float32 in [0, 1]), got {tensor.dtype}{hint}")
    if tensor.numel() == 0:
        raise ValueError(f"`{name}` must not be empty, got shape {shape}")


def unit_range(images: torch.Tensor) -> torch.Tensor:
    """A copy of images (B, C, H, W) in [0, 1], for the segmenters that assume that range; no host sync.

    Per image: one within [-0.25, 1.25] (``UNIT_SLACK``: [0, 1] up to a resize's overshoot) is
    kept bit for bit; one of values in [0, 255] (8-bit pixels as floats) is divided by 255; any
    other (e.g. normalised, ``(x - mean) / std``) is min-max scaled channel by channel,
    ``(x - min_c) / (max_c - min_c)``, which undoes a per-channel normalisation exactly when every
    channel of the original spans [0, 1]. The choice is a per-image ``torch.where``: nothing is
    read back to the host.

    Args:
        images: finite float (B, C, H, W).

    Returns:
        A new (B, C, H, W) tensor of ``images``' dtype.

    Example:
        >>> x = torch.rand(2, 3, 8, 8)
        >>> torch.equal(unit_range(x), x), torch.allclose(unit_range(x * 255), x)
        (True, True)
    """
    low = images.amin(dim=(2, 3), keepdim=True)  # (B, C, 1, 1)
    high = images.amax(dim=(2, 3), keepdim=True)
    lo, hi = low.amin(1, keepdim=True), high.amax(1, keepdim=True)  # (B, 1, 1, 1)
    stretched = (images - low) / (high - low).clamp_min(torch.finfo(images.dtype).tiny)
    scaled = torch.where((lo >= 0) & (hi <= 255), images / 255, stretched)
    return torch.where((lo >= -UNIT_SLACK) & (hi <= 1 + UNIT_SLACK), images, scaled)


def check_slic_args(
    n_segments: int, compactness: float, n_iter: int, max_size_factor: float, min_size_factor: float, lab: bool
) -> tuple[float, float, float]:
    """Validate SLIC's settings; returns ``compactness``, ``max_size_factor`` and ``min_size_factor``."""
    check_positive_int(n_segments, "n_segments")
    check_positive_int(n_iter, "n_iter")
    compactness = check_positive_float(compactness, "compactness")
    max_size_factor = check_positive_float(max_size_factor, "max_size_factor")
    min_size_factor = check_positive_float(min_size_factor, "min_size_factor", allow_zero=True)
    if not isinstance(lab, bool):
        raise TypeError(f"`lab` must be a bool, got {describe(lab)}")
    return compactness, max_size_factor, min_size_factor


@dataclass(frozen=True)
class SlicSettings:
    """SLIC's settings as one value, for ``slic_labels`` (``slic`` describes each and checks them).

    Attributes:
        n_segments: approximate number of superpixels.
        compactness: m in the distance d_colour^2 + (m / S)^2 d_xy^2.
        n_iter: assignment + update iterations.
        max_size_factor: clusters over this many times H*W / n_segments pixels are cut.
        min_size_factor: pieces under this many times H*W / n_segments pixels are merged.
        lab: convert 3-channel images from RGB to CIELAB.
    """

    n_segments: int = 100
    compactness: float = 10.0
    n_iter: int = 10
    max_size_factor: float = 3.0
    min_size_factor: float = 0.25
    lab: bool = True


def slic(
    images: torch.Tensor,
    n_segments: int = 100,
    compactness: float = 10.0,
    n_iter: int = 10,
    *,
    max_size_factor: float = 3.0,
    min_size_factor: float = 0.25,
    lab: bool = True,
) -> torch.Tensor:
    """SLIC superpixels, batched over images, on the images' device.

    Args:
        images: float (B, C, H, W). With C == 3 and ``lab`` the images are RGB in
            [0, 1] and are converted to CIELAB (then ``compactness`` means what it
            means in ``skimage.segmentation.slic``); otherwise channels are used as
            they are (for [0, 1] data, a compactness near 0.1 is comparable). Images
            outside [0, 1] (0..255 pixels, normalised images) are segmented from a
            rescaled copy (``unit_range``).
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

    Raises:
        TypeError / ValueError: bad arguments, non-finite images.

    Example:
        >>> slic(torch.rand(2, 3, 32, 32), n_segments=16).shape
        torch.Size([2, 32, 32])
    """
    check_images(images)
    args = check_slic_args(n_segments, compactness, n_iter, max_size_factor, min_size_factor, lab)
    if not bool(torch.isfinite(images).all()):
        raise ValueError("`images` must be finite, got NaN or infinite values")
    return slic_labels(images, SlicSettings(n_segments, args[0], n_iter, args[1], args[2], lab))


def slic_labels(images: torch.Tensor, settings: SlicSettings = SlicSettings()) -> torch.Tensor:
    """``slic`` on checked settings (no host synchronisation of its own).

    Non-finite pixels are segmented as 0 (NaN, -inf) or 1 (+inf), so that the caller's own
    finiteness check (the engine's) reports them, rather than a broken label map. Images outside
    [0, 1] are segmented from ``unit_range``'s copy (images in [0, 1] as they are).
    """
    b, _, h, w = images.shape
    n, m, n_iter = settings.n_segments, settings.compactness, settings.n_iter
    grid_ = seed_grid(h, w, n)
    x = to_lab(unit_range(torch.nan_to_num(images, nan=0.0, posinf=1.0, neginf=0.0)), settings.lab)
    if _backend.use_triton(x):
        clusters = iterate_triton(x, grid_, m, n_iter)
    else:  # on the CPU, chunks of ~2^18 pixels keep the working set in cache; CUDA takes the batch
        chunk = max(1, _CPU_CHUNK // (h * w)) if x.device.type == "cpu" else b
        clusters = torch.cat([iterate_torch(x[i : i + chunk], grid_, m, n_iter) for i in range(0, b, chunk)])
    return finish(clusters, grid_, n, settings.max_size_factor, settings.min_size_factor)


def grid(
    images_or_shape: Union[torch.Tensor, Sequence[int]],
    rows: int,
    cols: int,
    *,
    device: Union[torch.device, str, None] = None,
) -> torch.Tensor:
    """Regular grid segmentation: ``rows`` x ``cols`` rectangles, numbered row-major.

    Args:
        images_or_shape: images (B, C, H, W) (labels go to their device), or a shape
            (B, C, H, W) or (B, H, W) (labels go to ``device``, default CPU).
        rows: grid rows, at most H.
        cols: grid columns, at most W.
        device: where the labels go when ``images_or_shape`` is a shape (default CPU).

    Returns:
        long (B, H, W) labels 0..rows*cols-1; pixel (y, x) is in row ``y * rows // H``.
    """
    if isinstance(images_or_shape, torch.Tensor):
        check_ndim(images_or_shape, "images_or_shape", (4,), "(B, C, H, W)")
        shape, device = tuple(images_or_shape.shape), images_or_shape.device
    elif (
        isinstance(images_or_shape, (tuple, list, torch.Size))
        and len(images_or_shape) in (3, 4)
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in images_or_shape)
    ):
        shape = tuple(images_or_shape)
    else:
        raise TypeError(
            "`images_or_shape` must be a tensor (B, C, H, W) or a shape (B, C, H, W) or "
            f"(B, H, W) of positive ints, got {describe(images_or_shape)}"
        )
    b, h, w = shape[0], shape[-2], shape[-1]
    check_positive_int(rows, "rows")
    check_positive_int(cols, "cols")
    if rows > h or cols > w:
        raise ValueError(f"`rows` x `cols` must be at most the image size H x W = {h} x {w}, got {rows} x {cols}")
    return cell_ids((h, w), (rows, cols), device=device).expand(b, h, w).contiguous()


def skimage_segments(images: torch.Tensor, method: str = "quickshift", **kwargs: object) -> torch.Tensor:
    """Segment each image with scikit-image (an optional dependency), on the host.

    Args:
        images: float (B, C, H, W); RGB in [0, 1] for quickshift (C == 1 is repeated to 3);
            images outside [0, 1] are segmented from a rescaled copy (``unit_range``).
        method: "quickshift" (lime's defaults kernel_size=4, max_dist=200, ratio=0.2),
            "felzenszwalb" or "slic" (skimage's defaults).
        **kwargs: parameters of the scikit-image function, overriding those defaults.

    Returns:
        long (B, H, W) labels 0..F_b-1 per image, on the images' device.
    """
    check_images(images)
    check_choice(method, "method", ("quickshift", "felzenszwalb", "slic"))
    skseg = require("skimage.segmentation", "image", "skimage_segments")
    arr = unit_range(images.detach().to("cpu", torch.float64)).permute(0, 2, 3, 1).numpy()
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
    """Segment borders of integer ``labels`` (B, H, W).

    Args:
        labels: integer (B, H, W) segment labels.

    Returns:
        bool (B, H, W), True where the right or lower neighbour has another label.
    """
    check_tensor(labels, "labels")
    check_integer(labels, "labels")
    check_ndim(labels, "labels", (3,), "(B, H, W)")
    out = torch.zeros(labels.shape, dtype=torch.bool, device=labels.device)
    out[:, :, :-1] |= labels[:, :, :-1] != labels[:, :, 1:]
    out[:, :-1, :] |= labels[:, :-1, :] != labels[:, 1:, :]
    return out


def resolve_segments(images: torch.Tensor, segments: SegmentsArg = None, *, n_segments: int = 100) -> torch.Tensor:
    """Turn any accepted ``segments`` argument into labels for ``images`` (B, C, H, W).

    Checks ``images`` (but not their values: the engine does, once).

    Args:
        images: (B, C, H, W) images.
        segments: None or "slic" (``slic(images, n_segments)``), another name in ``METHODS``
            ("grid": round(sqrt(n_segments)) cells a side, at most H and W, so 10 x 10 by default;
            "quickshift" uses lime's parameters), a callable images -> labels, or an integer tensor
            (H, W), (B, H, W) or (B, 1, H, W) (a batch of 1 is broadcast) on the images' device.
        n_segments: superpixels for "slic", cells for "grid".

    Returns:
        A new long (B, H, W) tensor, not necessarily numbered 0..F-1.
    """
    check_images(images)
    b, _, h, w = images.shape
    name = "segments"
    if segments is None or segments == "slic":
        return slic_labels(images, SlicSettings(check_positive_int(n_segments, "n_segments")))
    if isinstance(segments, str):
        check_choice(segments, "segments", METHODS)
        if segments == "grid":  # side x side cells, side = round(sqrt(n_segments)), at most H and W
            side = max(1, round(check_positive_int(n_segments, "n_segments") ** 0.5))
            return grid(images, min(side, h), min(side, w))
        return skimage_segments(images, "slic" if segments == "skimage_slic" else segments)
    if not isinstance(segments, torch.Tensor):
        if not callable(segments):
            raise TypeError(
                f"`segments` must be None, a method name, a callable or an integer tensor, got {describe(segments)}"
            )
        segments, name = segments(images), "segments(images)"
        if not isinstance(segments, torch.Tensor):
            raise TypeError(f"`{name}` must return a torch.Tensor, got {describe(segments)}")
    check_integer(segments, name)
    check_ndim(segments, name, (2, 3, 4), "(H, W), (B, H, W) or (B, 1, H, W)")
    if segments.ndim == 4 and segments.shape[1] != 1:
        raise ValueError(f"`{name}` with 4 dimensions must be (B, 1, H, W), got shape {tuple(segments.shape)}")
    if tuple(segments.shape[-2:]) != (h, w):
        raise ValueError(
            f"`{name}` must have the spatial size (H, W) = {(h, w)} of `images` "
            f"{tuple(images.shape)}, got shape {tuple(segments.shape)}"
        )
    if segments.ndim > 2 and segments.shape[0] not in (1, b):
        raise ValueError(
            f"`{name}` must have batch size 1 or B = {b} like `images` "
            f"{tuple(images.shape)}, got shape {tuple(segments.shape)}"
        )
    check_same_device(segments, name, images, "images")
    return segments.reshape(-1, h, w).expand(b, h, w).to(torch.long, copy=True)
