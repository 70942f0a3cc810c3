"""``Images``: superpixel features and a fill for (B, C, H, W) images (``explain_image`` is the call)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, ClassVar, Mapping, Optional, Union

import torch

from torchlime._util.checks import from_numpy
from torchlime.engine import Call, Config, Modality, Prepared
from torchlime.engine.presets import resolve
from torchlime.image._defaults import SegmentCount, check_segment_count, default_segments
from torchlime.image._info import ImagesInfo
from torchlime.image.segments import SegmentsArg, check_images, resolve_segments
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, tensor_key
from torchlime.typing import UNSET, Model, NormalizeSpec, Unset

#: lime's image segmentation (lime_image.explain_instance's default); "quickshift" uses it (read-only)
LIME_QUICKSHIFT: Mapping[str, float] = MappingProxyType({"kernel_size": 4, "max_dist": 200, "ratio": 0.2})


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
        info = ImagesInfo(made, count, self.normalize is not None, preview_source=ImagesInfo.lazy_thumbnails(inputs))
        return Prepared(inputs, features, how, call, scope="image", input_name="images", info=info)
