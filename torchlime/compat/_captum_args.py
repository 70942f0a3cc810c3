"""captum's ``attribute`` arguments, checked in captum's words before ``forward_func`` runs.

Each check raises a ``TypeError`` or ``ValueError`` naming captum's argument (``inputs``, ``target``,
``n_samples``, ``perturbations_per_eval``, ``baselines``, ``feature_mask``), what it must be and what
came. What only the model's output shows (one value per batch, several outputs without a ``target``)
is read from captum's own probe call, before any sample is drawn.
"""

from __future__ import annotations

import contextlib
import numbers
import re
import warnings
from typing import Callable, Iterator, Optional, Union, cast

import numpy as np
import torch

from torchlime._util.checks import check_finite, describe
from torchlime.stages.forward.errors import model_call_error
from torchlime.stages.forward.model import model_placement

#: engine messages in captum's words (``torchlime.compat._vocabulary.speaking``)
ERRORS = (
    (r"`batch_size`", "`perturbations_per_eval`"),
    (r"\bbatch_size=1\b", "perturbations_per_eval=1"),
    (r"`baseline`", "`baselines`"),
    (r"check the model and the baseline", "check forward_func and the baselines"),
    (r"the model returned", "forward_func returned"),
    (r"model output must", "forward_func's output must"),
    (r" \(pass `output=` to select one\)", ""),
    (r"for a model with", "for a forward_func with"),
    (r"split them finer \(a finer feature map\)", "give them at least 2 ids in `feature_mask`"),
)
_DTYPE_REFUSAL = re.compile(r"dtype|scalar type")


#: a fill of one input as the engine takes it: a bool (bool inputs), a number, or a broadcastable tensor
CaptumFill = Union[bool, float, torch.Tensor]
#: a checked ``target``: None, one column for every example, or a long (bsz,) column per example
CaptumTarget = Optional[Union[int, torch.Tensor]]


class TargetError(ValueError, AssertionError):
    """A ``target`` captum cannot attribute: a ``ValueError``, and captum's own ``AssertionError`` type."""


def check_inputs(inputs: object) -> tuple[tuple[torch.Tensor, ...], bool]:
    """Captum's ``inputs``: a tensor or a non-empty tuple of tensors, (bsz, ...) with bsz >= 1, finite.

    Args:
        inputs: the ``inputs`` argument.

    Returns:
        ``(tensors, is_tuple)``: the tensors, detached (not copied: nothing writes to them).

    Raises:
        TypeError: not tensors (a list, a numpy array, a string).
        ValueError: a 0-d tensor, an empty batch, tensors of different batch sizes, NaN/inf values.
    """
    is_tuple = isinstance(inputs, tuple)
    given: tuple[object, ...] = tuple(inputs) if isinstance(inputs, tuple) else (inputs,)
    if not given or not all(isinstance(t, torch.Tensor) for t in given):
        raise TypeError(
            f"`inputs` must be a tensor or a tuple of tensors (torch.as_tensor(...) turns arrays into one), "
            f"got {describe(inputs)}"
        )
    tensors = tuple(t.detach() for t in cast("tuple[torch.Tensor, ...]", given))  # tensors, as just checked
    if any(t.ndim == 0 for t in tensors):
        raise ValueError(f"`inputs` must be batches (bsz, ...) with a batch dim, got shapes {_shapes(tensors)}")
    bsz = tensors[0].shape[0]
    if bsz == 0 or any(t.shape[0] != bsz for t in tensors):
        raise ValueError(
            f"`inputs` must hold at least one example, with the same batch size bsz in every tensor, "
            f"got shapes {_shapes(tensors)}"
        )
    for t in tensors:
        check_finite(t, "inputs")
    return tensors, is_tuple


