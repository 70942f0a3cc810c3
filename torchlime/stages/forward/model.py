"""Stage 4, the model's side.

Where the model runs, the chunk format it wants, how it is called and how its output becomes
(rows, K) scores. The chunked passes themselves are in ``passes``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from typing import Iterator, NamedTuple, Optional, Protocol, Union, cast

import torch
from torch import nn

from torchlime._util.checks import describe, from_numpy
from torchlime.typing import Model as Model
from torchlime.typing import OutputSelector as OutputSelector


def model_placement(model: Model, inputs: torch.Tensor) -> tuple[torch.device, torch.dtype]:
    """The device and floating dtype the model expects (its first floating parameter or buffer).

    Plain callables and parameter-free modules get the input's own device and dtype.

    Args:
        model: the model.
        inputs: (B, ...) the explained inputs.

    Returns:
        ``(device, dtype)``.
    """
    if isinstance(model, nn.Module):
        for t in itertools.chain(model.parameters(), model.buffers()):
            if t.is_floating_point():
                return t.device, t.dtype
    return inputs.device, inputs.dtype


def chunk_placement(
    model: Model, inputs: torch.Tensor, chunk_dtype: Optional[torch.dtype] = None
) -> tuple[torch.device, torch.dtype]:
    """Where ``run_rows`` puts the chunks and in which floating dtype.

    ``model_placement``, except that chunks built in a dtype of their own (``InputFormat.dtype``:
    bf16 / fp16 for an ``Accelerated(autocast=...)`` model) keep it; they are not cast back to the
    weights' dtype.

    Args:
        model: the model.
        inputs: (B, ...) the explained inputs.
        chunk_dtype: the dtype the chunks are built in (None: the model's).

    Returns:
        ``(device, dtype)``.
    """
    device, dtype = model_placement(model, inputs)
    return device, (chunk_dtype if chunk_dtype is not None else dtype)


#: submodule -> (calls running on it, its own training flag before the first of them), under ``_MODES_LOCK``
_MODES: weakref.WeakKeyDictionary[nn.Module, tuple[int, bool]] = weakref.WeakKeyDictionary()
_MODES_LOCK = threading.RLock()


@contextlib.contextmanager
def eval_mode(model: Model) -> Iterator[None]:
    """Put an ``nn.Module`` in eval mode and restore every submodule's own mode afterwards.

    Safe for concurrent calls on one model (threads explaining it at once): every submodule counts the
    calls running on it under a lock; the first to enter records its training flag, the last to leave
    restores it, so no call turns Dropout or BatchNorm statistics back on while another still runs.
    The model itself must be safe to call from several threads.

    Args:
        model: the model (other callables are left alone).

    Yields:
        Nothing: the model runs in eval mode inside the context.
    """
    if not isinstance(model, nn.Module):
        yield
        return
    modules = list(model.modules())
    with _MODES_LOCK:
        for m in modules:
            count, training = _MODES.get(m, (0, m.training))
            _MODES[m] = (count + 1, training)
    try:
        with _MODES_LOCK:
            model.eval()
        yield
    finally:
        with _MODES_LOCK:
            for m in modules:
                count, training = _MODES.get(m, (1, m.training))
                if count > 1:
                    _MODES[m] = (count - 1, training)
                else:
                    _MODES.pop(m, None)
                    m.training = training


class _Indexable(Protocol):
    """An output ``output=`` selects from by key or index (a dict, a tuple, a ``ModelOutput``)."""

    def __getitem__(self, key: Union[int, str], /) -> object: ...


def select_output(out: object, output: OutputSelector, rows: int) -> torch.Tensor:  # noqa: C901
    """Pick the score tensor from a model output and shape it (rows, K).

    ``output`` may be None (a tensor, an object with ``.logits``, or the first
    element of a tuple/list), a key/index into a dict/tuple, or a callable. NumPy scores (a
    scikit-learn ``predict_proba``) become a tensor.
    A 1-D output (one score per row: a regressor) becomes (rows, 1).

    Args:
        out: the model's output for ``rows`` rows.
        output: the selector (see above).
        rows: the number of rows the model saw.

    Returns:
        (rows, K) scores.

    Raises:
        ValueError: when the scores are not shaped (rows,) or (rows, K).
    """
    if callable(output):
        out = output(out)
    elif output is not None:
        try:
            out = cast(_Indexable, out)[output]  # a TypeError, caught here, where it is not
        except (KeyError, IndexError, TypeError) as err:
            raise ValueError(
                f"`output` selector {output!r} does not apply to the model output ({describe(out)}): {err}"
            ) from None
    elif not isinstance(out, torch.Tensor):
        if hasattr(out, "logits"):
            out = out.logits
        elif isinstance(out, (tuple, list)) and out:
            out = out[0]
        elif isinstance(out, dict) and "logits" in out:
            out = out["logits"]
    if isinstance(out, (int, float)) and not isinstance(out, bool):
        out = torch.tensor(float(out))
    out = from_numpy(out)  # a numpy model (scikit-learn's predict_proba): its scores as a tensor
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"model output must be a tensor of scores (pass `output=` to select one), got {describe(out)}")
    scores: torch.Tensor = out
    if scores.ndim == 0:  # one number for the call: a score for one row only
        if rows != 1:
            raise ValueError(
                f"the model returned one number for a batch of {rows} rows; return one score per row, "
                f"shape ({rows},) or ({rows}, K), or pass batch_size=1 so that every row is a call of its own"
            )
        scores = scores.reshape(1, 1)
    if scores.ndim == 1:
        scores = scores.unsqueeze(1)
    if scores.ndim != 2 or scores.shape[0] != rows:
        raise ValueError(
            f"model output must have shape ({rows},) or ({rows}, K) for a batch of "
            f"{rows} inputs, got shape {tuple(scores.shape)}"
        )
    if scores.is_complex():  # a real fit of a complex output would drop its imaginary part in silence
        raise ValueError(
            f"model output must be real scores, got {scores.dtype}: select a real part (`output=lambda o: o.abs()`)"
        )
    return scores


def _place(t: object, device: torch.device, dtype: torch.dtype) -> object:
    if not isinstance(t, torch.Tensor):
        return t
    to_dtype = dtype if (t.is_floating_point() and dtype.is_floating_point) else t.dtype
    return t.to(device=device, dtype=to_dtype)


def call_model(model: Model, chunk: object, device: torch.device, dtype: torch.dtype) -> object:
    """Call ``model`` on a chunk: a tensor, a tuple (positional) or a dict (keywords).

    Tensors move to the model's device; floating tensors take its dtype.

    Args:
        model: the model.
        chunk: a (c, ...) tensor, or a tuple / dict of arguments.
        device: the model's device.
        dtype: the model's floating dtype.

    Returns:
        The model's output, as it comes.
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

    Args:
        model: the model.
        inputs: (B, ...) the explained inputs.

    Returns:
        The ``InputFormat`` of the chunks.
    """
    own = getattr(model, "input_format", None)
    if isinstance(own, InputFormat):
        return own
    if not inputs.is_floating_point() or inputs.ndim != 4:
        return InputFormat(None, False)
    if isinstance(model, nn.Module):
        _, dtype = model_placement(model, inputs)
        convs = _conv_weights(model)
        nhwc = any(
            w.ndim == 4 and not w.is_contiguous() and w.is_contiguous(memory_format=torch.channels_last) for w in convs
        )
        return InputFormat(
            dtype if dtype.is_floating_point else None, nhwc or (bool(convs) and inputs.device.type == "cpu")
        )
    nhwc = not inputs.is_contiguous() and inputs.is_contiguous(memory_format=torch.channels_last)
    return InputFormat(None, nhwc)
