"""``Boxes``: explain an object detector, every box of every image in one batched pass (D-RISE).

The score of a perturbed sample for target box j is the D-RISE similarity (Petsiuk et al., "Black-box
Explanation of Object Detectors via Saliency Maps", CVPR 2021) of its detections to that box: the best
match over the sample's detections k of IoU(box_j, box_k) x [label_k == label_j] x score_k (the paper's
cosine of class probabilities becomes the label match, its objectness the detection score). The targets
are the model's own detections on the unperturbed image above ``score_threshold`` (or boxes given), so
T = the most boxes of any image, padded and marked invalid beyond each image's own.

Detections come as torchvision's detectors return them (a list of dicts with ``boxes`` (n, 4) in x1, y1,
x2, y2, ``labels`` (n,), ``scores`` (n,); a scripted detector's ``(losses, detections)`` too), or through
``decode=`` from any output (e.g. a YOLO-style (rows, K, 4 + C) tensor) as the same list or as padded
tensors ``(boxes (c, K, 4), labels (c, K), scores (c, K))``. A list of per-image dicts is padded into
tensors once per chunk; every score is then computed for all rows, targets and detections at once.
Host reads: one per call (the number of boxes with the boxes themselves; for given boxes, which of them
the unperturbed detections match), none per chunk.

A given box that matches no detection on the unperturbed input (no overlap with its label and a score > 0)
scores 0 unless a perturbation makes the detector find it, so its coefficients are all (or nearly) 0: one
``UserWarning`` per call names such boxes and how many detections the detector returned. The usual cause is
the detector's own score threshold: a torchvision detector with random weights scores every box below its
default ``box_score_thresh=0.05`` and returns none (build it with ``box_score_thresh=0.0``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Optional, Union

import torch

from torchlime import _backend
from torchlime._util.checks import describe, from_numpy, user_stacklevel
from torchlime.targets._records import BoxesInfo
from torchlime.targets.base import Bound, Target, pad_ragged

Detections = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
#: an image's target boxes (B, T, 4), labels (B, T), valid (B, T), the boxes as lists, whether none is padding
Targets = tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[list[list[float]]], bool]
#: why a detector may return nothing to match, and the fix (the messages' advice)
OWN_THRESHOLD = (
    "a detector's own score threshold can filter every box before Boxes sees it: a torchvision detector with "
    "random weights scores its boxes below its box_score_thresh (Faster / Mask R-CNN, default 0.05) or "
    "score_thresh (RetinaNet, FCOS, SSD) and returns none; build it with that threshold at 0.0, e.g. "
    "fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0)"
)
BoxesSpec = Union[None, torch.Tensor, list[torch.Tensor], tuple[torch.Tensor, ...]]


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched IoU of boxes (x1, y1, x2, y2).

    Args:
        a: (c, T, 4) boxes.
        b: (c, K, 4) boxes.

    Returns:
        (c, T, K) intersection over union (0 where a box has no area).
    """
    return _backend.box_iou(a, b)


def _stack(parts: list[torch.Tensor], fill: float) -> torch.Tensor:
    """Stack per-row tensors of one shape, or pad ragged ones (``pad_ragged``): no host read either way.

    One row (one image's reference detections) is a view of its tensor: no operator, nothing copied.
    """
    if len(parts) == 1:
        return parts[0].unsqueeze(0)
    first = parts[0].shape
    return torch.stack(parts) if all(p.shape == first for p in parts) else pad_ragged(parts, fill)