def check_target(target: object, bsz: int) -> CaptumTarget:
    """Captum's ``target`` as the engine takes it: None, an int, or a long (bsz,) tensor of per-example columns.

    Args:
        target: None, an int, a 0-d / (1,) / (bsz,) integer tensor, or a list of bsz ints (one per example).
        bsz: the number of examples.

    Returns:
        None, an int, or a long (bsz,) tensor.

    Raises:
        TypeError: a float, a string, a tuple (captum's index into outputs of more than 2 dims) or a list of
            tuples.
        ValueError: a negative column, or a list / tensor whose length is not 1 or bsz.
    """
    if target is None:
        return None
    if isinstance(target, tuple) or (isinstance(target, list) and any(isinstance(t, tuple) for t in target)):
        raise TypeError(
            "`target` tuples (indices into outputs of more than 2 dims) are not taken here: make forward_func "
            f"return (bsz, K) scores and pass target=the column, got {describe(target)}"
        )
    if isinstance(target, torch.Tensor):
        values = target.detach().cpu()
        if values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool:
            raise TypeError(f"`target` must hold integer output columns, got {describe(target)}")
        values = values.reshape(-1) if values.ndim <= 1 else values
    elif isinstance(target, list):
        if not all(isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_)) for t in target):
            raise TypeError(f"`target` list must hold ints (one output column per example), got {target!r}")
        values = torch.tensor([int(t) for t in target], dtype=torch.long)
    elif isinstance(target, numbers.Integral) and not isinstance(target, (bool, np.bool_)):
        values = torch.tensor([int(target)])
    else:
        raise TypeError(f"`target` must be None, an int, a list of ints or an integer tensor, got {describe(target)}")
    if values.ndim != 1 or values.numel() not in (1, bsz):
        raise ValueError(f"`target` must give one output column, or one per example ({bsz}), got {describe(target)}")
    if bool((values < 0).any()):
        raise ValueError(
            f"`target` must be >= 0 (negative indices are not taken: pass K - 1 for the last of K outputs), "
            f"got {values.tolist()}"
        )
    return int(values[0]) if values.numel() == 1 else values.long()


def feature_masks(feature_mask: object, tensors: tuple[torch.Tensor, ...]) -> tuple[tuple[torch.Tensor, ...], int]:
    """Long masks per tensor, (1 or bsz, ...), and M = the largest id + 1 (captum's numbering), M >= 2.

    Args:
        feature_mask: None (one feature per element, numbered across the tuple), or integer masks of the
            inputs' number of dims (or one fewer), first dim 1 or bsz, broadcastable to each input.
        tensors: the inputs.

    Returns:
        ``(masks, M)``.

    Raises:
        TypeError: masks that are not integer tensors, or not one per input.
        ValueError: a mask that does not broadcast to its input; fewer than 2 features in all.
    """
    if feature_mask is None:
        masks, offset = [], 0
        for t in tensors:
            n = t[0].numel()
            masks.append(offset + torch.arange(n, device=t.device).reshape(t[:1].shape))
            offset += n
        _enough(offset, "inputs", "elements per example (one feature each)")
        return tuple(masks), offset
    given: tuple[object, ...] = feature_mask if isinstance(feature_mask, tuple) else (feature_mask,)
    if len(given) != len(tensors) or not all(isinstance(mk, torch.Tensor) for mk in given):
        raise TypeError(
            f"`feature_mask` must be a tensor or a tuple of {len(tensors)} tensors, got {describe(feature_mask)}"
        )
    masks_l = []
    for i, (mk, t) in enumerate(zip(cast("tuple[torch.Tensor, ...]", given), tensors)):  # tensors, as checked
        if mk.dtype.is_floating_point or mk.dtype.is_complex or mk.dtype == torch.bool:
            raise TypeError(f"`feature_mask` must hold integer feature ids (e.g. torch.long), got {describe(mk)}")
        mk = mk.unsqueeze(0) if mk.ndim == t.ndim - 1 else mk
        if mk.ndim != t.ndim or mk.shape[0] not in (1, t.shape[0]) or not _broadcasts(mk.shape, t.shape):
            raise ValueError(
                f"`feature_mask` must broadcast to its input, with a first dim of 1 or bsz ({t.shape[0]}): input "
                f"{i} has shape {tuple(t.shape)}, its mask {tuple(mk.shape)}"
            )
        masks_l.append(mk.to(tensors[0].device).long())
    filled = [mk for mk in masks_l if mk.numel()]
    if not filled:
        _enough(0, "feature_mask", "features")
    low = min(int(mk.min()) for mk in filled)
    if low != 0:
        warnings.warn("Minimum element in feature mask is not 0, shifting indices to start at 0.", stacklevel=3)
        masks_l = [mk - low for mk in masks_l]
    m = max(int(mk.max()) for mk in masks_l if mk.numel()) + 1
    _enough(m, "feature_mask", "features (distinct ids)")
    return tuple(masks_l), m


def _enough(m: int, name: str, what: str) -> None:
    if m < 2:
        raise ValueError(f"`{name}` must give at least 2 {what} to attribute, got {m}")


def _broadcasts(small: torch.Size, big: torch.Size) -> bool:
    return all(s in (1, b) for s, b in zip(small, big))


def _shapes(tensors: tuple[torch.Tensor, ...]) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in tensors]


