"""Argument checks shared by every stage.

Every check raises a ``ValueError`` or ``TypeError`` whose message names the
argument, what was expected and what came, so a user can fix the call without
reading the source.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from types import FrameType, ModuleType
from typing import Any, Optional, Sequence, TypeVar, cast

import numpy as np
import torch

T = TypeVar("T")


def describe(value: object) -> str:
    """A short description of ``value`` for an error message.

    The type and shape of arrays, the keys of a mapping and the length and first item's type of a
    long sequence, not their contents.

    Args:
        value: anything.

    Returns:
        At most 200 characters.

    Example:
        >>> describe({"logits": torch.zeros(2, 3)})
        "dict with keys ['logits']"
    """
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}, dtype {value.dtype}, on {value.device}"
    kind = type(value).__name__
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # numpy and other arrays
        return f"{kind} of shape {tuple(value.shape)}, dtype {value.dtype}"
    if isinstance(value, dict):
        return f"{kind} with keys {list(value)[:10]}"[:200]
    if isinstance(value, (list, tuple)) and (len(value) > 8 or any(hasattr(v, "shape") for v in value)):
        return f"{kind} of {len(value)} items (the first: {describe(value[0]) if value else None})"[:200]
    return f"{kind} {value!r}"[:200]


def from_numpy(value: object) -> Any:
    """NumPy values where torch ones go: the one numpy rule of every front door.

    An array of numbers (bool, int, float) becomes a new tensor of the same dtype (a copy: the caller's
    array is never touched); a NumPy scalar becomes a Python number; a list or tuple holding such values
    is converted item by item (a list of NumPy class indices, a tuple of arrays); anything else comes
    back as it is.

    Args:
        value: anything.

    Returns:
        ``value`` in torch's terms.

    Example:
        >>> import numpy as np
        >>> from_numpy(np.int64(3)), from_numpy(np.zeros(2)).dtype
        (3, torch.float64)
    """
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.item()
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return torch.tensor(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (np.generic, np.ndarray)) for v in value):
        return type(value)(from_numpy(v) for v in value)
    return value


def check_tensor(value: object, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``value`` is a tensor.

    Args:
        value: anything.
        name: its name in the message.

    Returns:
        ``value``.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor, got {describe(value)}")
    return value


def check_ndim(value: torch.Tensor, name: str, ndims: Sequence[int], layout: str) -> None:
    """Raise ``ValueError`` unless ``value.ndim`` is one of ``ndims``.

    Args:
        value: a tensor.
        name: its name in the message.
        ndims: the accepted numbers of dims.
        layout: what the dims are, for the message (e.g. "(B, C, H, W)").
    """
    if value.ndim not in ndims:
        raise ValueError(
            f"`{name}` must have {' or '.join(map(str, ndims))} dimensions {layout}, "
            f"got {value.ndim} dimensions with shape {tuple(value.shape)}"
        )


def check_integer(value: torch.Tensor, name: str) -> None:
    """Raise ``TypeError`` unless ``value`` has an integer dtype.

    Args:
        value: a tensor.
        name: its name in the message.
    """
    if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
        raise TypeError(f"`{name}` must have an integer dtype (e.g. torch.long), got {value.dtype}")


def check_same_device(value: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> None:
    """Raise ``ValueError`` unless ``value`` lives on the same device as ``ref``.

    Args:
        value: a tensor.
        name: its name in the message.
        ref: the tensor whose device it must share.
        ref_name: that tensor's name in the message.
    """
    if value.device != ref.device:
        raise ValueError(f"`{name}` must be on the same device as `{ref_name}` ({ref.device}), got {value.device}")


def check_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Raise unless ``value`` is an integer (a Python or NumPy int, not a bool) of at least ``minimum``.

    Args:
        value: anything.
        name: its name in the message.
        minimum: the smallest accepted value.

    Returns:
        ``value`` as a Python int.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int >= {minimum}, got {describe(value)}")
    number = int(value)
    if number < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {number}")
    return number


def check_positive_float(value: object, name: str, allow_zero: bool = False) -> float:
    """Raise unless ``value`` is a finite real number > 0 (or >= 0).

    Args:
        value: anything.
        name: its name in the message.
        allow_zero: accept 0.

    Returns:
        ``value`` as a Python float.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a number, got {describe(value)}")
    number = float(value)
    ok = number >= 0 if allow_zero else number > 0
    if not ok or number != number or number == float("inf"):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"`{name}` must be finite and {bound}, got {number}")
    return number


