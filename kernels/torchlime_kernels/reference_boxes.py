"""The detector target's two reductions in torch (``boxes.py``'s references, the same signatures).

``rank_torch`` fixes each image's target boxes from its unperturbed detections (those above a
threshold, kept first in the model's order); ``match_torch`` scores every row's detections against its
target boxes (D-RISE: the best IoU x same label x detection score). Each is a few dozen small
operations here, one launch as a kernel. ``rank`` and ``match`` choose between a reference and its kernel for
``torchlime._backend``'s doors. Only absolute imports of torch (the kernels' module, which imports Triton, only
when chosen): it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

from typing import Optional

import torch

__all__ = ["box_iou_torch", "match", "match_torch", "rank", "rank_torch"]


def box_iou_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched IoU of boxes (x1, y1, x2, y2).

    Args:
        a: (c, T, 4) boxes.
        b: (c, K, 4) boxes.

    Returns:
        (c, T, K) intersection over union (0 where a box has no area).

    Example:
        >>> a = torch.tensor([[[0.0, 0, 2, 2]]])
        >>> box_iou_torch(a, torch.tensor([[[1.0, 0, 3, 2], [5.0, 5, 6, 6]]]))
        tensor([[[0.3333, 0.0000]]])
    """
    lt = torch.maximum(a[:, :, None, :2], b[:, None, :, :2])
    rb = torch.minimum(a[:, :, None, 2:], b[:, None, :, 2:])
    inter = (rb - lt).clamp_min(0).prod(-1)
    area_a = (a[..., 2:] - a[..., :2]).clamp_min(0).prod(-1)
    area_b = (b[..., 2:] - b[..., :2]).clamp_min(0).prod(-1)
    union = area_a[:, :, None] + area_b[:, None, :] - inter
    return torch.where(union > 0, inter / union.clamp_min(torch.finfo(union.dtype).tiny), 0.0)


def match_torch(
    boxes: torch.Tensor,
    labels: torch.Tensor,
    valid: torch.Tensor,
    rows: Optional[torch.Tensor],
    d_boxes: torch.Tensor,
    d_labels: torch.Tensor,
    d_scores: torch.Tensor,
) -> torch.Tensor:
    """D-RISE similarity of each row's detections to its target boxes, 0 on padded targets.

    ``sim[r, t] = max_k IoU(box_t, d_box_k) x [label_t in (-1, d_label_k)] x d_score_k x [d_label_k >= 0]``,
    times ``valid[t]`` (0 without detections).

    Args:
        boxes: (1 or B, T, 4) target boxes (x1, y1, x2, y2) of the inputs.
        labels: long (1 or B, T) their labels (-1: any label).
        valid: bool (1 or B, T) the targets that exist.
        rows: long (c,) the input of each row, or None: row r's targets are the inputs' row r (or the one
            shared row).
        d_boxes: (c, K, 4) each row's padded detections.
        d_labels: long (c, K) their labels (-1: padding).
        d_scores: (c, K) their scores.

    Returns:
        (c, T) the similarities.

    Example:
        >>> box, label, valid = torch.tensor([[[0.0, 0, 2, 2]]]), torch.tensor([[1]]), torch.tensor([[True]])
        >>> det = (torch.tensor([[[1.0, 0, 3, 2]]]), torch.tensor([[1]]), torch.tensor([[0.9]]))
        >>> match_torch(box, label, valid, None, *det)
        tensor([[0.3000]])
    """
    c = d_boxes.shape[0]
    if rows is None:  # broadcast views, no operator
        boxes, labels, valid = boxes.expand(c, -1, -1), labels.expand(c, -1), valid.expand(c, -1)
    else:
        boxes, labels, valid = boxes[rows], labels[rows], valid[rows]
    if d_boxes.shape[1] == 0:
        return boxes.new_zeros(boxes.shape[:2]) * valid
    iou = box_iou_torch(boxes, d_boxes)
    same = (labels[:, :, None] == d_labels[:, None, :]) | (labels[:, :, None] < 0)
    sim = iou * same * d_scores[:, None, :] * (d_labels[:, None, :] >= 0)
    return sim.amax(-1) * valid


def rank_torch(
    boxes: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor, threshold: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each image's detections with a score >= ``threshold``, first and in the model's order: its targets.

    Args:
        boxes: (B, K, 4) the unperturbed images' padded detections (x1, y1, x2, y2).
        labels: long (B, K) their labels (-1: padding, never a target).
        scores: (B, K) their scores.
        threshold: the least score of a target.

    Returns:
        ``(packed, ranked_labels, valid)``: ``packed`` (B * K * 4 + B) in the boxes' dtype, the ranked
        boxes (B, K, 4) times ``valid`` then the number of targets of each image (one read brings both to
        the host); long (B, K) the ranked labels (-1 beyond the targets); bool (B, K) the targets.

    Example:
        >>> boxes = torch.tensor([[[0.0, 0, 1, 1], [0, 0, 2, 2]]])
        >>> packed, labels, valid = rank_torch(boxes, torch.tensor([[3, 4]]), torch.tensor([[0.1, 0.9]]), 0.5)
        >>> packed.tolist(), labels.tolist(), valid.tolist()
        ([0.0, 0.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0], [[4, -1]], [[True, False]])
    """
    keep = (scores >= threshold) & (labels >= 0)  # (B, K); padding is never a target
    order = (~keep).long().argsort(dim=1, stable=True)  # kept detections first, in the model's order
    valid = keep.gather(1, order)
    ranked = boxes.gather(1, order.unsqueeze(-1).expand(-1, -1, 4)) * valid.unsqueeze(-1)
    ranked_labels = torch.where(valid, labels.gather(1, order), -1)
    return torch.cat((ranked.flatten(), keep.sum(1).to(ranked.dtype))), ranked_labels, valid


def rank(
    boxes: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor, threshold: float, kernel: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``rank_torch``'s result: from the Triton kernel where ``kernel`` and it takes the operands, else from it.

    Args:
        boxes: (B, K, 4) the detections.
        labels: long (B, K) their labels (-1: padding).
        scores: (B, K) their scores.
        threshold: the least score of a target.
        kernel: whether the Triton kernel may run (``torchlime._backend.use_triton``).
    """
    if kernel:
        from . import boxes as triton_boxes

        if triton_boxes.supports_rank(boxes, labels, scores):
            return triton_boxes.rank(boxes, labels, scores, threshold)
    return rank_torch(boxes, labels, scores, threshold)


def match(
    targets: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    rows: Optional[torch.Tensor],
    found: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    kernel: bool,
) -> torch.Tensor:
    """``match_torch``'s (c, T) result: from the Triton kernel where ``kernel`` and it takes the operands, else from it.

    Args:
        targets: ``(boxes, labels, valid)``: (1 or B, T, 4), long (1 or B, T), bool (1 or B, T).
        rows: long (c,) the input of each row, or None.
        found: ``(boxes, labels, scores)``: the rows' padded detections (c, K, 4), long (c, K), (c, K).
        kernel: whether the Triton kernel may run (``torchlime._backend.use_triton``).
    """
    if kernel:
        from . import boxes as triton_boxes

        if triton_boxes.supports_match(*targets, rows, *found):
            return triton_boxes.match(*targets, rows, *found)
    return match_torch(*targets, rows, *found)