def _from_dicts(out: list[dict[str, torch.Tensor]]) -> Detections:
    """Pad a list of per-image detection dicts (a Python loop over rows: the one the design allows).

    Only shapes are read per row (host metadata); the dtypes are converted once, on the padded tensors.
    """
    boxes = [d["boxes"] for d in out]
    if not all(isinstance(b, torch.Tensor) and b.ndim == 2 and b.shape[-1] == 4 for b in boxes):
        bad = next(b for b in boxes if not isinstance(b, torch.Tensor) or b.ndim != 2 or b.shape[-1] != 4)
        raise ValueError(f"Boxes needs tensors of boxes (n, 4) under 'boxes', got {describe(bad)}")
    # class-agnostic detections: label 0; detections without scores: score 1 (on the boxes' device)
    labels = [d["labels"] if "labels" in d else b.new_zeros(b.shape[0], dtype=torch.long) for d, b in zip(out, boxes)]
    scores = [d["scores"] if "scores" in d else b.new_ones(b.shape[0]) for d, b in zip(out, boxes)]
    for b, lab, sc in zip(boxes, labels, scores):
        if lab.shape != b.shape[:1] or sc.shape != b.shape[:1]:
            raise ValueError(
                f"Boxes needs one label and one score per box, got {b.shape[0]} boxes, labels of shape "
                f"{tuple(lab.shape)} and scores of shape {tuple(sc.shape)}"
            )
    return _stack(boxes, 0.0).float(), _stack(labels, -1).long(), _stack(scores, 0.0).float()


def detections(out: object, decode: Optional[Callable[[Any], object]] = None) -> Detections:
    """Padded (boxes (c, K, 4), labels long (c, K), scores (c, K)) of a detector's raw output.

    Args:
        out: the raw output of c rows.
        decode: turns it into a list of dicts or a (boxes, labels, scores) tuple first.

    Returns:
        The padded detections (labels -1 and scores 0 on padding).

    Raises:
        ValueError: an output that is neither, or padded tensors of mismatched shapes.
    """
    if decode is not None:
        out = decode(out)
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], dict) and isinstance(out[1], list):
        out = out[1]  # a scripted torchvision detector: (losses, detections)
    if isinstance(out, (tuple, list)) and len(out) == 3 and all(isinstance(t, torch.Tensor) for t in out):
        boxes, labels, scores = out
        if boxes.ndim != 3 or boxes.shape[-1] != 4 or labels.shape != boxes.shape[:2] or scores.shape != labels.shape:
            raise ValueError(
                "Boxes needs padded detections boxes (c, K, 4), labels (c, K), scores (c, K), got shapes "
                f"{tuple(boxes.shape)}, {tuple(labels.shape)}, {tuple(scores.shape)}"
            )
        return boxes.float(), labels.long(), scores.float()
    if isinstance(out, (list, tuple)) and all(isinstance(d, dict) and "boxes" in d for d in out):
        if not out:
            raise ValueError("Boxes got an empty list of detections")
        return _from_dicts(list(out))
    raise ValueError(
        "Boxes needs detections: a list of dicts with 'boxes', 'labels', 'scores' (torchvision) or "
        f"(boxes (c, K, 4), labels (c, K), scores (c, K)); pass decode= for other outputs, got {describe(out)}"
    )


def _numbers(value: object) -> object:
    """Nested Python numbers (boxes as lists of 4 numbers, labels as ints) as a tensor; anything else as is."""
    if isinstance(value, (list, tuple)) and value and not any(isinstance(v, torch.Tensor) for v in value):
        try:
            return torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            return value
    return value


def _box_parts(boxes: object) -> tuple[bool, list[torch.Tensor]]:
    """``(shared, parts)``: the given boxes as one (T, 4) tensor for every image, or one per image."""
    if isinstance(boxes, torch.Tensor) and boxes.ndim in (2, 3) and boxes.shape[-1] == 4:
        return boxes.ndim == 2, [boxes] if boxes.ndim == 2 else list(boxes)
    if isinstance(boxes, (list, tuple)) and boxes and all(isinstance(b, torch.Tensor) for b in boxes):
        if all(b.ndim == 2 and b.shape[-1] == 4 for b in boxes):
            return False, list(boxes)
    raise ValueError(f"`boxes` must be (T, 4), (B, T, 4) or a list of (T_b, 4) tensors, got {describe(boxes)}")


