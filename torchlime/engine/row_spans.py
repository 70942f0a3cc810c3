"""Where a chunk's rows change input: spans the blend perturbs without gathering the inputs.

Rows reach the model input-major (``rows.RowOrder``), so a chunk that holds rows of several inputs is
a few stretches of one input each (and, in the first chunk, the unperturbed inputs, one row each).
Blending stretch by stretch lets every stretch read its one input, fill and feature map as they are,
where a gather would first copy them once per row: three chunk-sized copies (the feature map as
int64) that cost memory traffic and peak memory on every such chunk.
"""

from __future__ import annotations

from typing import Optional, Protocol, Sequence

import torch

from torchlime._util.upload import upload
from torchlime.stages.fixed_cost import ShapeCache, columns

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


#: passes (and fit blocks) of at most this many rows keep their row coordinates in ``_ROWS``
CACHED_ROWS = 1 << 16
_ROWS: ShapeCache[tuple[torch.Tensor, ...]] = ShapeCache()


def row_coords(
    inputs: Sequence[int], active: torch.Tensor, layout: tuple[int, int, int], start: int, stop: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The inputs and samples, long (c,) each, of rows ``start:stop`` of a pass (``rows.RowOrder.coords``).

    They depend only on the pass's layout and the rows, so a pass of at most ``CACHED_ROWS`` rows is
    computed once per layout (``stages.fixed_cost.ShapeCache``) and the same tensors serve later calls.

    Args:
        inputs: the pass's inputs, in order (host ints).
        active: long (n,) the same on the rows' device.
        layout: ``(refs, width, s_lo)``: the leading unperturbed rows (0 or n), the samples of each input
            after them and the first of those samples.
        start: the first row.
        stop: the row after the last.
    """
    refs, width, s_lo = layout

    def make() -> tuple[torch.Tensor, ...]:
        r = torch.arange(start, stop, device=active.device)
        ref = r < refs
        rest = (r - refs).clamp_min(0)
        j = torch.where(ref, r, rest // max(width, 1))
        b = active[j.clamp_max(active.shape[0] - 1)]
        return b, torch.where(ref, 0, rest % max(width, 1) + s_lo)

    if stop - start > CACHED_ROWS:
        b, s = make()
    else:
        key = ("coords", tuple(inputs), str(active.device), layout, start, stop)
        b, s = _ROWS.get(None, key, make)
    return b, s


def sample_rows(
    layout: tuple[int, int, int], j0: int, n: int, s_lo: int, s_hi: int, device: torch.device
) -> torch.Tensor:
    """Long (n, s_hi - s_lo): the pass's rows of samples ``s_lo..s_hi-1`` of its inputs ``j0..j0+n-1``.

    ``rows.RowOrder.rows_of``, cached like ``row_coords`` for at most ``CACHED_ROWS`` of them.

    Args:
        layout: the pass's ``(refs, width, s_lo)`` (``row_coords``).
        j0: the position of the first input in the pass.
        n: the number of inputs.
        s_lo: the first sample.
        s_hi: the sample after the last.
        device: where the rows go.
    """
    refs, width, first = layout

    def make() -> tuple[torch.Tensor, ...]:
        j = torch.arange(j0, j0 + n, device=device).unsqueeze(1)
        s = torch.arange(s_lo, s_hi, device=device).unsqueeze(0)
        return (torch.where(s == 0, j, refs + j * width + s - first),)

    if n * (s_hi - s_lo) > CACHED_ROWS:
        return make()[0]
    return _ROWS.get(None, ("rows", layout, j0, n, s_lo, s_hi, str(device)), make)[0]


def active_indices(active: list[int], device: torch.device) -> torch.Tensor:
    """Long (n,) ``active`` on ``device``; every input in order is the cached ``0..n-1``.

    A CUDA graph capture of the passes (``engine.graphed``) reads that one without a copy from the host.

    Args:
        active: the inputs of a pass, in row order.
        device: where the indices go.

    Returns:
        Long (n,) the indices.
    """
    if active == list(range(len(active))):
        return columns(len(active), device)
    return upload(active, torch.long, device)


class Pass(Protocol):
    """What ``pass_rows`` reads of a pass (``rows.RowOrder``)."""

    active: list[int]
    refs: int
    s_lo: int
    width: int
    n_rows: int

    def coords(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """The inputs and samples of rows ``start:stop`` and their first and last input."""
        ...


def pass_rows(order: Optional[Pass], batch: int, n_samples: int, b: list[torch.Tensor]) -> tuple[bool, torch.Tensor]:
    """Whether rows kept in parts are every sample of every input in a pass's order, and their inputs.

    Args:
        order: the pass the rows were kept from in its own order, or None (kept in another order).
        batch: the inputs of the call.
        n_samples: the samples of each input.
        b: long (c_i,) the input of every row of each part.

    Returns:
        ``(whole, rows)``: long (c,) the inputs of all the rows (a whole pass's cached ``coords``, else one
        concatenation).
    """
    n_rows, every = sum(x.shape[0] for x in b), list(range(batch))
    if order is None or order.refs != batch or order.active != every or order.s_lo != 1 or n_rows != order.n_rows:
        return False, torch.cat(b) if len(b) > 1 else b[0]
    if order.width != n_samples - 1 or n_rows > CACHED_ROWS:  # not every sample, or coordinates not cached
        return order.width == n_samples - 1, torch.cat(b) if len(b) > 1 else b[0]
    return True, order.coords(0, n_rows)[0]


def into_scores(
    scores: torch.Tensor, sc: torch.Tensor, rows: torch.Tensor, s: list[torch.Tensor], whole: bool
) -> torch.Tensor:
    """The (B, S, T) scores with the rows' scores written in.

    Args:
        scores: (B, S, T) the call's scores so far.
        sc: (c, T) the rows' scores.
        rows: long (c,) the input of every row.
        s: long (c_i,) the sample of every row of each part.
        whole: the rows are every sample of every input in a pass's order (``pass_rows``): the unperturbed
            inputs, then each input's samples 1..S-1. Their scores are then the (B, S, T) scores as they are
            (a view for one input, one concatenation for several), not scattered into ``scores``.

    Returns:
        The scores: ``scores`` written in place, or the new tensor of a whole pass.
    """
    (batch, n_samples, t), dtype = scores.shape, scores.dtype
    if whole and sc.dtype == dtype and batch == 1:
        return sc.view(1, n_samples, t)
    if whole and sc.dtype == dtype:
        return torch.cat((sc[:batch].unsqueeze(1), sc[batch:].view(batch, n_samples - 1, t)), 1)
    scores[rows, torch.cat(s) if len(s) > 1 else s[0]] = sc
    return scores
