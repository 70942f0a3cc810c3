"""The detector target's two reductions, one launch each (Triton).

``rank`` gives what ``reference_boxes.rank_torch`` gives (each image's detections above a threshold,
first and in the model's order, as its target boxes): one program per image, a prefix sum places every
detection. ``match`` gives what ``reference_boxes.match_torch`` gives (the D-RISE similarity of every
row's detections to its target boxes): one program per row and block of targets, looping over the
detections. The references take about 10 and 25 small operations, each a launch on a GPU. Integer and
bool results are exact; the similarities agree to float32 rounding (the kernel's division and order of
the maximum may differ in the last bit). Only absolute imports of torch/triton and relative imports
inside this folder: it ships as ``torchlime.kernels``.
"""

from __future__ import annotations

import math
import struct
from typing import Optional

import torch
import triton
import triton.language as tl
from triton.runtime.jit import JITFunction

from .reference import launch_device
from .reference_boxes import match_torch, rank_torch

__all__ = ["interpreted", "match", "match_torch", "rank", "rank_torch", "supports_match", "supports_rank"]

MAX_DETECTIONS = 8192  # a rank program holds an image's detections at once
BLOCK_T, BLOCK_K = 16, 64  # targets per match program, detections per step of its loop
_MAX_GRID_Y = 65535  # CUDA limit of grid dim 1
_TINY = torch.finfo(torch.float32).tiny


@triton.jit
def _rank_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    boxes_ptr,
    labels_ptr,
    scores_ptr,
    packed_ptr,
    out_labels_ptr,
    valid_ptr,
    n_dets,
    n_images,
    threshold,
    BLOCK: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK)
    in_k = k < n_dets
    at = b * n_dets + k
    score = tl.load(scores_ptr + at, mask=in_k, other=0.0)
    label = tl.load(labels_ptr + at, mask=in_k, other=-1)
    keep = (score >= threshold) & (label >= 0) & in_k
    kept = keep.to(tl.int32)
    before = tl.cumsum(kept, axis=0)  # kept detections up to k, k included
    count = tl.sum(kept, axis=0)
    dest = b * n_dets + tl.where(keep, before - 1, count + k - before).to(tl.int64)  # a stable partition
    gate = keep.to(tl.float32)
    for c in tl.static_range(4):
        v = tl.load(boxes_ptr + at * 4 + c, mask=in_k, other=0.0)
        tl.store(packed_ptr + dest * 4 + c, v * gate, mask=in_k)
    tl.store(out_labels_ptr + dest, tl.where(keep, label, -1), mask=in_k)
    tl.store(valid_ptr + dest, keep.to(tl.uint8), mask=in_k)
    tl.store(packed_ptr + n_images * n_dets * 4 + b, count.to(tl.float32))


