"""What hidden features become: the baseline tensor (B, *shape).

Accepted specifications:

* a number: every hidden element takes that value (captum's default 0);
* a tensor broadcastable to the inputs (B, *shape) or to one input (*shape);
* ``"mean"``: the mean of each feature's own elements, separately for every
  position of the dimensions the feature map broadcasts over (for images:
  each superpixel's mean colour, lime's ``hide_color=None``);
* ``"blur"``: a Gaussian-blurred copy of (B, C, H, W) images (kornia);
* a callable ``inputs -> tensor``.
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from ._checks import describe

BaselineSpec = Union[float, int, str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]


def feature_mean(inputs: torch.Tensor, labels: torch.Tensor, n_features: int) -> torch.Tensor:
    """Per-feature mean of the inputs, broadcast back to the inputs' shape.

    Args:
        inputs: (B, *shape). labels: long (B, *fshape), fshape broadcastable to shape.
        n_features: F, an upper bound of the labels + 1.

    Returns:
        (B, *shape) where every element holds the mean of the elements that share
        its feature (and its index along the dimensions ``labels`` broadcasts over).
    """
    batch = inputs.shape[0]
    lab = labels.expand(inputs.shape)
    # index along the broadcast dimensions (e.g. the colour channel of an image)
    channel = torch.zeros((), dtype=torch.long, device=inputs.device)
    n_channels = 1
    for dim in range(1, inputs.ndim):
        if labels.shape[dim] == 1 and inputs.shape[dim] > 1:
            size = inputs.shape[dim]
            view = [1] * inputs.ndim
            view[dim] = size
            channel = channel * size + torch.arange(size, device=inputs.device).view(view)
            n_channels *= size
    keys = (lab * n_channels + channel).reshape(batch, -1)
    values = inputs.reshape(batch, -1).to(torch.float64 if inputs.dtype == torch.float64 else torch.float32)
    groups = n_features * n_channels
    sums = torch.zeros(batch, groups, dtype=values.dtype, device=inputs.device).scatter_add_(1, keys, values)
    counts = torch.zeros(batch, groups, dtype=values.dtype, device=inputs.device).scatter_add_(
        1, keys, torch.ones_like(values))
    means = sums / counts.clamp_min(1)
    return means.gather(1, keys).reshape(inputs.shape).to(inputs.dtype)


def blur(images: torch.Tensor, sigma: float | None = None) -> torch.Tensor:
    """Gaussian blur of (B, C, H, W) images; sigma defaults to max(H, W) / 16."""
    import kornia

    if images.ndim != 4:
        raise ValueError(f"`baseline='blur'` needs images shaped (B, C, H, W), got shape {tuple(images.shape)}")
    h, w = images.shape[-2:]
    sigma = float(sigma if sigma is not None else max(h, w) / 16)
    size = int(2 * round(3 * sigma) + 1)
    size = max(3, min(size, (min(h, w) // 2) * 2 - 1))
    x = images if images.is_floating_point() else images.float()
    return kornia.filters.gaussian_blur2d(x, (size, size), (sigma, sigma), border_type="reflect").to(images.dtype)


def resolve_baseline(spec: BaselineSpec, inputs: torch.Tensor, labels: torch.Tensor,
                     n_features: int) -> torch.Tensor:
    """Materialise the baseline as a (B, *shape) tensor on the inputs' device (inputs untouched)."""
    if isinstance(spec, bool):
        raise TypeError(f"`baseline` must be a number, tensor, 'mean', 'blur' or callable, got {describe(spec)}")
    if isinstance(spec, (int, float)):
        return torch.full_like(inputs, spec)
    if isinstance(spec, str):
        if spec == "mean":
            return feature_mean(inputs, labels, n_features)
        if spec == "blur":
            return blur(inputs)
        if spec == "zero":
            return torch.zeros_like(inputs)
        raise ValueError(f"`baseline` string must be 'mean', 'blur' or 'zero', got {spec!r}")
    if callable(spec) and not isinstance(spec, torch.Tensor):
        spec = spec(inputs)
        if not isinstance(spec, torch.Tensor):
            raise TypeError(f"a callable `baseline` must return a tensor, got {describe(spec)}")
    if isinstance(spec, torch.Tensor):
        if spec.device != inputs.device:
            raise ValueError(f"`baseline` must be on the inputs' device ({inputs.device}), got {spec.device}")
        try:
            out = torch.broadcast_to(spec, inputs.shape)
        except RuntimeError:
            raise ValueError(f"`baseline` of shape {tuple(spec.shape)} does not broadcast to the inputs' "
                             f"shape {tuple(inputs.shape)}") from None
        return out.to(inputs.dtype)
    raise TypeError(f"`baseline` must be a number, tensor, 'mean', 'blur' or callable, got {describe(spec)}")
