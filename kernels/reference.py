"""Torch references of the kernels in this folder (no Triton needed).

Each reference has the same signature as its kernel and is what the kernel tests
compare against; ``torchlime._backend`` falls back to them where a kernel does
not apply.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

Stat = Optional[Union[torch.Tensor, Sequence[float], float]]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the normalisation is computed in: float64 for float64 inputs, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def channel_stats(mean: Stat, std: Stat, channels: int, dtype: torch.dtype,
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean`` and ``std`` as contiguous 1-D ``dtype`` tensors of length ``channels``.

    A missing ``mean`` is 0 and a missing ``std`` is 1; a scalar or a single value
    applies to every channel.
    """
    def one(v: Stat, default: float, name: str) -> torch.Tensor:
        t = torch.as_tensor(default if v is None else v, dtype=dtype, device=device).reshape(-1)
        if t.numel() == 1:
            t = t.expand(channels)
        if t.numel() != channels:
            raise ValueError(f"{name} has {t.numel()} values, the output has {channels} channels (dim 1)")
        return t.contiguous()

    return one(mean, 0.0, "mean"), one(std, 1.0, "std")


def blend_torch(x: torch.Tensor, base: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor, *,
                out_dtype: Optional[torch.dtype] = None, mean: Stat = None, std: Stat = None,
                channels_last: bool = False) -> torch.Tensor:
    """Torch reference of ``kernels.blend.blend``.

    Args:
        x, base: (1 or c, *shape) float tensors of the same dtype.
        labels: integer (1 or c, *fshape), feature ids in ``[0, F)``, ``fshape`` broadcastable
            to ``shape`` (same number of dims).
        masks: bool (c, F); True keeps the feature (value from ``x``), False hides it
            (value from ``base``).
        out_dtype: dtype of the result (default ``x.dtype``).
        mean, std: optional per-channel statistics (channel = dim 1 of the output); the
            blended value ``v`` becomes ``(v - mean[ch]) / std[ch]``, computed in float32
            (float64 for float64 inputs) before the cast to ``out_dtype``.
        channels_last: return a 4-D result in ``torch.channels_last`` memory format.

    Returns:
        (c, *shape): ``where(masks[i, labels[i]], x[i], base[i])`` with the extras applied.
    """
    c = masks.shape[0]
    lab = labels.long().reshape(labels.shape[0], -1).expand(c, -1)
    keep = masks.gather(1, lab).reshape(c, *labels.shape[1:])
    out = torch.where(keep, x, base)
    if mean is not None or std is not None:
        if out.dim() < 2:
            raise ValueError("mean/std need an output with a channel dim (dim 1)")
        ct = compute_dtype(x.dtype)
        m, s = channel_stats(mean, std, out.shape[1], ct, out.device)
        view = (1, -1) + (1,) * (out.dim() - 2)
        out = (out.to(ct) - m.reshape(view)) / s.reshape(view)
    out = out.to(x.dtype if out_dtype is None else out_dtype)
    if channels_last:
        if out.dim() != 4:
            raise ValueError(f"channels_last needs a 4-D output, got {out.dim()}-D")
        out = out.contiguous(memory_format=torch.channels_last)
    return out
