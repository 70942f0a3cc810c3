"""What ``Spectrograms`` and ``Waveforms`` share: the sample-rate check, the audio fill, the STFT check."""

from __future__ import annotations

import warnings
from typing import Optional, Union

import torch

from torchlime._util.checks import check_positive_float
from torchlime.audio.stft import istft
from torchlime.engine.presets import PRESETS
from torchlime.stages.perturb.fills import Blur
from torchlime.typing import UNSET, BaselineSpecs, PresetName, Unset

BLUR_SIGMA = 2.0  # bins / frames (samples for waveforms) of the audio "blur" fill
#: the audio names of fills that differ from the engine's: a light blur
_AUDIO_FILLS = {"blur": Blur(BLUR_SIGMA)}


def model_sample_rate(model: object) -> Optional[float]:
    """The sample rate a model declares, or None when there is none.

    The model's own ``sample_rate`` attribute, else the first submodule's (e.g. a torchaudio
    ``MelSpectrogram`` front end).

    Args:
        model: any callable.

    Returns:
        The rate in Hz, or None.
    """
    candidates = [model]
    if isinstance(model, torch.nn.Module):
        candidates += list(model.modules())[1:]
    for m in candidates:
        rate = getattr(m, "sample_rate", None)
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return float(rate)
    return None


def check_sample_rate(model: object, sample_rate: object) -> Optional[float]:
    """Validate ``sample_rate`` (None or > 0) against the model's declared rate.

    Args:
        model: the caller's model.
        sample_rate: None or the rate in Hz.

    Returns:
        The rate as a float, or None.

    Raises:
        TypeError / ValueError: a rate that is not a positive number, or that disagrees
            with the model's ``sample_rate``.
    """
    if sample_rate is None:
        return None
    rate = check_positive_float(sample_rate, "sample_rate")
    declared = model_sample_rate(model)
    if declared is not None and rate != declared:
        raise ValueError(
            f"`sample_rate` ({sample_rate} Hz) disagrees with the model's sample_rate "
            f"({declared:g} Hz); resample the audio or pass the model's rate"
        )
    return rate


def audio_fill(baseline: Union[BaselineSpecs, Unset], preset: Optional[PresetName]) -> Union[BaselineSpecs, Unset]:
    """The fill of an audio explanation.

    Args:
        baseline: the caller's fill; "blur" is the audio blur (``BLUR_SIGMA``).
        preset: the caller's preset.

    Returns:
        ``baseline``; when it is unset, the preset's fill (``UNSET``: the engine resolves it) or
        silence ("zero").
    """
    if baseline is UNSET:
        table = PRESETS[preset] if preset is not None else {}
        has_fill = any("baseline" in table.get(m, {}) for m in ("any", "audio"))
        return UNSET if has_fill else "zero"
    return _AUDIO_FILLS.get(baseline, baseline) if isinstance(baseline, str) else baseline


def check_invertible(spec: torch.Tensor, n_fft: int, hop: int, win: int, length: int) -> None:
    """Raise ``ValueError`` unless ``torch.istft`` can invert the STFT ``spec`` (B, [C,] Fr, Tm).

    The STFT was made with these settings; it can be inverted when its nonzero overlap-add condition
    (NOLA) holds for ``length`` samples. Tried on one all-zero clip on the CPU (no device
    synchronisation: istft's NOLA check reads a value back), so it fails here and not in the
    batched forward pass.

    Args:
        spec: complex (B, [C,] Fr, Tm) STFT (only its last two sizes are used).
        n_fft: its FFT size.
        hop: its hop in samples.
        win: its Hann window length.
        length: S, the audio length to restore.

    Raises:
        ValueError: settings whose overlap-added windows vanish somewhere.
    """
    probe = torch.zeros((1, *spec.shape[-2:]), dtype=torch.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # istft's note on short signals; the forward pass gives it
        try:
            istft(probe, n_fft, hop, win, length)
        except RuntimeError:
            raise ValueError(
                f"the STFT with n_fft={n_fft}, hop_length={hop}, win_length={win} cannot be inverted "
                f"for {length} samples (torch.istft: the overlap-added Hann windows vanish somewhere); "
                f"pass a smaller `hop_length` (e.g. {max(1, win // 4)} = win_length // 4)"
            ) from None
