"""Stage 4: the chunked batched forward pass.

The (B·S, ...) perturbed batch is never materialised whole: ``run_rows`` builds
each chunk on demand and runs the model, both under ``torch.inference_mode()``, on the
model's own device and dtype, and hands the output to a consumer that writes
into preallocated tensors, so finished chunks are never lost. Chunk sizes come
from ``chunking.ChunkPlan`` (measured, cached, within the memory budget); a real
device out-of-memory error halves the chunk and runs the same rows again.
"""
from __future__ import annotations

import contextlib
import itertools
from typing import Any, Callable, Iterator, NamedTuple, Optional

import torch
from torch import nn

from ._checks import describe
from .chunking import ChunkPlan

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


def chunk_placement(model: Model, inputs: torch.Tensor, chunk_dtype: Optional[torch.dtype] = None
                    ) -> tuple[torch.device, torch.dtype]:
    """Where ``run_rows`` puts the chunks and in which floating dtype: ``model_placement``, except
    that chunks built in a dtype of their own (``InputFormat.dtype``: bf16 / fp16 for an
    ``Accelerated(autocast=...)`` model) keep it; they are not cast back to the weights' dtype."""
    device, dtype = model_placement(model, inputs)
    return device, (chunk_dtype if chunk_dtype is not None else dtype)


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


class InputFormat(NamedTuple):
    """How the perturbed chunks are written: the dtype and layout the model wants.

    Attributes:
        dtype: floating dtype of the chunks (None: the inputs' own).
        channels_last: 4-D chunks in ``torch.channels_last`` memory format.
    """

    dtype: Optional[torch.dtype] = None
    channels_last: bool = False


def _conv_weights(model: nn.Module) -> list[torch.Tensor]:
    return [m.weight for m in model.modules() if isinstance(m, nn.Conv2d)]


def input_format(model: Model, inputs: torch.Tensor) -> InputFormat:
    """The chunk format ``model`` wants for floating ``inputs`` (B, ...).

    * a model with an ``input_format`` attribute (``accel.Accelerated``) says so itself;
    * an ``nn.Module``: its floating dtype, and channels-last 4-D chunks when its
      convolution weights are channels-last, or, on the CPU, when it has a ``Conv2d``
      at all (oneDNN runs such convolutions faster on channels-last input; the values
      are the same either way);
    * any other callable: the inputs' own dtype and layout.
    """
    own = getattr(model, "input_format", None)
    if isinstance(own, InputFormat):
        return own
    if not inputs.is_floating_point() or inputs.ndim != 4:
        return InputFormat(None, False)
    if isinstance(model, nn.Module):
        _, dtype = model_placement(model, inputs)
        convs = _conv_weights(model)
        nhwc = any(w.ndim == 4 and not w.is_contiguous() and w.is_contiguous(memory_format=torch.channels_last)
                   for w in convs)
        return InputFormat(dtype if dtype.is_floating_point else None,
                           nhwc or (bool(convs) and inputs.device.type == "cpu"))
    nhwc = not inputs.is_contiguous() and inputs.is_contiguous(memory_format=torch.channels_last)
    return InputFormat(None, nhwc)


def progress_bar(total: int, enabled: bool, desc: str = "torchlime") -> Any:
    """A tqdm bar over ``total`` samples (a no-op object when ``enabled`` is False)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit="sample", unit_scale=True, leave=False)


def run_rows(model: Model, build: Callable[[int, int], Any], consume: Callable[[Any, Any, int, int], None],
             n_rows: int, plan: ChunkPlan, device: torch.device, dtype: torch.dtype,
             progress: bool = False) -> None:
    """Run ``model`` over rows ``0..n_rows`` in chunks chosen by ``plan``.

    Args:
        model: callable on a (c, ...) batch.
        build: ``build(start, stop)`` returns the (stop-start, ...) input chunk (a tensor,
            or a tuple / dict of tensors passed as positional / keyword arguments); it runs
            under ``torch.inference_mode()``, like the model.
        consume: ``consume(output, chunk, start, stop)`` stores what it needs (output and
            chunk are inference tensors: it may read them and write them into its own tensors).
        n_rows: rows in total. plan: the chunk sizes.
        device, dtype: where and in which floating dtype the model runs.
        progress: show a tqdm progress bar.

    Raises:
        torch.OutOfMemoryError: when a chunk of a single row does not fit.
    """
    with progress_bar(n_rows, progress) as bar:
        start = 0
        while start < n_rows:
            size, phase = plan.next_size(n_rows - start)
            stop = start + size
            chunk = out = None
            try:
                with plan.run(size, phase):
                    # the chunk is built under inference mode too: a chunk is then always an inference
                    # tensor, like the ones the model's wrappers make (a padded chunk, a cast), and a
                    # compiled model does not compile a second graph for the other kind of tensor
                    with torch.inference_mode():
                        chunk = build(start, stop)
                        out = call_model(model, chunk, device, dtype)
                    consume(out, chunk, start, stop)
            except torch.OutOfMemoryError:
                chunk = out = None  # free the failed chunk before retrying smaller
                plan.out_of_memory(size)
                continue
            start = stop
            bar.update(size)


def score(model: Model, build: Callable[[int, int], Any], n_rows: int, *, reference: torch.Tensor,
          output: OutputSelector = None, softmax: bool = False, batch_size: Optional[int] = None,
          signature: tuple = ()) -> torch.Tensor:
    """Float32 scores (n_rows, K) of rows built by ``build(start, stop)``, in chunks (``ChunkPlan``).

    For front doors that must score rows of their own before the explanation (text's
    neutral / boundary objectives). ``reference``: a tensor on the device the scores go to;
    ``signature``: per-row shape of the chunks (keys the measured chunk size).
    """
    m_dev, m_dtype = model_placement(model, reference)
    parts: list[torch.Tensor] = []

    def consume(out: Any, x: Any, start: int, stop: int) -> None:
        s = select_output(out, output, stop - start).float()
        parts.append((s.softmax(1) if softmax else s).to(reference.device))

    plan = ChunkPlan(model, signature, m_dev, batch_size)
    with eval_mode(model):
        run_rows(model, build, consume, n_rows, plan, m_dev, m_dtype)
    return torch.cat(parts)
