"""Structured targets: explain detections, segmentations and embeddings in the same batched pass.

``target=`` takes, besides output columns (an int, a list, a tensor, "all", "topK"), a ``Target`` that
reduces the model's raw output to (rows, T) scores (``torchlime.targets.base``):

* ``Boxes``: every box of every image of an object detector (D-RISE similarity);
* ``Region``: a class's logit over a region of a segmentation;
* ``Similarity``: cosine similarity of an embedding to reference embeddings;
* ``Continuation``: the teacher-forced log-probability of a generated continuation, whole and per token
  (with ``torchlime.text.explain_generation``);
* ``Transcript``: the CTC log-likelihood of a speech recogniser's transcript, whole and per word.

T may differ between inputs: ``Explanation.target_valid`` (B, T) marks the real targets. Each target
records what its targets are in a typed ``TargetInfo`` (``Explanation.run.targets``: the boxes, the
token ids), whose ``caption`` and ``outline`` the pictures read.
"""

from torchlime.targets._records import BoxesInfo, ContinuationInfo, RegionInfo, SimilarityInfo, TranscriptInfo
from torchlime.targets.base import Bound, Target, TargetInfo, cat_rows, take_rows
from torchlime.targets.boxes import Boxes, box_iou
from torchlime.targets.continuation import Continuation
from torchlime.targets.region import Region
from torchlime.targets.similarity import Similarity
from torchlime.targets.transcript import Transcript

__all__ = [
    "Target",
    "Bound",
    "TargetInfo",
    "Boxes",
    "Region",
    "Similarity",
    "Continuation",
    "Transcript",
    "BoxesInfo",
    "RegionInfo",
    "SimilarityInfo",
    "ContinuationInfo",
    "TranscriptInfo",
    "box_iou",
    "take_rows",
    "cat_rows",
]
