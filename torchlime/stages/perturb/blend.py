"""Stage 3: perturbed model inputs, one chunk of rows at a time.

The masks of a chunk are expanded through the feature maps and blended with the fill,
``x[r] = where(Z[r, index[b_r]], inputs[b_r], baseline[b_r])``, then cast, normalised per channel
and laid out as the model wants, in one pass (``_backend.blend``: a fused Triton kernel on CUDA,
its torch reference elsewhere), with no Python loop over samples or features. A front door whose
perturbation is not a blend (deleting tokens, crossfades) passes a ``PerturbFn`` instead.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Protocol, Sequence, Union, runtime_checkable

import torch

from torchlime import _backend
from torchlime.stages.forward.model import InputFormat


class Normalize(NamedTuple):
    """Per-channel (dim 1) normalisation the model expects: it sees ``(x - mean) / std``.

    Attributes:
        mean: the per-channel means: a sequence of numbers, or a (C,) tensor (``on`` makes it).
        std: the per-channel standard deviations, the same way.
    """

    mean: Union[Sequence[float], torch.Tensor]
    std: Union[Sequence[float], torch.Tensor]

    def on(self, inputs: torch.Tensor) -> Normalize:
        """The statistics as tensors on ``inputs``' device in the dtype the blend normalises in.

        Made once per call so that no chunk copies them from the host (``_backend.normalize_stats``).

        Args:
            inputs: (B, C, ...) the explained inputs.

        Returns:
            The ``Normalize`` of two (C,) (or (1,)) tensors.
        """
        return Normalize(*_backend.normalize_stats(self.mean, self.std, inputs))


class Chunk(NamedTuple):
    """Rows of one chunk and where they come from.

    Attributes:
        masks: bool (c, F') mask of every row (F' = F, plus one always-kept column for
            elements outside every feature).
        rows: long (c,) the explained input of every row.
        samples: long (c,) the sample index of every row (0: the unperturbed input).
        first: the first input of the chunk (a host int).
        last: the last input of the chunk (a host int; equal to ``first`` when the whole chunk
            perturbs one input, which then need not be gathered; -1 otherwise).
        keys: the rows' ``order_key`` values on the host, ascending, when the engine sorted the pass
            by them (``OrderedPerturbFn``); None otherwise.
        spans: for rows of several inputs, host ``(lo, hi, input)`` stretches of one input each
            (input -1: rows of several), when the engine knows them (``engine.row_spans``): the
            torch blend then reads each input as it is instead of copying it once per row (the
            kernel reads every row's input in place anyway). None otherwise.
    """

    masks: torch.Tensor
    rows: torch.Tensor
    samples: torch.Tensor
    first: int
    last: int
    keys: Optional[tuple[int, ...]] = None
    spans: Optional[tuple[tuple[int, int, int], ...]] = None


class PerturbFn(Protocol):
    """``perturb(inputs, baseline, index, chunk) -> model input of the chunk``."""

    def __call__(self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> object:
        """The model input of a chunk of c rows.

        Args:
            inputs: (B, *shape) the explained inputs.
            baseline: (B, *shape) their fill.
            index: long (B or 1, *fshape) the mask column of every element.
            chunk: the rows (masks, explained input of each row).

        Returns:
            What the model takes for c rows: a (c, ...) tensor, or a tuple / dict of them.
        """
        ...


@runtime_checkable
class OrderedPerturbFn(PerturbFn, Protocol):
    """A ``PerturbFn`` whose rows cost less when rows of equal key share a chunk (e.g. kept token counts).

    The engine then runs a pass's perturbed rows sorted by ``order_key`` (stable; the unperturbed
    inputs first) and hands each chunk its rows' keys on the host (``Chunk.keys``), read back once
    per pass, never per chunk. Scores are stored by (input, sample), so the order changes no result.
    """

    def order_key(self, index: torch.Tensor, masks: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Long (n,) sort key of n rows.

        Args:
            index: long (B or 1, *fshape) the mask column of every element (as ``__call__`` gets it).
            masks: bool (n, F') the rows' masks (with the always-kept column, as in a ``Chunk``).
            rows: long (n,) the explained input of every row.

        Returns:
            Long (n,) keys on the masks' device.
        """
        ...


def gather_rows(t: torch.Tensor, chunk: Chunk) -> torch.Tensor:
    """``t[chunk.rows]``, or the one shared row ``t[first:first+1]`` when the chunk has one input.

    Args:
        t: (B or 1, ...) a per-input tensor.
        chunk: the rows.

    Returns:
        (c, ...) or (1, ...) the rows' values.
    """
    if t.shape[0] == 1:
        return t
    if chunk.first == chunk.last:
        return t[chunk.first : chunk.first + 1]
    return t[chunk.rows]


def perturb_rows(
    inputs: torch.Tensor,
    baseline: torch.Tensor,
    index: torch.Tensor,
    chunk: Chunk,
    *,
    fmt: Optional[InputFormat] = None,
    normalize: Optional[Normalize] = None,
    block_rows: int = 1,
) -> torch.Tensor:
    """Build the perturbed model inputs of one chunk.

    Args:
        inputs: (B, *shape) explained inputs.
        baseline: (B, *shape) their fill.
        index: long (B or 1, *fshape) mask column of every element, ``fshape``
            broadcastable to ``shape``.
        chunk: the rows (masks, explained input of each row).
        fmt: dtype and memory layout of the result (default: the inputs').
        normalize: optional per-channel normalisation applied after the blend.
        block_rows: the rows of ``index`` repeat in blocks of this many (``FeatureMap.block_rows``).

    Returns:
        A new (c, *shape) tensor (never a view of ``inputs``).

    Example:
        >>> x = torch.arange(4.0).view(1, 4); lab = torch.tensor([[0, 0, 1, 1]])
        >>> ch = Chunk(torch.tensor([[True, False]]), torch.tensor([0]), torch.tensor([1]), 0, 0)
        >>> perturb_rows(x, torch.zeros(1, 4), lab, ch).tolist()
        [[0.0, 1.0, 0.0, 0.0]]
    """
    fmt = fmt or InputFormat()
    mean, std = (normalize.mean, normalize.std) if normalize is not None else (None, None)
    channels_last = fmt.channels_last and inputs.ndim == 4
    one = chunk.first == chunk.last  # one input: its row, shared; else each row reads its input in place
    return _backend.blend(
        gather_rows(inputs, chunk) if one else inputs,
        gather_rows(baseline, chunk) if one else baseline,
        gather_rows(index, chunk) if one else index,
        chunk.masks,
        out_dtype=fmt.dtype if inputs.is_floating_point() else None,
        mean=mean,
        std=std,
        channels_last=channels_last,
        block_rows=block_rows,
        sources=None if one else chunk.rows,
        spans=None if one else chunk.spans,
    )