@triton.jit
def _match_kernel(  # type: ignore[no-untyped-def]  # noqa: PLR0913
    boxes_ptr,
    labels_ptr,
    valid_ptr,
    rows_ptr,
    d_boxes_ptr,
    d_labels_ptr,
    d_scores_ptr,
    out_ptr,
    n_targets,
    stride,
    n_dets,
    shared,
    tiny,
    HAS_ROWS: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # every maximum and minimum propagates NaN, as torch's maximum, minimum and clamp do
    r = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    in_t = t < n_targets
    if HAS_ROWS:
        src = tl.load(rows_ptr + r)
    else:
        src = r * (1 - shared)  # one shared row of targets, or row r's own
    at = src * stride + t  # the targets of a row may be the first T of a longer row
    ax1 = tl.load(boxes_ptr + at * 4, mask=in_t, other=0.0)
    ay1 = tl.load(boxes_ptr + at * 4 + 1, mask=in_t, other=0.0)
    ax2 = tl.load(boxes_ptr + at * 4 + 2, mask=in_t, other=0.0)
    ay2 = tl.load(boxes_ptr + at * 4 + 3, mask=in_t, other=0.0)
    label = tl.load(labels_ptr + at, mask=in_t, other=-1)
    valid = tl.load(valid_ptr + at, mask=in_t, other=0)
    area_a = tl.maximum(ax2 - ax1, 0.0, propagate_nan=tl.PropagateNan.ALL) * tl.maximum(
        ay2 - ay1, 0.0, propagate_nan=tl.PropagateNan.ALL
    )
    best = tl.full((BLOCK_T,), float("-inf"), tl.float32)
    nan = tl.zeros((BLOCK_T,), tl.int32)
    for k0 in range(0, n_dets, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        in_k = k < n_dets
        d = r * n_dets + k
        bx1 = tl.load(d_boxes_ptr + d * 4, mask=in_k, other=0.0)
        by1 = tl.load(d_boxes_ptr + d * 4 + 1, mask=in_k, other=0.0)
        bx2 = tl.load(d_boxes_ptr + d * 4 + 2, mask=in_k, other=0.0)
        by2 = tl.load(d_boxes_ptr + d * 4 + 3, mask=in_k, other=0.0)
        d_label = tl.load(d_labels_ptr + d, mask=in_k, other=-1)
        d_score = tl.load(d_scores_ptr + d, mask=in_k, other=0.0)
        w = tl.minimum(ax2[:, None], bx2[None, :], propagate_nan=tl.PropagateNan.ALL) - tl.maximum(
            ax1[:, None], bx1[None, :], propagate_nan=tl.PropagateNan.ALL
        )
        h = tl.minimum(ay2[:, None], by2[None, :], propagate_nan=tl.PropagateNan.ALL) - tl.maximum(
            ay1[:, None], by1[None, :], propagate_nan=tl.PropagateNan.ALL
        )
        inter = tl.maximum(w, 0.0, propagate_nan=tl.PropagateNan.ALL) * tl.maximum(
            h, 0.0, propagate_nan=tl.PropagateNan.ALL
        )
        area_b = tl.maximum(bx2 - bx1, 0.0, propagate_nan=tl.PropagateNan.ALL) * tl.maximum(
            by2 - by1, 0.0, propagate_nan=tl.PropagateNan.ALL
        )
        union = area_a[:, None] + area_b[None, :] - inter
        iou = tl.where(union > 0, inter / tl.maximum(union, tiny, propagate_nan=tl.PropagateNan.ALL), 0.0)
        same = (label[:, None] == d_label[None, :]) | (label[:, None] < 0)
        sim = iou * same.to(tl.float32) * d_score[None, :] * (d_label >= 0).to(tl.float32)[None, :]
        is_nan = (sim != sim) & in_k[None, :]
        nan = tl.maximum(nan, tl.max(is_nan.to(tl.int32), axis=1))
        sim = tl.where(in_k[None, :] & (sim == sim), sim, float("-inf"))
        best = tl.maximum(best, tl.max(sim, axis=1))
    best = tl.where(nan > 0, float("nan"), best)
    best = tl.where(n_dets > 0, best, 0.0)  # no detections: 0
    tl.store(out_ptr + r * n_targets + t, best * valid.to(tl.float32), mask=in_t)


def interpreted() -> bool:
    """True when this module was imported under ``TRITON_INTERPRET=1`` (the kernels run on CPU tensors)."""
    return not isinstance(_match_kernel, JITFunction)


def _on_device(dev: torch.device) -> bool:
    return dev.type == "cuda" or (dev.type == "cpu" and interpreted())


def _plain(t: torch.Tensor, dtype: torch.dtype, dev: torch.device) -> bool:
    return t.dtype == dtype and t.device == dev and t.is_contiguous()


def _rows_of(t: torch.Tensor, dtype: torch.dtype, dev: torch.device, stride: int, inner: int) -> bool:
    """``t`` (n, T, ...) with contiguous rows ``stride * inner`` elements apart (any apart when n is 1)."""
    if t.dtype != dtype or t.device != dev or not t[:1].is_contiguous():
        return False
    return t.shape[0] == 1 or t.stride(0) == stride * inner


def supports_rank(boxes: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor) -> bool:
    """Whether ``rank`` takes these operands (else use ``rank_torch``).

    Args:
        boxes: float32 (B, K, 4) contiguous detections.
        labels: long (B, K) contiguous.
        scores: float32 (B, K) contiguous.
    """
    dev = boxes.device
    if not _on_device(dev) or boxes.ndim != 3 or boxes.shape[-1] != 4:
        return False
    if not (
        _plain(boxes, torch.float32, dev) and _plain(labels, torch.long, dev) and _plain(scores, torch.float32, dev)
    ):
        return False
    return labels.shape == boxes.shape[:2] and scores.shape == labels.shape and boxes.shape[1] <= MAX_DETECTIONS


def _float32(x: float) -> float:
    """``x`` rounded to float32 as torch rounds a Python number it compares a float32 tensor with."""
    try:
        rounded: float = struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)
    return rounded


def rank(
    boxes: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor, threshold: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``rank_torch(boxes, labels, scores, threshold)`` in one launch (``supports_rank`` must hold)."""
    b, k = labels.shape
    packed = torch.empty(b * k * 4 + b, dtype=torch.float32, device=boxes.device)
    out_labels = torch.empty(b, k, dtype=torch.long, device=boxes.device)
    valid = torch.empty(b, k, dtype=torch.bool, device=boxes.device)
    block = triton.next_power_of_2(max(k, 1))
    with launch_device(boxes):
        _rank_kernel[(b,)](
            boxes, labels, scores, packed, out_labels, valid.view(torch.uint8), k, b, _float32(threshold), BLOCK=block
        )
    return packed, out_labels, valid


def supports_match(
    boxes: torch.Tensor,
    labels: torch.Tensor,
    valid: torch.Tensor,
    rows: Optional[torch.Tensor],
    d_boxes: torch.Tensor,
    d_labels: torch.Tensor,
    d_scores: torch.Tensor,
) -> bool:
    """Whether ``match`` takes these operands (else use ``match_torch``), whose arguments they are.

    Contiguous float32 boxes and scores, long labels and rows, bool valid, all on one device.
    """
    dev = d_boxes.device
    if not _on_device(dev) or boxes.ndim != 3 or d_boxes.ndim != 3 or boxes.shape[-1] != 4 or d_boxes.shape[-1] != 4:
        return False
    found = (
        _plain(d_boxes, torch.float32, dev),
        _plain(d_scores, torch.float32, dev),
        _plain(d_labels, torch.long, dev),
    )
    if not all(found) or (rows is not None and not _plain(rows, torch.long, dev)):
        return False
    stride = labels.stride(0)  # the targets: the first T of rows of any length, in place
    targets = (
        _rows_of(boxes, torch.float32, dev, stride, 4),
        _rows_of(labels, torch.long, dev, stride, 1),
        _rows_of(valid, torch.bool, dev, stride, 1),
    )
    if not all(targets) or labels.shape != boxes.shape[:2] or valid.shape != labels.shape:
        return False
    c, (n, t) = d_boxes.shape[0], labels.shape
    if d_labels.shape != d_boxes.shape[:2] or d_scores.shape != d_labels.shape:
        return False
    rows_ok = n == c or n == 1 if rows is None else rows.shape == (c,)
    return rows_ok and triton.cdiv(t, BLOCK_T) <= _MAX_GRID_Y


def match(
    boxes: torch.Tensor,
    labels: torch.Tensor,
    valid: torch.Tensor,
    rows: Optional[torch.Tensor],
    d_boxes: torch.Tensor,
    d_labels: torch.Tensor,
    d_scores: torch.Tensor,
) -> torch.Tensor:
    """``match_torch(...)`` in one launch: (c, T) float32 (``supports_match`` must hold)."""
    (c, k), t = d_labels.shape, labels.shape[1]
    out = torch.empty(c, t, dtype=torch.float32, device=d_boxes.device)
    if c == 0 or t == 0:
        return out
    shared = int(rows is None and boxes.shape[0] == 1)
    grid = (c, triton.cdiv(t, BLOCK_T))
    with launch_device(d_boxes):
        _match_kernel[grid](
            boxes,
            labels,
            valid.view(torch.uint8),
            d_labels if rows is None else rows,  # any long pointer where there are no rows
            d_boxes,
            d_labels,
            d_scores,
            out,
            t,
            labels.stride(0),
            k,
            shared,
            _TINY,
            HAS_ROWS=rows is not None,
            BLOCK_T=BLOCK_T,
            BLOCK_K=BLOCK_K,
        )
    return out
