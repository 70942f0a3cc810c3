"""A model that raises: ``ModelCallError`` says what torchlime sent it and what the front door expects.

The engine states, for the length of a call, what its inputs are (``expecting``: their name and the
layout the front door documents); ``passes.run_rows`` turns a ``RuntimeError`` raised by the model
into a ``ModelCallError`` (itself a ``RuntimeError``, so ``except RuntimeError`` still works) raised
from the original, naming the shape and dtype of the chunk it was given, that layout, and a hint where
the cause is plain (the last axis of an image looks like channels; integer rows for a float model).
Other exceptions keep their type and get the same text as a note (Python 3.11+). A layer that hands the
engine a function of its own user's, whose inputs are not the engine's tensors (lime's ``classifier_fn``
gets NumPy arrays), marks what that function raised with ``as_raised``: it then reaches the caller untouched.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, NamedTuple, Optional

import torch


class ModelCallError(RuntimeError):
    """The explained model raised when torchlime called it (see ``torchlime.stages.forward.errors``)."""


class Expected(NamedTuple):
    """What the running call's inputs are.

    Attributes:
        name: the inputs' argument name at the front door ("images", "inputs", ...).
        layout: the layout the front door expects, e.g. "(B, C, H, W)"; "" when any layout goes.
        shape: the shape of the inputs as given, (B, ...).
        dtype: their dtype as given.
    """

    name: str
    layout: str
    shape: tuple[int, ...]
    dtype: torch.dtype


#: the layout each front door documents for its inputs, by the inputs' name
LAYOUTS = {
    "images": "(B, C, H, W) floating images",
    "specs": "(B, Fr, Tm) or (B, C, Fr, Tm) spectrograms",
    "waves": "(B, T) or (B, C, T) waveforms",
    "input_ids": "(B, L) token ids",
    "X": "(B, D) rows of D columns",
}
_CURRENT: contextvars.ContextVar[Optional[Expected]] = contextvars.ContextVar("torchlime_expected", default=None)


@contextlib.contextmanager
def expecting(name: str, inputs: object) -> Iterator[None]:
    """State, for the length of the block, what the inputs of the running call are.

    Args:
        name: the inputs' argument name at the front door.
        inputs: (B, ...) the inputs as given (a tensor; anything else states no shape).

    Yields:
        Nothing.
    """
    shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else ()
    dtype = inputs.dtype if isinstance(inputs, torch.Tensor) else torch.float32
    token = _CURRENT.set(Expected(name, LAYOUTS.get(name, ""), shape, dtype))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _sent(chunk: object) -> str:
    if isinstance(chunk, torch.Tensor):
        return f"a {str(chunk.dtype).replace('torch.', '')} tensor of shape {tuple(chunk.shape)} on {chunk.device}"
    if isinstance(chunk, (tuple, list)):
        return "positional arguments " + ", ".join(_sent(c) for c in chunk)
    if isinstance(chunk, dict):
        return "keyword arguments " + ", ".join(f"{k}={_sent(v)}" for k, v in chunk.items())
    return type(chunk).__name__


def _hint(chunk: object, model_dtype: torch.dtype, expected: Optional[Expected]) -> str:
    if not isinstance(chunk, torch.Tensor):
        return ""
    if chunk.ndim == 4 and chunk.shape[-1] in (1, 3, 4) and chunk.shape[1] not in (1, 3, 4):
        name = expected.name if expected else "inputs"
        return (
            f"; the last axis ({chunk.shape[-1]}) looks like channels: images go in as (B, C, H, W), "
            f"e.g. {name}.permute(0, 3, 1, 2)"
        )
    if not chunk.is_floating_point() and model_dtype.is_floating_point:
        name = expected.name if expected else "inputs"
        return (
            f"; the rows are {str(chunk.dtype).replace('torch.', '')} while the model computes in "
            f"{str(model_dtype).replace('torch.', '')}: pass {name} as floating point (e.g. {name}.float()) "
            f"unless the model takes integer ids"
        )
    return ""


def describe_call(err: BaseException, chunk: object, start: int, model_dtype: torch.dtype) -> str:
    """The message of a model call that raised ``err`` on the rows of ``chunk`` starting at row ``start``."""
    expected = _CURRENT.get()
    when = "on its first call" if start == 0 else f"on rows {start} and after"
    text = f"the model raised {type(err).__name__} {when} ({err}); torchlime sent it {_sent(chunk)}"
    if expected is not None and expected.shape:
        text += (
            f", built from `{expected.name}` of shape {expected.shape} ({str(expected.dtype).replace('torch.', '')})"
        )
        if expected.layout:
            text += f"; this front door expects `{expected.name}` as {expected.layout}"
    return text + _hint(chunk, model_dtype, expected)


_AS_RAISED = "_torchlime_as_raised"


def as_raised(err: BaseException) -> BaseException:
    """Mark ``err`` to reach the caller as it was raised, without torchlime's description of the call.

    Args:
        err: what a user's function raised inside a layer that converts the engine's chunks for it.

    Returns:
        ``err``, marked.
    """
    setattr(err, _AS_RAISED, True)
    return err


def model_call_error(err: BaseException, chunk: object, start: int, model_dtype: torch.dtype) -> BaseException:
    """The exception to raise from ``err``: a ``ModelCallError`` for a ``RuntimeError``, else ``err`` with a note.

    Args:
        err: what the model raised.
        chunk: the (c, ...) chunk it was called on.
        start: the chunk's first row.
        model_dtype: the floating dtype the model computes in.

    Returns:
        The exception to raise (``raise ... from err``).
    """
    if getattr(err, _AS_RAISED, False):
        return err
    text = describe_call(err, chunk, start, model_dtype)
    if isinstance(err, RuntimeError) and not isinstance(err, ModelCallError):
        return ModelCallError(text)
    if hasattr(err, "add_note") and not isinstance(err, ModelCallError):
        err.add_note(f"torchlime: {text}")
    return err
