"""The one door to ``kernels/``: Triton kernels or their torch references.

``TORCHLIME_BACKEND`` chooses, read at every call:

* ``auto`` (default): the Triton kernels for CUDA tensors, when ``triton`` imports and
  torch's deterministic-algorithms mode is off (the references are the deterministic
  path); the torch references otherwise;
* ``torch``: never Triton;
* ``triton``: always Triton, for CUDA tensors, and for CPU tensors when the kernels
  run under Triton's interpreter (``TRITON_INTERPRET=1`` set before torchlime's kernels
  are first imported), so a CPU-only machine runs exactly the product path a GPU runs.

A kernel that does not handle its inputs (a dtype or layout it does not support)
falls back to its reference in every mode. No other module imports ``kernels/``.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Optional, Sequence

import torch

MODES = ("auto", "torch", "triton")


def mode() -> str:
    """The backend chosen by ``TORCHLIME_BACKEND`` ("auto" when unset).

    Raises:
        ValueError: for a value other than auto, torch or triton.
    """
    value = os.environ.get("TORCHLIME_BACKEND", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"TORCHLIME_BACKEND must be one of {list(MODES)}, got {value!r}")
    return value


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when ``triton`` can be imported."""
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install counts as missing
        return False
    return True


def interpreting() -> bool:
    """True when the kernels run under Triton's interpreter (on CPU tensors)."""
    if not triton_available():
        return False
    from torchlime.kernels import blend as kernel

    return kernel.interpreted()


def use_triton(x: torch.Tensor) -> bool:
    """Whether the Triton kernels handle tensor ``x`` (see the module docstring).

    Raises:
        RuntimeError: ``TORCHLIME_BACKEND=triton`` for a CPU tensor without the interpreter,
            or without triton installed.
    """
    chosen = mode()
    if chosen == "torch":
        return False
    if chosen == "auto":
        return x.is_cuda and not torch.are_deterministic_algorithms_enabled() and triton_available()
    if not triton_available():
        raise RuntimeError("TORCHLIME_BACKEND=triton needs the triton package: pip install triton")
    if not x.is_cuda and not interpreting():
        raise RuntimeError(
            f"TORCHLIME_BACKEND=triton needs CUDA tensors, or TRITON_INTERPRET=1 set before "
            f"torchlime is imported to run the kernels on the CPU; got a tensor on {x.device}"
        )
    return True


def blend(
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    *,
    out_dtype: Optional[torch.dtype] = None,
    mean: Optional[Sequence[float]] = None,
    std: Optional[Sequence[float]] = None,
    channels_last: bool = False,
) -> torch.Tensor:
    """Mask expansion + baseline blend, with the cast, per-channel normalisation and layout fused.

    ``where(masks[i, labels[i]], x[i], base[i])``, then ``(v - mean) / std`` per channel
    (dim 1), cast to ``out_dtype``, ``channels_last`` for 4-D results: the contract of
    ``kernels.reference.blend_torch``.

    Args:
        x, base: (1 or c, *shape). labels: long (1 or c, *fshape). masks: bool (c, F).
    """
    extras: dict[str, Any] = dict(out_dtype=out_dtype, mean=mean, std=std, channels_last=channels_last)
    if use_triton(x):
        from torchlime.kernels import blend as kernel

        if kernel.supports(x, base, labels, masks):
            return kernel.blend(x, base, labels, masks, **extras)
    from torchlime.kernels.reference import blend_torch

    return blend_torch(x, base, labels, masks, **extras)


def normalize_stats(mean: Any, std: Any, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean`` and ``std`` (sequences or scalars) as 1-D tensors on ``like``'s device, in the dtype
    ``blend`` normalises ``like``'s values in (float64 for float64, else float32).

    Made once per call: ``blend`` then uses them as they are on every chunk, where statistics given
    as Python numbers would be copied from the host (a synchronisation on CUDA) chunk after chunk.
    """
    from torchlime.kernels.reference import compute_dtype

    dtype = compute_dtype(like.dtype)
    return (
        torch.as_tensor(mean, dtype=dtype, device=like.device).reshape(-1),
        torch.as_tensor(std, dtype=dtype, device=like.device).reshape(-1),
    )


def slic_features(colour: torch.Tensor, scale: float) -> torch.Tensor:
    """SLIC's per-pixel features [colour, y * scale, x * scale]: float32 (B, C + 2, H, W)."""
    from torchlime.kernels.reference import slic_features as features

    return features(colour, scale)


def slic_assign(
    features: torch.Tensor, centres: torch.Tensor, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC assignment: (int32 labels, squared distances), see ``kernels.reference.assign_torch``."""
    if use_triton(features):
        from torchlime.kernels import slic as kernel

        if kernel.supports_assign(features, centres, cell):
            return kernel.assign(features, centres, cell)
    from torchlime.kernels.reference import assign_torch

    return assign_torch(features, centres, cell)


def slic_update(
    features: torch.Tensor, labels: torch.Tensor, n_centres: int, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC centre update: (per-centre feature sums, int32 pixel counts), see
    ``kernels.reference.update_torch``; the kernel is a deterministic per-centre reduction."""
    if use_triton(features):
        from torchlime.kernels import slic as kernel

        if kernel.supports_update(features, labels, n_centres, cell):
            return kernel.update(features, labels, n_centres, cell)
    from torchlime.kernels.reference import update_torch

    return update_torch(features, labels, n_centres, cell)
