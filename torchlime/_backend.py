"""The one place that decides between Triton kernels and their torch references.

Triton is used only for CUDA tensors, when ``triton`` imports, when the
environment variable ``TORCHLIME_DISABLE_TRITON`` is unset (or "0"), and when
torch's deterministic-algorithms mode is off (the torch reference is the
deterministic path). Every kernel has a torch reference with the same signature.
"""
from __future__ import annotations

import functools
import os

import torch


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when ``triton`` can be imported."""
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    return True


def interpreting() -> bool:
    """True under ``TRITON_INTERPRET=1`` (kernels run on CPU tensors through the interpreter)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def use_triton(x: torch.Tensor) -> bool:
    """Whether the Triton kernel should handle tensor ``x``."""
    if os.environ.get("TORCHLIME_DISABLE_TRITON", "0") not in ("", "0"):
        return False
    if torch.are_deterministic_algorithms_enabled():
        return False
    if not x.is_cuda:
        return False
    return triton_available()


def blend(x: torch.Tensor, base: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Mask expansion + baseline blend, see ``perturb.blend_reference`` for the contract."""
    if use_triton(x):
        from .kernels import blend as kernel

        if kernel.supports(x, base, labels, masks):
            return kernel.blend(x, base, labels, masks)
    from .perturb import blend_reference

    return blend_reference(x, base, labels, masks)


def blend_cast(x: torch.Tensor, base: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor, *,
               out_dtype: torch.dtype | None = None, mean=None, std=None,
               channels_last: bool = False) -> torch.Tensor:
    """``blend`` with the GPU pipeline's extras fused: cast, per-channel normalisation, layout.

    ``out_dtype`` (default ``x.dtype``), ``mean``/``std`` (per channel = dim 1 of the output;
    ``(v - mean) / std`` in float32, float64 for float64 inputs) and ``channels_last`` (4-D
    outputs) as in ``kernels.reference.blend_torch``, which is the fallback.
    """
    if use_triton(x):
        from .kernels import blend as kernel

        if kernel.supports(x, base, labels, masks):
            return kernel.blend(x, base, labels, masks, out_dtype=out_dtype, mean=mean, std=std,
                                channels_last=channels_last)
    from .kernels.reference import blend_torch

    return blend_torch(x, base, labels, masks, out_dtype=out_dtype, mean=mean, std=std,
                       channels_last=channels_last)


def slic_assign(features: torch.Tensor, centres: torch.Tensor, cell) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC assignment: (int32 labels, squared distances), see ``kernels.reference.assign_torch``.

    ``kernels.slic.assign`` when ``use_triton(features)`` and it supports the inputs (float32),
    else the torch reference (same results up to the compiled kernel's fused multiply-adds).
    """
    if use_triton(features):
        from .kernels import slic as kernel

        if kernel.supports_assign(features, centres, cell):
            return kernel.assign(features, centres, cell)
    from .kernels.reference import assign_torch

    return assign_torch(features, centres, cell)


def slic_update(features: torch.Tensor, labels: torch.Tensor, n_centres: int,
                cell=None) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC centre update: (per-centre feature sums, int32 pixel counts), see
    ``kernels.reference.update_torch``.

    ``kernels.slic.update`` when ``use_triton(features)`` and it supports the inputs, else the
    torch reference. With ``cell`` the kernel is deterministic (per-centre reduction); with
    ``cell=None`` it adds atomically (float sums order-dependent). The reference is
    deterministic on CPU and, on CUDA, under ``torch.use_deterministic_algorithms(True)``
    (which also routes here to it).
    """
    if use_triton(features):
        from .kernels import slic as kernel

        if kernel.supports_update(features, labels, n_centres, cell):
            return kernel.update(features, labels, n_centres, cell)
    from .kernels.reference import update_torch

    return update_torch(features, labels, n_centres, cell)
