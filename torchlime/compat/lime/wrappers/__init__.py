"""lime's ``lime.wrappers``: ``scikit_image``'s ``SegmentationAlgorithm`` and ``BaseWrapper``."""

from torchlime.compat.lime.wrappers.scikit_image import BaseWrapper, SegmentationAlgorithm

__all__ = ["BaseWrapper", "SegmentationAlgorithm"]
