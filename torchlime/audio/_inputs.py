"""Input checks of the audio front doors: each message names the argument and says how to convert."""

from __future__ import annotations

from typing import Any

import torch

from torchlime._util.checks import check_ndim, check_tensor


def check_audio(x: Any, name: str, ndims: tuple[int, ...], layout: str) -> None:
    """Raise unless ``x`` is a real floating tensor with ``ndims`` dimensions; the messages say how to convert.

    Args:
        x: anything.
        name: "specs" or "waves", its name in the messages.
        ndims: the accepted numbers of dimensions, the smallest first.
        layout: what the dimensions are, e.g. "(B, S) or (B, C, S)".

    Raises:
        TypeError: not a tensor, complex or integer (int16 PCM: ``waves.float() / 32768``).
        ValueError: another number of dimensions (one clip without its batch dimension), or
            waveforms whose last axis looks like channels, (B, S, C).
    """
    check_tensor(x, name)
    shape = tuple(x.shape)
    if x.ndim == ndims[0] - 1:
        raise ValueError(
            f"`{name}` must have {' or '.join(map(str, ndims))} dimensions {layout}, got {x.ndim} dimensions "
            f"with shape {shape}; for one clip, add the batch dimension: {name}.unsqueeze(0)"
        )
    check_ndim(x, name, ndims, layout)
    if name == "waves" and shape[-1] in (1, 2) and shape[-2] > 2:  # (B, S, C), or one clip (S, C)
        fix = f"{name}.transpose(1, 2)" if x.ndim == 3 else f"{name}.T.unsqueeze(0) (one clip of C channels)"
        raise ValueError(
            f"`{name}` must be {layout} with samples on the last axis, got shape {shape}, whose last axis "
            f"looks like channels (samples first); pass {fix}"
        )
    if x.is_complex():
        hint = (
            f"; pass the magnitude {name}.abs() (explain_waveform explains complex STFT cells)"
            if name == "specs"
            else ""
        )
        raise TypeError(f"`{name}` must be a real floating tensor, got {x.dtype}{hint}")
    if not x.is_floating_point():
        pcm = f"{name}.float() / 32768 for int16 PCM" if x.dtype == torch.int16 and name == "waves" else ""
        raise TypeError(
            f"`{name}` must be a real floating tensor, got {x.dtype}; convert with {pcm or f'{name}.float()'}"
        )
