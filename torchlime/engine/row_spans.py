"""Where a chunk's rows change input: spans the blend perturbs without gathering the inputs.

Rows reach the model input-major (``rows.RowOrder``), so a chunk that holds rows of several inputs is
a few stretches of one input each (and, in the first chunk, the unperturbed inputs, one row each).
Blending stretch by stretch lets every stretch read its one input, fill and feature map as they are,
where a gather would first copy them once per row: three chunk-sized copies (the feature map as
int64) that cost memory traffic and peak memory on every such chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover - types only
    from torchlime.engine.rows import RowOrder

#: the most spans a chunk is blended in; a chunk of more (many short inputs) is gathered in one go
MAX_SPANS = 16

Spans = tuple[tuple[int, int, int], ...]


def input_spans(order: RowOrder, start: int, stop: int) -> Optional[Spans]:
    """The rows ``start:stop`` of ``order`` as host spans ``(lo, hi, input)`` relative to ``start``.

    Every span holds rows of one input, except the unperturbed inputs' rows at the head of the first
    chunk, which form one span of input -1 (rows of several inputs, gathered) unless they are one.

    Args:
        order: the pass's rows.
        start: the chunk's first row.
        stop: the row after its last.

    Returns:
        The spans in row order, or None when there would be more than ``MAX_SPANS``.

    Example:
        >>> from torchlime.engine.rows import RowOrder
        >>> input_spans(RowOrder([0, 1, 2], 0, 4, torch.device("cpu")), 0, 9)  # 3 references, 3 x 3 samples
        ((0, 3, -1), (3, 6, 0), (6, 9, 1))
    """
    spans: list[tuple[int, int, int]] = []
    lo = start
    if lo < order.refs:
        hi = min(stop, order.refs)
        spans.append((0, hi - start, order.active[lo] if hi - lo == 1 else -1))
        lo = hi
    width = max(order.width, 1)
    while lo < stop:
        j = (lo - order.refs) // width
        hi = min(stop, order.refs + (j + 1) * width)
        spans.append((lo - start, hi - start, order.active[j]))
        if len(spans) > MAX_SPANS:
            return None
        lo = hi
    return tuple(spans)
