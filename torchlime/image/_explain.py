"""``explain_image``: superpixel LIME for (B, C, H, W) images in one call (the ``Images`` modality)."""

from __future__ import annotations

from typing import Union

import torch
from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, Modality, documented, explain_with
from torchlime.image._defaults import SegmentCount
from torchlime.image._images import Images, SegmentsSpec
from torchlime.typing import UNSET, Model, NSamples, Seed, TargetSpec, Unset


@documented
def explain_image(  # noqa: D417 (target, n_samples, generator: described on ``Call``, added by ``documented``)
    model: Model,
    images: torch.Tensor,
    *,
    segments: SegmentsSpec = UNSET,
    n_segments: SegmentCount = "auto",
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
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
        n_segments: approximate segment count of SLIC and of "grid" (round(sqrt(n)) cells a side);
            "auto" (the default): ``clamp(N // 40, 8, 100)`` for N samples, at most H * W // 64
            (``image._defaults``: the rule and the measurement behind it).
        **options: the engine's options (``ExplainOptions``) but ``perturb_fn`` and
            ``additional_forward_args``. For images, ``normalize=(mean, std)`` per channel: the model
            sees ``(x - mean) / std`` while the images are segmented and perturbed unnormalised;
            ``baseline`` defaults to each segment's mean colour, and ``baseline="drop"`` leaves
            hidden patches out of a vision transformer's token sequence (torchvision's, timm's,
            Hugging Face's ``ViTForImageClassification``; ``torchlime.image.drop``): the features are
            then the patches, or ``segments`` snapped to the patch grid; ``preset="lime"``
            reproduces ``lime_image.LimeImageExplainer`` (quickshift, mean-colour fill,
            Bernoulli(1/2), cosine kernel 0.25, Ridge(1), N = 1000, top 5 labels).

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
    normalize = options.pop("normalize", None)  # a field of the modality: it sets the call's
    modality: Modality = Images(segments, n_segments, normalize)
    baseline = options.get("baseline")
    if isinstance(baseline, str) and baseline == "drop":  # tokens left out of a vision transformer's sequence
        from torchlime.image.drop._patch_tokens import PatchTokens

        modality = PatchTokens(segments, n_segments, normalize)
        del options["baseline"]
    return explain_with(model, images, modality, Call(target, n_samples, generator), options, "explain_image")
