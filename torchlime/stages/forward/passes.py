"""Stage 4: the chunked batched forward pass.

The (B·S, ...) perturbed batch is never materialised whole: ``run_rows`` builds each chunk on
demand and runs the model, both under ``torch.inference_mode()``, on the model's own device and
dtype, and hands the output to a consumer that writes into preallocated tensors, so finished
chunks are never lost. Chunk sizes come from ``chunking.ChunkPlan`` (a rule, or measured; within
the memory budget); a real device out-of-memory error halves the chunk and runs the same rows again.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol

import torch

from torchlime.stages.fixed_cost import record_function
from torchlime.stages.forward.chunking import ChunkPlan, Signature
from torchlime.stages.forward.errors import model_call_error
from torchlime.stages.forward.model import Model, OutputSelector, call_model, eval_mode, model_placement, select_output
from torchlime.typing import BatchSize


class ProgressBar(Protocol):
    """What ``run_rows`` uses of a ``tqdm`` bar: a context manager that counts samples."""

    def __enter__(self) -> ProgressBar: ...

    def __exit__(self, *exc: object) -> Optional[bool]: ...

    def update(self, n: int) -> Optional[bool]:
        """Advance the bar by ``n`` samples."""
        ...


def progress_bar(total: int, enabled: bool, desc: str = "torchlime") -> ProgressBar:
    """A tqdm bar over ``total`` samples (a no-op object when ``enabled`` is False).

    Args:
        total: the samples to run.
        enabled: show the bar.
        desc: the bar's label.

    Returns:
        The ``tqdm`` bar (a context manager).
    """
    from tqdm.auto import tqdm

    bar: ProgressBar = tqdm(total=total, disable=not enabled, desc=desc, unit="sample", unit_scale=True, leave=False)
    return bar


def run_rows(
    model: Model,
    build: Callable[[int, int], object],
    consume: Callable[[object, object, int, int], None],
    n_rows: int,
    plan: ChunkPlan,
    device: torch.device,
    dtype: torch.dtype,
    progress: bool = False,
) -> None:
    """Run ``model`` over rows ``0..n_rows`` in chunks chosen by ``plan``.

    Args:
        model: callable on a (c, ...) batch.
        build: ``build(start, stop)`` returns the (stop-start, ...) input chunk (a tensor,
            or a tuple / dict of tensors passed as positional / keyword arguments); it runs
            under ``torch.inference_mode()``, like the model.
        consume: ``consume(output, chunk, start, stop)`` stores what it needs (output and
            chunk are inference tensors: it may read them and write them into its own tensors).
        n_rows: rows in total.
        plan: the chunk sizes.
        device: where the model runs.
        dtype: the floating dtype the model runs in.
        progress: show a tqdm progress bar.

    Raises:
        torch.OutOfMemoryError: when a chunk of a single row does not fit.
        ModelCallError: the model raised a ``RuntimeError`` (raised from it, saying what it was sent;
            other exceptions keep their type and get that text as a note).
    """
    with progress_bar(n_rows, progress) as bar:
        start = 0
        while start < n_rows:
            size, phase = plan.next_size(n_rows - start)
            stop = start + size
            chunk = out = None
            keep = phase == "run"  # rows of a probe or a timed size run again at the chosen size
            try:
                with plan.run(size, phase):
                    # the chunk is built under inference mode too: a chunk is then always an inference
                    # tensor, like the ones the model's wrappers make (a padded chunk, a cast), and a
                    # compiled model does not compile a second graph for the other kind of tensor
                    with torch.inference_mode():
                        chunk = build(start, stop)
                        with record_function("torchlime::model"):
                            try:
                                out = call_model(model, chunk, device, dtype)
                            except torch.OutOfMemoryError:
                                raise
                            except Exception as err:  # the model's own error, said with what it was sent
                                wrapped = model_call_error(err, chunk, start, dtype)
                                if wrapped is err:
                                    raise
                                raise wrapped from err
                    if keep:
                        consume(out, chunk, start, stop)
            except torch.OutOfMemoryError:
                chunk = out = None  # free the failed chunk before retrying smaller
                plan.out_of_memory(size)
                continue
            if keep:
                start = stop
                bar.update(size)


def score(
    model: Model,
    build: Callable[[int, int], object],
    n_rows: int,
    *,
    reference: torch.Tensor,
    output: OutputSelector = None,
    softmax: bool = False,
    batch_size: BatchSize = None,
    signature: Signature = (),
) -> torch.Tensor:
    """Float32 scores (n_rows, K) of rows built by ``build(start, stop)``, in chunks (``ChunkPlan``).

    For front doors that must score rows of their own before the explanation (text's
    neutral / boundary objectives).

    Args:
        model: the model.
        build: ``build(start, stop)`` returns the model input of rows ``start..stop-1``.
        n_rows: rows in total.
        reference: a tensor on the device the scores go to.
        output: selector of tuple / dict model outputs.
        softmax: score the softmax of the outputs.
        batch_size: rows per model call (None: the default rule; "measure": timed).
        signature: per-row shape of the chunks (keys the measured chunk size).

    Returns:
        Float32 (n_rows, K) scores on ``reference``'s device.
    """
    m_dev, m_dtype = model_placement(model, reference)
    parts: list[torch.Tensor] = []

    def consume(out: object, x: object, start: int, stop: int) -> None:
        s = select_output(out, output, stop - start).float()
        parts.append((s.softmax(1) if softmax else s).to(reference.device))

    plan = ChunkPlan(model, signature, m_dev, batch_size)
    with eval_mode(model):
        run_rows(model, build, consume, n_rows, plan, m_dev, m_dtype)
    return torch.cat(parts)
