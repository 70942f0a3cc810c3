"""Images: ``explain_image`` builds superpixel features and calls the engine."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import torch

from .._checks import check_ndim, check_tensor
from ..engine import explain
from ..explanation import Explanation
from ..forward import Model
from ..presets import UNSET

#: lime's image segmentation (lime_image.explain_instance's default)
LIME_QUICKSHIFT = dict(kernel_size=4, max_dist=200, ratio=0.2)


class Normalized(torch.nn.Module):
    """Wraps ``model`` so it receives ``(x - mean) / std`` per channel.

    Explanations then perturb and segment the unnormalised images.
    """

    def __init__(self, model: Model, mean: Sequence[float], std: Sequence[float]) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32).view(1, -1, 1, 1))

    @property
    def cache_identity(self) -> Any:
        """The wrapped model: keys the cached chunk size (wrappers are made per call)."""
        return self.model

    def forward(self, x: torch.Tensor) -> Any:
        return self.model((x - self.mean.to(x)) / self.std.to(x))


def _has_conv(model: Model) -> bool:
    return isinstance(model, torch.nn.Module) and any(isinstance(m, torch.nn.Conv2d) for m in model.modules())


def _lime_segments(images: torch.Tensor) -> torch.Tensor:
    from .segments import skimage_segments

    return skimage_segments(images, "quickshift", **LIME_QUICKSHIFT)


def explain_image(model: Model, images: torch.Tensor, *,
                  segments: Union[None, str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] = None,
                  n_segments: Optional[int] = None,
                  normalize: Optional[tuple[Sequence[float], Sequence[float]]] = None,
                  channels_last: Optional[bool] = None,
                  preset: Optional[str] = None, baseline: Any = UNSET, **kwargs: Any) -> Explanation:
    """Explain image classifiers with superpixel LIME.

    Args:
        model: callable on (c, C, H, W) batches returning scores (see ``explain``).
        images: float (B, C, H, W) on any device, any number of channels.
        segments: None (torch SLIC on the images' device; with ``preset="lime"``:
            scikit-image quickshift with lime's parameters), a method name
            ("slic", "grid", "quickshift", "felzenszwalb", "skimage_slic"), a
            callable images -> (B, H, W) labels, or an integer tensor (H, W),
            (B, H, W) or (B, 1, H, W) made by the user. Any integer ids.
        n_segments: approximate superpixel count for the default SLIC.
        normalize: ``(mean, std)`` per channel; the model then sees
            ``(x - mean) / std`` while images are segmented and perturbed unnormalised.
        channels_last: build the perturbed chunks in channels-last memory format.
            None (default): on CPU when the model is an ``nn.Module`` with a
            ``Conv2d`` (oneDNN runs such convolutions about 15% faster on 2 cores,
            see benchmarks/README.md); the values are identical either way.
        preset: "lime" reproduces ``lime_image.LimeImageExplainer`` defaults
            (quickshift, mean-colour baseline, Bernoulli(1/2), cosine kernel 0.25,
            Ridge(1), 1000 samples, top 5 labels).
        baseline: hidden superpixels become this (default 0; "mean" = each
            superpixel's mean colour, "blur" = a blurred copy, a number or tensor).
        **kwargs: every other ``explain`` keyword (target, n_samples, sampler, ...).

    Returns:
        ``Explanation``; ``features`` is the relabelled segmentation (B, 1, H, W).

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
        ...                           torch.nn.Flatten())
        >>> exp = explain_image(net, torch.rand(2, 3, 32, 32), n_segments=16, n_samples=100)
        >>> exp.heatmap(0).shape
        torch.Size([2, 3, 32, 32])
    """
    from .segments import resolve_segments, slic

    check_tensor(images, "images")
    check_ndim(images, "images", (4,), "(B, C, H, W)")
    if not images.is_floating_point():
        raise TypeError(f"`images` must be a floating tensor (e.g. float32 in [0, 1]), got {images.dtype}")
    if segments is None and preset == "lime":
        segments = _lime_segments
    elif segments is None and n_segments is not None:
        segments = lambda im: slic(im, n_segments=n_segments)  # noqa: E731
    labels = resolve_segments(images, segments)
    if channels_last is None:
        channels_last = images.device.type == "cpu" and _has_conv(model)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    if normalize is not None:
        model = Normalized(model, *normalize).to(images.device)
    return explain(model, images, labels.reshape(labels.shape[0], 1, *labels.shape[-2:]),
                   preset=preset, baseline=baseline, **kwargs)