def _label_parts(labels: object, boxes: list[torch.Tensor], shared: bool) -> Optional[list[torch.Tensor]]:
    """The given labels, one (T_b,) tensor per part of ``boxes``, checked against the boxes' counts."""
    if labels is None:
        return None
    if isinstance(labels, torch.Tensor) and labels.ndim == 1:
        parts = [labels] * len(boxes)  # the same labels for every image's boxes
    elif isinstance(labels, torch.Tensor) and labels.ndim == 2 and not shared:
        parts = list(labels)
    elif isinstance(labels, (list, tuple)) and not shared and all(isinstance(x, torch.Tensor) for x in labels):
        parts = [x.reshape(-1) for x in labels]
    else:
        parts = []
    counts, wanted = [int(p.shape[0]) for p in parts], [int(b.shape[0]) for b in boxes]
    if counts != wanted or any(p.is_floating_point() or p.is_complex() for p in parts):
        raise ValueError(
            f"`labels` must give an integer label per box ({wanted} boxes per image), got {describe(labels)}"
        )
    return parts


def _read_given(boxes: list[torch.Tensor], labels: Optional[list[torch.Tensor]]) -> list[list[list[float]]]:
    """Check the given boxes and labels in one host read; the boxes as nested lists (T_b, 4) per part."""
    dev = boxes[0].device
    flat = [b.detach().reshape(-1).to(dev, torch.float64) for b in boxes]
    flat += [x.detach().reshape(-1).to(dev, torch.float64) for x in (labels or [])]
    values = torch.cat(flat).tolist()  # the one read, at construction
    out, at = [], 0
    for b in boxes:
        n = int(b.shape[0])
        out.append([values[at + 4 * j : at + 4 * j + 4] for j in range(n)])
        at += 4 * n
    if not any(out):
        raise ValueError("`boxes` must hold at least one box, got none")
    if not all(math.isfinite(v) for v in values[:at]) or any(
        x2 < x1 or y2 < y1 for part in out for x1, y1, x2, y2 in part
    ):
        raise ValueError("`boxes` must be finite (x1, y1, x2, y2) corners with x2 >= x1 and y2 >= y1")
    if any(v < 0 for v in values[at:]):
        raise ValueError("`labels` must be class indices >= 0 (leave labels=None to match any label)")
    return out


