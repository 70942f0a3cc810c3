"""Images: superpixel LIME for image classifiers.

``explain_image`` builds superpixel features (``segments``) and a fill, then calls the
engine once. Submodules: ``segments`` (SLIC on the device, grids, scikit-image adapters),
``viz`` (pictures, needs matplotlib). The embedded demo classifier, its synthetic images with
planted ground truth and ``torchlime demo`` are in ``torchlime.demo``.
"""

from torchlime.image._defaults import default_segments
from torchlime.image._explain import explain_image
from torchlime.image._images import LIME_QUICKSHIFT, Images, SegmentsSpec
from torchlime.image._info import ImagesInfo
from torchlime.image.segments import boundaries, grid, resolve_segments, skimage_segments, slic

__all__ = [
    "explain_image",
    "Images",
    "ImagesInfo",
    "SegmentsSpec",
    "LIME_QUICKSHIFT",
    "slic",
    "grid",
    "skimage_segments",
    "boundaries",
    "resolve_segments",
    "default_segments",
]
