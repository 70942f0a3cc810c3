"""The memory a call keeps whole, refused up front when no device or machine could hold it.

A call keeps some arrays whole whatever its chunk size: the outputs (B, S, T) of every sample, the
normal equations of the fit (float64 sums (B, F, F) and (B, F, T)), and with ``return_samples`` the
masks (B, S, F) and weights (B, S). A surrogate that fits in sample space (``stages.sample_space``)
keeps the masks and weights instead of normal equations, and its fit holds a float64 design (B, S, F),
an (S, S) Gram per input and the coefficients and correlations (B, F, T). ``check_sizes`` adds their
bytes up with host arithmetic only (no tensor is made, read or synchronised) and raises a ``SizeError``
naming the argument that makes them too large when they exceed the memory of the device that would hold
them: a CUDA device's total memory, else the machine's physical memory. A request that fits is not
touched: the allocator still decides about what is close to the limit. The engine checks every call once
its feature map is known (``engine.plan``); the lime, captum and shap layers call the same helper before
they build samples of their own.
"""

from __future__ import annotations

import functools
import os
from typing import Optional

import torch

__all__ = ["SizeError", "check_sizes", "format_bytes", "memory_limit"]


class SizeError(ValueError):
    """A call that needs more memory than its device or machine has (a ``ValueError``).

    Attributes:
        argument: the argument to change ("n_samples", lime's "num_samples", "features", "target", ...).
        value: its value as given.
        needed: the bytes the call would keep whole.
        limit: the bytes of the device or machine.
    """

    def __init__(self, message: str, argument: str, value: object, needed: int, limit: int) -> None:
        super().__init__(message)
        self.argument, self.value, self.needed, self.limit = argument, value, needed, limit


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, one decimal.

    Args:
        n: a number of bytes.

    Returns:
        E.g. "3.6 TiB".

    Example:
        >>> format_bytes(4 * 10**12), format_bytes(512)
        ('3.6 TiB', '512 B')
    """
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            break
    return f"{n:.1f} {unit}"


@functools.cache
def _physical_memory() -> Optional[int]:
    """The machine's physical memory in bytes (``sysconf``, else psutil), or None when neither says."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - psutil missing or unable to say: no limit is known
        return None


def memory_limit(device: torch.device) -> Optional[tuple[int, str]]:
    """The memory arrays on ``device`` can take, and how to name it in a message.

    Args:
        device: where the call keeps its arrays.

    Returns:
        ``(bytes, name)``: a CUDA device's total memory (``get_device_properties``, no synchronisation),
        ``meta`` none (None), any other device the machine's physical memory; None when it is not known.
    """
    if device.type == "meta":
        return None
    if device.type == "cuda" and torch.cuda.is_available():
        total = int(torch.cuda.get_device_properties(device).total_memory)
        return total, f"{device}'s {format_bytes(total)} of memory"
    total_host = _physical_memory()
    return None if total_host is None else (total_host, f"this machine's {format_bytes(total_host)} of memory")


def check_sizes(  # noqa: PLR0913
    batch: int,
    n_samples: int,
    n_features: int,
    n_targets: int = 1,
    *,
    device: torch.device,
    keep_samples: bool = False,
    score_bytes: int = 4,
    sample_bytes: int = 1,
    argument: str = "n_samples",
    value: object = None,
    sample_space: bool = False,
) -> None:
    """Refuse a call whose whole-kept arrays exceed the memory of ``device`` (host arithmetic only).

    The bytes counted: outputs (B, S, T) of ``score_bytes`` each; the fit's float64 normal equations
    (B, F, F) and (B, F, T), or with ``sample_space`` its float64 design (B, S, F), Gram (B, S, S) and
    three (B, F, T) arrays (the samples are then kept whatever ``keep_samples`` says); with
    ``keep_samples`` the samples (B, S, F) of ``sample_bytes`` each (bool masks: 1) and float32 weights
    (B, S). T may be a lower bound (1 where the targets are known only from the model's output). The
    argument named is the one whose term dominates: ``argument`` (the samples), "features" (the fit) or
    "target" (more targets than samples).

    Args:
        batch: B, the inputs explained together.
        n_samples: S, the samples per input.
        n_features: F, the features per input (the most of any input).
        n_targets: T, the targets per input (or a lower bound).
        device: where the arrays are kept.
        keep_samples: the masks and weights are kept whole too.
        score_bytes: bytes per output (4: float32, 8: float64).
        sample_bytes: bytes per (sample, feature) element kept with ``keep_samples``.
        argument: the name of the samples argument in the message ("n_samples", "num_samples", "nsamples").
        value: the value to show for it (default: ``n_samples``).
        sample_space: the surrogate fits on the samples, without (F, F) normal equations.

    Raises:
        SizeError: a ``ValueError`` naming the argument, the bytes needed and the limit.
    """
    b, s, f, t = (max(int(v), 1) for v in (batch, n_samples, n_features, n_targets))
    outputs = b * s * t * score_bytes
    keep_samples = keep_samples or sample_space
    samples = b * s * (f * sample_bytes + 4) if keep_samples else 0
    fit = b * (s * (f + s) + 3 * f * t) * 8 if sample_space else b * f * (f + t) * 8
    needed = outputs + samples + fit
    limit = memory_limit(device)
    if limit is None or needed <= limit[0]:
        return
    shapes = f"(B={b}, S={s}, F={f}, T={t})"
    what = "masks, outputs, weights and the fit" if keep_samples else "the outputs and the fit"
    got: object
    head = f"needs {format_bytes(needed)} for {what} {shapes}, more than {limit[1]}"
    if fit >= outputs + samples:
        name, got = "features", f
        held = "design (B, S, F)" if sample_space else "normal equations (B, F, F)"
        message = (
            f"the number of features F={f} {head}: the fit's {held} alone take "
            f"{format_bytes(fit)}; use fewer, larger features (e.g. fewer segments)"
        )
    elif t > s:
        name, got = "target", t
        message = f"`target` with T={t} targets per input {head}; explain fewer targets per call"
    else:
        name, got = argument, n_samples if value is None else value
        fewer = "use fewer samples" + (" or explain fewer inputs per call" if b > 1 else "")
        message = f"`{argument}`={got} {head}; {fewer}"
    raise SizeError(message, name, got, needed, limit[0])
