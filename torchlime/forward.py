"""Stage 4: the chunked batched forward pass.

The (B·S, ...) perturbed batch is never materialised whole: ``run_chunks``
builds each chunk on demand, runs the model under ``torch.inference_mode()``
on the model's own device and dtype, and hands the output to a consumer that
writes into preallocated tensors, so finished chunks are never lost. A CUDA
out-of-memory error halves the chunk and retries the same rows, with a warning.
"""
from __future__ import annotations

import contextlib
import itertools
import sys
import time
import warnings
from typing import Any, Callable, Iterator

import torch
from torch import nn

from ._checks import describe

Model = Callable[[torch.Tensor], Any]
OutputSelector = Any  # None, an int/str key, or a callable(output) -> tensor


def model_placement(model: Model, inputs: torch.Tensor) -> tuple[torch.device, torch.dtype]:
    """The device and floating dtype the model expects (its first parameter or buffer).

    Plain callables and parameter-free modules get the input's own device and dtype.
    """
    if isinstance(model, nn.Module):
        for t in itertools.chain(model.parameters(), model.buffers()):
            if t.is_floating_point():
                return t.device, t.dtype
    return inputs.device, inputs.dtype


@contextlib.contextmanager
def eval_mode(model: Model) -> Iterator[None]:
    """Put an ``nn.Module`` in eval mode and restore every submodule's own mode afterwards."""
    if not isinstance(model, nn.Module):
        yield
        return
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for m, training in modes:
            m.training = training


def select_output(out: Any, output: OutputSelector, rows: int) -> torch.Tensor:
    """Pick the score tensor from a model output and shape it (rows, K).

    ``output`` may be None (a tensor, an object with ``.logits``, or the first
    element of a tuple/list), a key/index into a dict/tuple, or a callable.
    A 1-D output (one score per row: a regressor) becomes (rows, 1).

    Raises:
        ValueError: when the scores are not shaped (rows,) or (rows, K).
    """
    if callable(output):
        out = output(out)
    elif output is not None:
        try:
            out = out[output]
        except (KeyError, IndexError, TypeError) as err:
            raise ValueError(f"`output` selector {output!r} does not apply to the model output "
                             f"({describe(out)}): {err}") from None
    elif not isinstance(out, torch.Tensor):
        if hasattr(out, "logits"):
            out = out.logits
        elif isinstance(out, (tuple, list)) and out:
            out = out[0]
        elif isinstance(out, dict) and "logits" in out:
            out = out["logits"]
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"model output must be a tensor of scores (pass `output=` to select one), "
                         f"got {describe(out)}")
    if out.ndim == 1:
        out = out.unsqueeze(1)
    if out.ndim != 2 or out.shape[0] != rows:
        raise ValueError(f"model output must have shape ({rows},) or ({rows}, K) for a batch of "
                         f"{rows} inputs, got shape {tuple(out.shape)}")
    return out


def _place(t: Any, device: torch.device, dtype: torch.dtype) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    cast = dtype if (t.is_floating_point() and dtype.is_floating_point) else t.dtype
    return t.to(device=device, dtype=cast)


def call_model(model: Model, chunk: Any, device: torch.device, dtype: torch.dtype) -> Any:
    """Call ``model`` on a chunk: a tensor, a tuple (positional) or a dict (keywords).

    Tensors move to the model's device; floating tensors take its dtype.
    """
    if isinstance(chunk, dict):
        return model(**{k: _place(v, device, dtype) for k, v in chunk.items()})
    if isinstance(chunk, (tuple, list)):
        return model(*[_place(v, device, dtype) for v in chunk])
    return model(_place(chunk, device, dtype))


def _is_oom(err: BaseException) -> bool:
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
    return isinstance(err, oom) or "out of memory" in str(err).lower()


class Progress:
    """A minimal progress line on stderr (no dependency), updated at most 5 times a second."""

    def __init__(self, total: int, enabled: bool, label: str = "torchlime") -> None:
        self.total, self.enabled, self.label = total, enabled, label
        self.start = self.last = time.perf_counter()

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < 0.2 and done < self.total:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / max(rate, 1e-9)
        sys.stderr.write(f"\r{self.label}: {done}/{self.total} samples "
                         f"({100 * done / self.total:5.1f}%, {rate:,.0f}/s, eta {eta:,.1f}s)")
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def default_batch_size(inputs: torch.Tensor, n_rows: int) -> int:
    """Chunk size when the user gives none.

    CPU: about 6 MB of input per chunk (at least 8 rows) for NCHW or other
    layouts: larger chunks make the allocator fault in fresh pages on every
    call and run slower per sample on small machines; about 20 MB for
    channels-last images, whose convolutions keep gaining up to ~32 rows of
    224x224 (measured in benchmarks/results/engine_cpu.json). CUDA: 256 rows
    (``explain`` probes free memory instead). Bounded by the total.
    """
    per_row = max(inputs[0].numel() * inputs.element_size(), 1)
    if inputs.is_cuda:
        size = 256
    else:
        nhwc = inputs.ndim == 4 and not inputs.is_contiguous() and \
            inputs.is_contiguous(memory_format=torch.channels_last)
        size = max(8, ((20 if nhwc else 6) << 20) // per_row)
    return max(1, min(size, n_rows))


def run_chunks(model: Model, build: Callable[[int, int], torch.Tensor],
               consume: Callable[[Any, torch.Tensor, int, int], None], n_rows: int,
               batch_size: int, device: torch.device, dtype: torch.dtype,
               progress: bool = False) -> int:
    """Run ``model`` over rows ``0..n_rows`` in chunks.

    Args:
        model: callable on a (c, ...) batch.
        build: ``build(start, stop)`` returns the (stop-start, ...) input chunk (a tensor,
            or a tuple / dict of tensors passed as positional / keyword arguments).
        consume: ``consume(output, chunk, start, stop)`` stores what it needs.
        n_rows: rows in total. batch_size: initial chunk size.
        device, dtype: where and in which floating dtype the model runs.
        progress: print a progress line.

    Returns:
        The chunk size that worked last (smaller than ``batch_size`` after an OOM).
    """
    bar = Progress(n_rows, progress)
    start = 0
    while start < n_rows:
        stop = min(start + batch_size, n_rows)
        try:
            chunk = build(start, stop)
            with torch.inference_mode():
                out = call_model(model, chunk, device, dtype)
            consume(out, chunk, start, stop)
        except Exception as err:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not _is_oom(err) or batch_size == 1:
                raise
            batch_size = max(1, batch_size // 2)
            warnings.warn(f"out of memory with a chunk of {stop - start} samples; "
                          f"retrying with {batch_size} (finished samples are kept)",
                          RuntimeWarning, stacklevel=3)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            continue
        start = stop
        bar.update(start)
    return batch_size
