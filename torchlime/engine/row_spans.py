"""Where a chunk's rows change input: spans the blend perturbs without gathering the inputs.

Rows reach the model input-major (``rows.RowOrder``), so a chunk that holds rows of several inputs is
a few stretches of one input each (and, in the first chunk, the unperturbed inputs, one row each).
Blending stretch by stretch lets every stretch read its one input, fill and feature map as they are,
where a gather would first copy them once per row: three chunk-sized copies (the feature map as
int64) that cost memory traffic and peak memory on every such chunk.
"""

from __future__ import annotations

from typing import Optional, Sequence

#: the most spans a chunk is blended in; a chunk of more (many short inputs) is gathered in one go
MAX_SPANS = 16

Spans = tuple[tuple[int, int, int], ...]


def input_spans(active: Sequence[int], refs: int, width: int, start: int, stop: int) -> Optional[Spans]:
    """Rows ``start:stop`` of a pass (``rows.RowOrder``) as host spans ``(lo, hi, input)`` relative to ``start``.

    Every span holds rows of one input, except the unperturbed inputs' rows at the head of the first
    chunk, which form one span of input -1 (rows of several inputs, gathered) unless they are one.

    Args:
        active: the pass's inputs, in order.
        refs: its leading unperturbed rows, one per input of ``active`` (0 or ``len(active)``).
        width: the rows of each input after them.
        start: the chunk's first row.
        stop: the row after its last.

    Returns:
        The spans in row order, or None when there would be more than ``MAX_SPANS``.

    Example:
        >>> input_spans([0, 1, 2], 3, 3, 0, 9)  # 3 references, then 3 samples of each input
        ((0, 3, -1), (3, 6, 0), (6, 9, 1))
    """
    spans: list[tuple[int, int, int]] = []
    lo = start
    if lo < refs:
        hi = min(stop, refs)
        spans.append((0, hi - start, active[lo] if hi - lo == 1 else -1))
        lo = hi
    width = max(width, 1)
    while lo < stop:
        j = (lo - refs) // width
        hi = min(stop, refs + (j + 1) * width)
        spans.append((lo - start, hi - start, active[j]))
        if len(spans) > MAX_SPANS:
            return None
        lo = hi
    return tuple(spans)