def check_choice(value: object, name: str, choices: Sequence[T]) -> T:
    """Raise ``ValueError`` unless ``value`` is one of ``choices``.

    Args:
        value: anything.
        name: its name in the message.
        choices: the accepted values.

    Returns:
        ``value``, typed as one of ``choices``.
    """
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {list(choices)}, got {value!r}")
    return cast(T, value)  # one of ``choices``


def nonfinite_error(value: torch.Tensor, name: str) -> ValueError:
    """The error for a batched tensor holding NaN or inf: how many values, which inputs.

    Args:
        value: (B, ...) the tensor.
        name: its name in the message.

    Returns:
        The ``ValueError`` to raise.
    """
    bad = ~torch.isfinite(value.reshape(value.shape[0], -1))
    rows = bad.any(1).nonzero().flatten().tolist()
    return ValueError(f"`{name}` must be finite, got {int(bad.sum())} NaN/inf values (inputs {rows})")


def check_finite(value: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` (``nonfinite_error``) if a floating or complex tensor holds NaN/inf.

    Args:
        value: (B, ...) the tensor.
        name: its name in the message.
    """
    if (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all()):
        raise nonfinite_error(value, name)


def _is_real(v: object) -> bool:
    """A real number (Python or NumPy), not a bool."""
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def check_normalize(value: object, channels: int) -> tuple[list[float], list[float]]:
    """Check ``normalize=(mean, std)``: two sequences (or tensors) of ``channels`` finite numbers, or of one.

    One value is used for every channel; every std must be > 0.

    Args:
        value: the ``normalize`` argument.
        channels: C, the inputs' channels (dim 1).

    Returns:
        ``(mean, std)`` as lists of ``channels`` floats.

    Raises:
        TypeError / ValueError: anything else.
    """
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"`normalize` must be a pair (mean, std) of per-channel values, got {describe(value)}")
    out = []
    for name, part in zip(("mean", "std"), value):
        if isinstance(part, torch.Tensor):
            part = part.detach().reshape(-1).tolist()
        elif isinstance(part, np.ndarray):
            part = part.reshape(-1).tolist()
        elif _is_real(part):
            part = [part]
        if not isinstance(part, Sequence) or not all(_is_real(v) for v in part):
            raise TypeError(f"`normalize` {name} must be a sequence of numbers, got {describe(part)}")
        if len(part) not in (1, channels):
            raise ValueError(
                f"`normalize` {name} must have {channels} values (one per channel of the inputs, dim 1) "
                f"or 1, got {len(part)}"
            )
        values = [float(v) for v in part] * (channels if len(part) == 1 else 1)
        if not all(math.isfinite(v) for v in values) or (name == "std" and min(values) <= 0):
            raise ValueError(f"`normalize` {name} must be finite{' and > 0' if name == 'std' else ''}, got {part}")
        out.append(values)
    return out[0], out[1]


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or raise ``ImportError`` naming the extra that installs it.

    Args:
        module: the module to import.
        extra: the torchlime extra that installs it.
        purpose: what needs it, for the message.

    Returns:
        The module.

    Example:
        >>> require("math", "viz", "pictures").sqrt(4.0)
        2.0
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{purpose} needs the optional package `{module.split('.')[0]}`: pip install 'torchlime[{extra}]'"
        ) from err


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # torchlime/, this module being in _util/


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the caller's code: the first frame outside torchlime.

    Call it in the function that calls ``warnings.warn`` (level 1 is that function).

    Returns:
        The stack level.
    """
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
