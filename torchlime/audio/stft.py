"""STFT plumbing of waveform explanations.

The forward STFT, the ISTFT model wrapper and the crossfaded blend of time segments.

The wrapper makes a waveform model take complex STFTs: the engine masks the
STFT cells with its default blend (``torch.where`` works on complex tensors)
and the wrapper turns every perturbed STFT back into audio with
``torch.istft`` (same length as the original) on the model's device, chunk by
chunk, before calling the model.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from torchlime.stages.forward.model import model_placement
from torchlime.stages.perturb.blend import Chunk, gather_rows


def stft(waves: torch.Tensor, n_fft: int, hop_length: int, win_length: int) -> torch.Tensor:
    """Complex STFT with a Hann window and centred frames.

    Args:
        waves: real (..., S). Half / bfloat16 waves on the CPU, whose FFT has no kernels for
            them, are transformed in float32 (a complex64 result).
        n_fft: FFT size.
        hop_length: samples between frames.
        win_length: length of the Hann window.

    Returns:
        complex (..., n_fft // 2 + 1, S // hop_length + 1) on the waves' device.
    """
    if waves.device.type == "cpu" and waves.dtype in (torch.float16, torch.bfloat16):
        waves = waves.float()
    window = torch.hann_window(win_length, device=waves.device, dtype=waves.dtype)
    flat = waves.reshape(-1, waves.shape[-1])
    spec = torch.stft(flat, n_fft, hop_length, win_length, window=window, center=True, return_complex=True)
    return spec.reshape(*waves.shape[:-1], *spec.shape[-2:])


def istft(
    spec: torch.Tensor, n_fft: int, hop_length: int, win_length: int, length: int, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Inverse of ``stft``: complex (..., Fr, Tm) -> real (..., length) in ``dtype``."""
    window = torch.hann_window(win_length, device=spec.device, dtype=spec.real.dtype)
    flat = spec.reshape(-1, *spec.shape[-2:])
    wave = torch.istft(flat, n_fft, hop_length, win_length, window=window, center=True, length=length)
    return wave.reshape(*spec.shape[:-2], length).to(dtype)


class ISTFTModel(nn.Module):
    """``model(istft(spec))``: a waveform model seen as a model of complex STFTs.

    Args:
        model: callable on (c, [C,] S) audio.
        n_fft: FFT size of the STFT that made the inputs.
        hop_length: hop in samples of that STFT.
        win_length: Hann window length of that STFT.
        length: S, the audio length to restore.
        reference: (B, [C,] S) waveforms; with them, the audio takes the model's floating dtype.

    Input: complex (c, [C,] Fr, Tm). Output: whatever ``model`` returns.
    """

    def __init__(
        self,
        model: Callable[[torch.Tensor], object],
        n_fft: int,
        hop_length: int,
        win_length: int,
        length: int,
        reference: torch.Tensor,
    ) -> None:
        super().__init__()
        self.model = model
        self.n_fft, self.hop_length, self.win_length, self.length = n_fft, hop_length, win_length, length
        self.audio_dtype = model_placement(model, reference)[1]

    @property
    def cache_identity(self) -> Callable[[torch.Tensor], object]:
        """The wrapped model: keys the measured chunk size (wrappers are made per call)."""
        return self.model

    def forward(self, spec: torch.Tensor) -> object:
        """Complex (c, [C,] Fr, Tm) -> model(audio (c, [C,] S))."""
        wave = istft(spec, self.n_fft, self.hop_length, self.win_length, self.length, self.audio_dtype)
        return self.model(wave)


def smooth_edges(keep: torch.Tensor, fade: int) -> torch.Tensor:
    """Moving average of width 2 * fade + 1 along the last dim (edges replicated).

    Turns a 0/1 keep signal (c, S) into linear crossfades of 2 * fade + 1 samples
    centred on every segment border; cumulative sums, no loop.
    """
    width = 2 * fade + 1
    padded = F.pad(keep.unsqueeze(1), (fade, fade), mode="replicate").squeeze(1)
    csum = F.pad(padded.double().cumsum(-1), (1, 0))
    return ((csum[..., width:] - csum[..., :-width]) / width).to(keep.dtype)


def crossfade_blend(fade: int) -> Callable[..., torch.Tensor]:
    """A ``perturb_fn`` for ``torchlime.explain`` that blends time segments with linear crossfades.

    Args:
        fade: half-length in samples of every crossfade.

    Returns:
        ``perturb(inputs, baseline, index, chunk)`` giving the chunk's rows
        ``baseline + keep * (inputs - baseline)`` with ``keep`` the smoothed (c, ..., S) mask.
    """

    def perturb(inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> torch.Tensor:
        lab = gather_rows(index, chunk).expand(chunk.rows.shape[0], *index.shape[1:])
        keep = chunk.masks.gather(1, lab.reshape(lab.shape[0], -1)).to(inputs.dtype)
        keep = smooth_edges(keep, fade).reshape(lab.shape)
        x, base = gather_rows(inputs, chunk), gather_rows(baseline, chunk)
        return base + keep * (x - base)

    return perturb
