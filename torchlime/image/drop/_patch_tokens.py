"""``PatchTokens``: images explained by dropping patch tokens from a vision transformer's sequence.

``explain_image(model, images, baseline="drop")`` hands the engine this modality. Features are the
model's patches, or any segmentation snapped to the patch grid (each patch joins the segment that
covers most of its pixels); a hidden feature's tokens leave the sequence instead of being filled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Optional

import torch

from torchlime import _backend
from torchlime._util.checks import check_normalize, from_numpy
from torchlime.engine import Call, Config, Modality, Prepared
from torchlime.engine.presets import resolve
from torchlime.image._defaults import SegmentCount, check_segment_count, default_segments
from torchlime.image._info import ImagesInfo
from torchlime.image.drop.families import vit_family
from torchlime.image.drop.perturb import DropModel, DroppedTokens, PatchDrop
from torchlime.image.segments import check_images, grid, resolve_segments
from torchlime.typing import UNSET, Model, NormalizeSpec

#: the ``segments`` values that mean "one feature per patch"
PATCHES = (None, "patches")


def snap_to_patches(labels: torch.Tensor, patch: int) -> torch.Tensor:
    """Labels constant on every patch: each patch takes the label covering most of its pixels.

    Args:
        labels: long (B, H, W) a segmentation, H and W multiples of ``patch``.
        patch: the patch side in pixels.

    Returns:
        Long (B, H, W) labels (ties go to the smaller label).

    Example:
        >>> lab = torch.tensor([[[0, 0, 1, 1], [0, 1, 1, 1], [2, 2, 1, 1], [2, 2, 2, 1]]])
        >>> snap_to_patches(lab, 2)[0].tolist()
        [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 1, 1], [2, 2, 1, 1]]
    """
    b, h, w = labels.shape
    gh, gw = h // patch, w // patch
    cells = labels.reshape(b, gh, patch, gw, patch).permute(0, 1, 3, 2, 4).reshape(b, gh, gw, patch * patch)
    major = cells.sort(-1).values.mode(-1).values  # sorted first: ties resolve to the smaller label
    return major.repeat_interleave(patch, 1).repeat_interleave(patch, 2)


@dataclass(frozen=True)
class PatchTokens(Modality):
    """Images (B, C, H, W) of a vision transformer, hidden features dropped from its token sequence.

    Attributes:
        segments: None / unset / "patches" (one feature per patch), or any ``Images`` segmentation
            (a method name, a callable, a label tensor), snapped to the patch grid.
        n_segments: the segment count of a segmentation method ("auto": ``image._defaults``).
        normalize: ``(mean, std)`` per channel: the model sees ``(x - mean) / std``.
    """

    # a ``chunk_format`` is refused by ``prepare``, by name (the chunks are token sequences)
    owns: ClassVar[frozenset[str]] = frozenset({"normalize", "perturb_fn", "additional_forward_args"})

    segments: object = UNSET
    n_segments: SegmentCount = "auto"
    normalize: Optional[NormalizeSpec] = None

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check the model's family and the images, build the patch features and the drop perturbation.

        Args:
            model: a vision transformer of a supported family (``families.vit_family``).
            inputs: float (B, C, H, W) images of the model's input size.
            how: the configuration (an input-space kernel is refused).
            call: the call; its ``perturb_fn`` becomes the token drop.

        Returns:
            The images with their patch-aligned (B, 1, H, W) feature map.

        Raises:
            TypeError: an unsupported model (the supported families are named).
            ValueError: images of another size than the model's, an input-space kernel, ``chunk_format``
                or ``accelerate`` (the chunks are token sequences).
        """
        family = vit_family(model)
        check_images(inputs)
        if tuple(inputs.shape[-2:]) != family.image_size:
            raise ValueError(
                f"`images` must be {family.image_size[0]}x{family.image_size[1]} for this {family.name} vision "
                f"transformer (its patch grid is fixed), got {tuple(inputs.shape[-2:])}: resize them first"
            )
        if call.chunk_format is not None or how.accelerate is not None:
            given = "chunk_format" if call.chunk_format is not None else "accelerate"
            raise ValueError(
                f"`{given}` does not apply with baseline='drop': the chunks are token sequences, not images "
                "(run the model in the dtype you want, e.g. model.half(), or torch.compile it yourself)"
            )
        how.refuse_input_kernel(
            "image", "would compare filled images, but dropped patches are not filled", "a mask-space kernel"
        )
        segments = from_numpy(self.segments)
        segments = None if segments is UNSET else segments
        if isinstance(segments, str) and segments == "patches" or segments is None:
            labels, made, count = grid(inputs, *family.grid), "patches", family.grid[0] * family.grid[1]
        else:
            count_spec = check_segment_count(self.n_segments)
            n_samples = resolve(how.preset, dict(n_samples=call.n_samples), "image")["n_samples"]
            count = default_segments(n_samples, *inputs.shape[-2:]) if count_spec == "auto" else count_spec
            labels = snap_to_patches(resolve_segments(inputs, segments, n_segments=count), family.patch)
            made = (
                segments
                if isinstance(segments, str)
                else "labels"
                if isinstance(segments, torch.Tensor)
                else "callable"
            )
        norm = None
        if self.normalize is not None:
            norm = _backend.normalize_stats(*check_normalize(self.normalize, inputs.shape[1]), inputs)
        call = dataclasses.replace(call, perturb_fn=PatchDrop(family.patch, norm), normalize=None)
        how = dataclasses.replace(how, baseline=DroppedTokens())
        info = ImagesInfo(made, count, self.normalize is not None, preview_source=ImagesInfo.lazy_thumbnails(inputs))
        features = labels.view(labels.shape[0], 1, *labels.shape[-2:])
        return Prepared(
            inputs,
            features,
            how,
            call,
            adapter=lambda m: DropModel(vit_family(m)),
            scope="image",
            input_name="images",
            info=info,
        )
