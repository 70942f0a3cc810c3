"""``Images``: superpixel features and a fill for (B, C, H, W) images; ``explain_image`` in one call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional, Union

import torch
from typing_extensions import Unpack

from torchlime._checks import from_numpy
from torchlime.engine import Call, Config, ExplainOptions, Explanation, Modality, Prepared, documented, explain_with
from torchlime.engine.presets import resolve
from torchlime.image._defaults import SegmentCount, check_segment_count, default_segments
from torchlime.image._info import ImagesInfo
from torchlime.image.segments import SegmentsArg, check_images, resolve_segments
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, tensor_key
from torchlime.typing import UNSET, Model, NormalizeSpec, NSamples, Seed, TargetSpec, Unset

#: lime's image segmentation (lime_image.explain_instance's default); "quickshift" uses it
LIME_QUICKSHIFT = dict(kernel_size=4, max_dist=200, ratio=0.2)
#: what ``segments=`` accepts
SegmentsSpec = Union[None, str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor], Unset]


#: the label maps of given segments and grids, by label tensor or image size (``stages.fixed_cost``)
_SEGMENTS: ShapeCache[torch.Tensor] = ShapeCache()


def _segments(images: torch.Tensor, segments: SegmentsArg, count: int) -> torch.Tensor:
    """``resolve_segments(images, segments, n_segments=count)``: long (B, H, W), kept when it depends on no pixel.

    A label tensor passed again (unchanged) and a grid of the same size give the same tensor as before, so
    the engine does not relabel them again (``stages.features.prepare_features`` keeps the maps it relabelled).
    """
    small = isinstance(images, torch.Tensor) and images.ndim == 4 and images[:, 0].numel() <= CACHED_ELEMENTS
    if not small or not (isinstance(segments, torch.Tensor) or segments == "grid"):
        return resolve_segments(images, segments, n_segments=count)
    check_images(images)
    given = segments if isinstance(segments, torch.Tensor) else None
    owner = None if given is None else given if given._base is None else given._base
    key = (None if given is None else tensor_key(given), tuple(images.shape), str(images.device), count)
    if given is not None and key[0] is None:  # an inference tensor: no version to know it by
        return resolve_segments(images, segments, n_segments=count)
    return _SEGMENTS.get(owner, key, lambda: resolve_segments(images, segments, n_segments=count))


@dataclass(frozen=True)
class Images(Modality):
    """Images (B, C, H, W) explained by superpixels (or any integer segmentation).

    Attributes:
        segments: None (SLIC on the images' device: the Triton kernels on CUDA), a method name
            ("slic", "grid", "quickshift", "felzenszwalb", "skimage_slic"), a callable images ->
            (B, H, W) labels, or an integer tensor (H, W), (B, H, W) or (B, 1, H, W). Unset: SLIC, or
            lime's quickshift with ``preset="lime"``.
        n_segments: approximate segment count of SLIC and of "grid"; "auto" (the default): from the
            sample budget and the image size (``image._defaults.default_segments``: 25 for N = 1000).
        normalize: ``(mean, std)`` per channel; the model sees ``(x - mean) / std`` while the images
            are segmented and perturbed unnormalised.

    The chunks' memory layout is the call's ``chunk_format`` (by default what the model wants:
    channels-last for an ``Accelerated(channels_last=True)`` model or channels-last conv weights).
    """

    owns: ClassVar[frozenset[str]] = frozenset({"normalize", "perturb_fn", "additional_forward_args"})

    segments: SegmentsSpec = UNSET
    n_segments: SegmentCount = "auto"
    normalize: Optional[NormalizeSpec] = None

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Segment the images (checked first) and hand them over with their normalisation.

        Args:
            model: the caller's model (not called here).
            inputs: float (B, C, H, W) images.
            how: the configuration (its preset chooses the default segmentation).
            call: the call; ``normalize`` is set from this modality.

        Returns:
            The images with their (B, 1, H, W) segment map.
        """
        segments = resolve(how.preset, dict(segments=from_numpy(self.segments)), "image")["segments"]
        count = check_segment_count(self.n_segments)
        if count == "auto":
            n_samples = resolve(how.preset, dict(n_samples=call.n_samples), "image")["n_samples"]
            height, width = (tuple(getattr(inputs, "shape", ())) or (0, 0))[-2:]  # bad images: refused below
            count = default_segments(n_samples, height, width) if height and width else 1
        labels = _segments(inputs, segments, count)
        call = dataclasses.replace(call, normalize=self.normalize)
        features = labels.view(labels.shape[0], 1, *labels.shape[-2:])
        made = segments if isinstance(segments, str) else "slic" if segments is None else "callable"
        made = "labels" if isinstance(segments, torch.Tensor) else made
        info = ImagesInfo(made, count, self.normalize is not None, previews=ImagesInfo.thumbnails(inputs))
        return Prepared(inputs, features, how, call, scope="image", input_name="images", info=info)


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
        from torchlime.image.drop.modality import PatchTokens

        modality = PatchTokens(segments, n_segments, normalize)
        del options["baseline"]
    return explain_with(model, images, modality, Call(target, n_samples, generator), options, "explain_image")
