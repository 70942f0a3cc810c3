"""``explain_image``: superpixel features and a fill, then the engine, once."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import torch

from torchlime._checks import from_numpy
from torchlime.engine.explainer import execute
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import UNSET, resolve
from torchlime.engine.request import Request
from torchlime.image.segments import resolve_segments
from torchlime.stages.forward.model import InputFormat, Model

#: lime's image segmentation (lime_image.explain_instance's default); "quickshift" uses it
LIME_QUICKSHIFT = dict(kernel_size=4, max_dist=200, ratio=0.2)


def explain_image(
    model: Model,
    images: torch.Tensor,
    *,
    segments: Union[None, str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] = UNSET,
    n_segments: int = 100,
    normalize: Optional[tuple[Sequence[float], Sequence[float]]] = None,
    channels_last: Optional[bool] = None,
    accelerate: Optional[str] = None,
    preset: Optional[str] = None,
    **kwargs: Any,
) -> Explanation:
    """Explain image classifiers with superpixel LIME.

    Args:
        model: callable on (c, C, H, W) batches returning scores (see ``torchlime.explain``).
        images: float (B, C, H, W) on any device, any number of channels, given to the model
            as they are. The built-in segmenters ("slic", "quickshift", "felzenszwalb",
            "skimage_slic") assume RGB in [0, 1]: images outside it (0..255 pixels, normalised
            images) are segmented from a rescaled copy (``segments.unit_range``), images in
            [0, 1] as they are. Better still, pass [0, 1] images and the model's normalisation
            as ``normalize=``.
        segments: None (SLIC on the images' device: the Triton kernels on CUDA), a
            method name ("slic", "grid", "quickshift", "felzenszwalb", "skimage_slic"),
            a callable images -> (B, H, W) labels, or an integer tensor (H, W),
            (B, H, W) or (B, 1, H, W) made by the user. Any integer ids. Default:
            SLIC, or lime's quickshift with ``preset="lime"``.
        n_segments: approximate segment count of SLIC and of "grid" (round(sqrt(n)) cells a side).
        normalize: ``(mean, std)`` per channel; the model then sees ``(x - mean) / std``
            (computed in the fused perturbation pass) while images are segmented and
            perturbed unnormalised.
        channels_last: write the perturbed chunks channels-last (True) or not (False);
            None: as the model wants (``forward.input_format``).
        accelerate: None (the model runs as given) or "fast" (``accel.accelerate_model``:
            bf16 autocast, channels-last and ``torch.compile`` on CUDA).
        preset: "lime" reproduces ``lime_image.LimeImageExplainer`` (quickshift,
            mean-colour fill, Bernoulli(1/2), cosine kernel 0.25, Ridge(1), N = 1000,
            top 5 labels); see ``torchlime.engine.presets``.
        **kwargs: every other ``torchlime.explain`` keyword (target, n_samples, baseline,
            sampler, kernel, surrogate, batch_size, generator, max_memory, ...).

    Returns:
        ``Explanation``; ``features`` is the relabelled segmentation (B, 1, H, W).

    Raises:
        TypeError / ValueError: bad images or segments (named, with what was expected and
            what came, before any model call): e.g. integer images (uint8:
            ``images.float() / 255``), channels-last (B, H, W, C) images
            (``images.permute(0, 3, 1, 2)``), one image without its batch dimension; and
            everything ``torchlime.explain`` raises.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
        ...                           torch.nn.Flatten())
        >>> exp = explain_image(net, torch.rand(2, 3, 32, 32), n_segments=16, n_samples=100)
        >>> exp.heatmap(0).shape
        torch.Size([2, 3, 32, 32])
    """
    images, segments = from_numpy(images), from_numpy(segments)  # numpy arrays in, as at every door
    segments = resolve(preset, dict(segments=segments), "image")["segments"]
    labels = resolve_segments(images, segments, n_segments=n_segments)
    fmt = None if channels_last is None else InputFormat(None, bool(channels_last))
    options = dict(kwargs, preset=preset, normalize=normalize, chunk_format=fmt, accelerate=accelerate)
    features = labels.view(labels.shape[0], 1, *labels.shape[-2:])
    return execute(Request(model, images, features, options, modality="image", input_name="images"))