def fills(baselines: object, tensors: tuple[torch.Tensor, ...]) -> tuple[CaptumFill, ...]:
    """Captum's ``baselines`` as the engine's fills: a number or a tensor per input.

    Args:
        baselines: None (0, False for bool inputs), a number, a tensor broadcastable to the input, or a
            tuple of them, one per input.
        tensors: the inputs.

    Returns:
        One fill per input.

    Raises:
        TypeError: a string, a list, or another type.
        ValueError: the wrong number of entries, a tensor that does not broadcast, NaN/inf values.
    """
    if baselines is None:
        return tuple(False if t.dtype == torch.bool else 0.0 for t in tensors)
    given: tuple[object, ...] = baselines if isinstance(baselines, tuple) else (baselines,)
    if len(given) != len(tensors):
        raise ValueError(f"`baselines` must have one entry per input ({len(tensors)}), got {len(given)}")
    out: list[CaptumFill] = []
    for i, (b, t) in enumerate(zip(given, tensors)):
        if isinstance(b, (bool, np.bool_)):
            out.append(bool(b))
        elif isinstance(b, numbers.Real):
            if not np.isfinite(float(b)):
                raise ValueError(f"`baselines` must be finite, got {b} for input {i}")
            out.append(float(b))
        elif isinstance(b, torch.Tensor):
            if b.ndim > t.ndim or not _broadcasts(b.shape[::-1], t.shape[::-1]):
                raise ValueError(
                    f"`baselines` tensors must broadcast to their input: input {i} has shape {tuple(t.shape)}, "
                    f"its baseline {tuple(b.shape)}"
                )
            if b.is_floating_point() and not bool(torch.isfinite(b).all()):
                raise ValueError(f"`baselines` must be finite, got NaN/inf values for input {i}")
            out.append(b.detach())
        else:
            raise TypeError(f"`baselines` must be numbers or tensors (one per input), got {describe(b)}")
    return tuple(out)


@contextlib.contextmanager
def refused_dtype(tensors: tuple[torch.Tensor, ...]) -> Iterator[None]:
    """Name ``inputs`` when a model refuses the integer or bool inputs it was given as they are.

    Yields:
        Nothing; a ``RuntimeError`` about dtypes becomes a ``TypeError`` naming ``inputs`` when some
        input is not floating (chained to the model's error).
    """
    try:
        yield
    except RuntimeError as err:
        odd = sorted({str(t.dtype) for t in tensors if not (t.is_floating_point() or t.is_complex())})
        if odd and _DTYPE_REFUSAL.search(str(err)):
            raise TypeError(
                f"`inputs` of dtype {', '.join(odd)} reach forward_func as they are (as in captum: integer ids "
                f"for embeddings, bool masks), and it refused them ({err}); pass floating inputs, e.g. "
                "inputs.float(), to a model of floating weights"
            ) from err
        raise


def probe(
    forward: Callable[..., object], tensors: tuple[torch.Tensor, ...], extra: tuple[object, ...], target: CaptumTarget
) -> bool:
    """Captum's probe call on the unperturbed batch: does ``forward_func`` return one value for the whole batch?

    Floating inputs take the model's floating dtype (torchlime's rule, as in every sample later).

    Args:
        forward: ``forward_func``.
        tensors: the inputs (bsz, ...).
        extra: ``additional_forward_args``.
        target: the checked ``target``.

    Returns:
        True for one value per batch (a 0-d or one-element tensor, or a number, with bsz > 1).

    Raises:
        TargetError: several outputs per example and ``target=None`` (captum raises ``AssertionError``), or a
            ``target`` for one value per batch.
        ValueError: an output with neither one value per example nor one per batch.
    """
    bsz = tensors[0].shape[0]
    device, dtype = model_placement(forward, tensors[0])
    placed = tuple(
        t.to(device, dtype) if t.is_floating_point() and dtype.is_floating_point else t.to(device) for t in tensors
    )
    with torch.no_grad(), refused_dtype(tensors):
        try:
            out = forward(*placed, *extra)
        except (TypeError, torch.OutOfMemoryError):
            raise
        except Exception as err:  # the model's own error, said with what it was sent (as the engine says it)
            wrapped = model_call_error(err, placed if len(placed) > 1 else placed[0], 0, dtype)
            if wrapped is err:
                raise
            raise wrapped from err
    if not isinstance(out, torch.Tensor) or out.numel() == 1:
        if bsz > 1 and target is not None:
            raise TargetError(f"`target` must be None when forward_func returns one value per batch, got {target}")
        return bsz > 1
    if out.ndim == 0 or out.shape[0] != bsz:
        raise ValueError(
            "forward_func must return one value per example or one value per batch, got an output of shape "
            f"{tuple(out.shape)} for a batch of {bsz}"
        )
    if target is None and out.numel() != bsz:
        raise TargetError(
            f"`target` must be given: forward_func returns {out.numel() // bsz} values per example (output shape "
            f"{tuple(out.shape)}), and captum attributes one (captum raises AssertionError here); pass "
            "target=the output column, e.g. target=0, or a list of one column per example"
        )
    return False
