"""What hidden audio segments become: a baseline tensor computed on the device.

``hidden_content(x, content, generator)`` returns a tensor shaped like ``x``;
the engine puts its values wherever a segment is switched off. Statistics are
taken per clip and channel over the signal dimensions (the last two of a
spectrogram, the last one of a waveform):

=========  ===================================================================
zero       0 (silence for magnitude / complex spectrograms and waveforms)
min        the smallest value
max        the largest value
mean       the mean value
noise      uniform noise in [min(lo, 0), hi] (``rand * max`` for non-negative
           spectrograms, symmetric-ish for waveforms), from the generator
shuffle    the clip's own bins in a random order (one generator-driven
           permutation per clip and channel)
blur       the clip smoothed by a Gaussian of ``BLUR_SIGMA`` bins / frames
           (samples for waveforms): fine detail goes, the coarse energy stays
=========  ===================================================================

Complex STFTs (waveform explanations over time-frequency cells) keep their
phase for ``min`` / ``max`` / ``mean`` (the statistics are of the magnitude),
get a uniformly random phase for ``noise``, move whole complex bins for
``shuffle`` and blur the magnitude (keeping the phase) for ``blur``. A number,
a tensor broadcastable to ``x`` or a callable ``x -> tensor`` is used as given.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch

from .._checks import describe

ContentSpec = Union[str, float, int, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]
CONTENTS = ("zero", "min", "max", "mean", "noise", "shuffle", "blur")
BLUR_SIGMA = 2.0


def gaussian_blur(x: torch.Tensor, sigma: float, signal_dims: int) -> torch.Tensor:
    """Separable Gaussian smoothing of real x (..., *signal) over its last ``signal_dims`` dims.

    Reflect-padded (replicate when a dimension is too short), same shape and dtype.
    """
    radius = max(1, int(round(3 * sigma)))
    taps = torch.arange(-radius, radius + 1, device=x.device, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (taps / sigma) ** 2)
    kernel = (kernel / kernel.sum()).view(1, 1, -1)
    out = x.float()
    for dim in range(x.ndim - signal_dims, x.ndim):
        moved = out.movedim(dim, -1)
        flat = moved.reshape(-1, 1, moved.shape[-1])
        mode = "reflect" if moved.shape[-1] > radius else "replicate"
        flat = torch.nn.functional.conv1d(torch.nn.functional.pad(flat, (radius, radius), mode=mode), kernel)
        out = flat.reshape(moved.shape).movedim(-1, dim)
    return out.to(x.dtype)


def _rand(shape: tuple[int, ...], generator: torch.Generator, like: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) of ``shape`` drawn on the generator's device, returned on ``like``'s device."""
    dtype = like.real.dtype if like.is_complex() else like.dtype
    if not dtype.is_floating_point:
        dtype = torch.float32
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=dtype)
    return u.to(like.device)


def hidden_content(x: torch.Tensor, content: ContentSpec = "zero", *,
                   generator: Optional[torch.Generator] = None, signal_dims: int = 2) -> torch.Tensor:
    """The baseline of hidden segments.

    Args:
        x: (B, ..., *signal) spectrograms (real or complex) or waveforms.
        content: a name in ``CONTENTS``, a number, a tensor or a callable.
        generator: randomness of ``"noise"`` and ``"shuffle"`` (default: seed 0 on x's device).
        signal_dims: how many trailing dimensions form one signal (2: (Fr, Tm); 1: samples).

    Returns:
        (B, ..., *signal) tensor like ``x`` (same dtype and device); ``x`` is not modified.

    Example:
        >>> spec = torch.rand(2, 129, 63)
        >>> hidden_content(spec, "mean").shape
        torch.Size([2, 129, 63])
    """
    if isinstance(content, bool):
        raise TypeError(f"`content` must be one of {list(CONTENTS)}, a number, a tensor or a callable, "
                        f"got {describe(content)}")
    if isinstance(content, (int, float)):
        return torch.full_like(x, content)
    if callable(content) and not isinstance(content, torch.Tensor):
        content = content(x)
        if not isinstance(content, torch.Tensor):
            raise TypeError(f"a callable `content` must return a tensor, got {describe(content)}")
    if isinstance(content, torch.Tensor):
        try:
            return torch.broadcast_to(content.to(device=x.device, dtype=x.dtype), x.shape)
        except RuntimeError:
            raise ValueError(f"`content` tensor of shape {tuple(content.shape)} does not broadcast to "
                             f"the audio's shape {tuple(x.shape)}") from None
    if content not in CONTENTS:
        raise ValueError(f"`content` must be one of {list(CONTENTS)}, a number, a tensor or a callable, "
                         f"got {content!r}")
    if generator is None:
        generator = torch.Generator(device=x.device).manual_seed(0)
    dims = tuple(range(x.ndim - signal_dims, x.ndim))
    if content == "zero":
        return torch.zeros_like(x)
    if content == "shuffle":
        flat = x.reshape(-1, math.prod(x.shape[x.ndim - signal_dims:]))
        perm = _rand(tuple(flat.shape), generator, x).argsort(-1)
        return flat.gather(1, perm).reshape(x.shape)
    mag = x.abs() if x.is_complex() else x
    if content == "blur":
        smooth = gaussian_blur(mag, BLUR_SIGMA, signal_dims)
        return smooth * _phase(x, mag) if x.is_complex() else smooth
    if content == "noise":
        hi = mag.amax(dim=dims, keepdim=True)
        if x.is_complex():
            phase = torch.polar(torch.ones_like(mag), 2 * math.pi * _rand(tuple(x.shape), generator, x))
            return (_rand(tuple(x.shape), generator, x) * hi) * phase
        lo = mag.amin(dim=dims, keepdim=True).clamp_max(0)
        return lo + _rand(tuple(x.shape), generator, x) * (hi - lo)
    if content == "min":
        value = mag.amin(dim=dims, keepdim=True)
    elif content == "max":
        value = mag.amax(dim=dims, keepdim=True)
    else:
        value = mag.mean(dim=dims, keepdim=True)
    value = value.expand(x.shape)
    return value * _phase(x, mag) if x.is_complex() else value.clone()


def _phase(x: torch.Tensor, mag: torch.Tensor) -> torch.Tensor:
    """Unit-magnitude phase factors of complex x (1 where x is 0)."""
    return torch.where(mag > 0, x / mag.clamp_min(torch.finfo(mag.dtype).tiny), torch.ones_like(x))