def _copied(value: Any) -> Any:
    """A copy of given boxes or labels: a tensor, or a list or tuple of tensors; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


class Boxes(Target):
    """Every detected (or given) box of every image as a target of one batched pass (D-RISE scores).

    Args:
        boxes: None (the model's own detections on the unperturbed images), or boxes (x1, y1, x2, y2):
            a (T, 4) tensor shared by every image (or nested lists of numbers), (B, T, 4), or a list of B
            tensors (T_b, 4).
        labels: the boxes' labels: (T,) for every image (or a list of ints), (B, T), or a list of B tensors
            (T_b,); None with given boxes: any label matches (``Explanation.target`` then records -1 for
            them too; ``target_valid`` tells them from padding).
        score_threshold: the least score of a reference detection that becomes a target (with
            ``boxes=None``).
        decode: turns the model's raw output into detections (see ``detections``); None for torchvision.

    Raises:
        ValueError: boxes or labels of the wrong shape or values (before any model call); with
            ``boxes=None``, no detection reaches ``score_threshold`` on any image.

    Example:
        >>> import torchlime
        >>> def detector(x):  # one box whose score is the brightness of the image's top-left quarter
        ...     s = x[:, :, :4, :4].mean((1, 2, 3))
        ...     return [{"boxes": torch.tensor([[0.0, 0, 4, 4]]), "labels": torch.tensor([1]), "scores": v[None]}
        ...             for v in s]
        >>> exp = torchlime.explain(detector, torch.rand(2, 1, 8, 8) + 1, torch.arange(64).view(1, 1, 8, 8) // 32,
        ...                         target=Boxes(score_threshold=0.1), n_samples=64)
        >>> exp.coef.shape                                   # (B, T = 1 box, F = 2 halves)
        torch.Size([2, 1, 2])
    """

    name = "Boxes"
    _parts: list[torch.Tensor]

    def __init__(
        self,
        boxes: BoxesSpec = None,
        labels: Union[None, torch.Tensor, list[torch.Tensor], tuple[torch.Tensor, ...]] = None,
        score_threshold: float = 0.5,
        decode: Optional[Callable[[Any], object]] = None,
    ) -> None:
        # copies: boxes the caller edits later are not the ones scored (nor those recorded in meta)
        given, given_labels = _copied(_numbers(from_numpy(boxes))), _copied(_numbers(from_numpy(labels)))
        if given_labels is not None and given is None:
            raise ValueError("`labels` needs `boxes`: the labels of the given boxes")
        if not isinstance(score_threshold, (int, float)) or isinstance(score_threshold, bool):
            raise TypeError(f"`score_threshold` must be a number, got {describe(score_threshold)}")
        if decode is not None and not callable(decode):
            raise TypeError(f"`decode` must be a callable, got {describe(decode)}")
        self.boxes, self.labels, self.score_threshold = given, given_labels, float(score_threshold)
        self.decode = decode
        self._shared, self._parts = True, []  # given boxes: one shared part, or one per image
        self._labels: Optional[list[torch.Tensor]] = None
        self._host: list[list[list[float]]] = []
        if given is not None:
            self._shared, self._parts = _box_parts(given)
            self._labels = _label_parts(given_labels, self._parts, self._shared)
            self._host = _read_given(self._parts, self._labels)

    def check(self, batch: int) -> None:
        """Refuse per-image boxes or labels of another batch size."""
        if self.boxes is None or self._shared:
            return
        n = len(self._parts)
        if n != batch:
            raise ValueError(f"`boxes` holds boxes of {n} images, not of the {batch} explained")

    def _given(self, batch: int, dev: torch.device) -> Targets:
        """The given targets on ``dev`` (``Targets``: 0 boxes and -1 labels on padding).

        Returns:
            boxes (B, T, 4), labels (B, T), valid (B, T), the boxes as lists, whether none is padding.
        """
        boxes, host = (self._parts * batch, self._host * batch) if self._shared else (self._parts, self._host)
        labels = self._labels
        if labels is not None and self._shared:
            labels = labels * batch
        t_boxes = pad_ragged([b.detach().float().to(dev) for b in boxes], 0.0)
        if labels is None:
            t_labels = torch.full(t_boxes.shape[:2], -1, dtype=torch.long, device=dev)
        else:
            t_labels = pad_ragged([x.detach().long().to(dev) for x in labels], -1)
        counts = torch.tensor([len(h) for h in host], device=dev)
        valid = torch.arange(t_boxes.shape[1], device=dev) < counts.unsqueeze(1)
        width = t_boxes.shape[1]
        info = [[list(box) for box in h] + [[0.0] * 4 for _ in range(width - len(h))] for h in host]
        full = all(len(h) == width for h in host)  # no padding
        return t_boxes * valid.unsqueeze(-1), torch.where(valid, t_labels, -1), valid, info, full

    def _detected(self, det: Detections) -> Targets:
        """Each image's detections above the threshold, kept first in the model's order, padded to T.

        One kernel door ranks them (``_backend.rank_boxes``); the call's one host read brings the counts
        and the ranked boxes together.
        """
        boxes, labels, scores = det
        b, k = labels.shape
        packed, ranked_labels, ranked_valid = _backend.rank_boxes(boxes, labels, scores, self.score_threshold)
        values = packed.tolist()  # the call's one host read
        counts = [int(c) for c in values[b * k * 4 :]]
        t = max(counts, default=0)
        if t == 0:
            self._raise_none_found(det)
        info = [
            [values[(i * k + j) * 4 : (i * k + j) * 4 + 4] if j < counts[i] else [0.0] * 4 for j in range(t)]
            for i in range(b)
        ]
        ranked = packed[: b * k * 4].view(b, k, 4)  # views: the first T of every image's row
        return ranked[:, :t], ranked_labels[:, :t], ranked_valid[:, :t], info, all(c == t for c in counts)

    def _raise_none_found(self, det: Detections) -> None:
        """The error when no detection reaches the threshold (the best score and the count read here)."""
        boxes, labels, scores = det
        b, k = labels.shape
        best = scores.masked_fill(labels < 0, float("-inf")).amax().view(1) if k else scores.new_zeros(1)
        found = (labels >= 0).sum().to(boxes.dtype).view(1)
        top, n = torch.cat((best.to(boxes.dtype), found)).tolist()
        raise ValueError(
            f"Boxes found no detection with a score >= score_threshold={self.score_threshold} on any image "
            f"(best {top if k else 'none'}); pass boxes= or a lower score_threshold. The detector "
            f"returned {int(n)} detections on the {b} unperturbed images: {OWN_THRESHOLD}"
        )

    def bind(self, reference: object, batch: int) -> Bound:
        """Fix each image's boxes: its own detections above the threshold, or the boxes given.

        Warns:
            UserWarning: given boxes that no detection of their unperturbed image matches (named, once).
        """
        det = detections(reference, self.decode)
        if det[0].shape[0] != batch:
            raise ValueError(f"Boxes got detections of {det[0].shape[0]} images from the model, expected {batch}")
        dev = det[0].device
        if self.boxes is not None:
            t_boxes, t_labels, valid, info, full = self._given(batch, dev)
        else:
            t_boxes, t_labels, valid, info, full = self._detected(det)
        targets = (t_boxes, t_labels, valid)
        if self.boxes is not None:  # given boxes: say which the unperturbed detections do not match
            _warn_unmatched(_backend.match_boxes(targets, None, det) > 0, valid, t_labels, det[1], info)

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            found = detections(out, self.decode)
            if found[0].shape[0] != rows.shape[0]:
                raise ValueError(f"Boxes got detections of {found[0].shape[0]} rows, expected {rows.shape[0]}")
            found = (found[0].to(dev), found[1].to(dev), found[2].to(dev))
            # one input: every row's targets are its own (shared); else each row's input's, read by the door
            return _backend.match_boxes(targets, None if batch == 1 else rows.to(dev), found)

        # a row's score reads its own detections only, and detections are small: scored once per pass
        return Bound(t_labels, valid, score, BoxesInfo(info), whole_pass=True, all_valid=full)


def _warn_unmatched(
    matched: torch.Tensor, valid: torch.Tensor, labels: torch.Tensor, found: torch.Tensor, info: list[list[list[float]]]
) -> None:
    """One ``UserWarning`` naming the given boxes that no unperturbed detection matches (one host read).

    Args:
        matched: bool (B, T) whether a target box matches a detection of its unperturbed image.
        valid: bool (B, T) the real target boxes.
        labels: long (B, T) their labels (-1: any label).
        found: long (B, K) the labels of the padded unperturbed detections (-1: padding).
        info: (B, T, 4) the boxes as nested lists.
    """
    b, t = valid.shape
    parts = (matched | ~valid, valid, labels, (found >= 0).sum(1, keepdim=True))
    values = torch.cat([p.to(valid.device, torch.long).reshape(b, -1) for p in parts], 1).tolist()  # the read
    missed = [(i, j) for i, row in enumerate(values) for j in range(t) if not row[j]]
    if not missed:
        return
    named = []
    for i, j in missed[:3]:
        row = values[i]
        label, n = ("any label" if row[2 * t + j] < 0 else f"label {row[2 * t + j]}"), row[3 * t]
        corners = ", ".join(f"{v:g}" for v in info[i][j])
        named.append(
            f"box {j} of {sum(row[t : 2 * t])} ({corners}), {label}, of image {i} (the detector returned {n} "
            f"detection{'' if n == 1 else 's'} on it)"
        )
    more = f" and {len(missed) - 3} more" if len(missed) > 3 else ""
    warnings.warn(
        f"Boxes: {'; '.join(named)}{more} matched no detection on the unperturbed input (none overlaps it with "
        f"its label and a score > 0): its score is 0 there and its coefficients are likely all 0. Check the "
        f"boxes (x1, y1, x2, y2 in the image's pixels) and labels; else {OWN_THRESHOLD}",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
