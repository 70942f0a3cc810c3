"""``AxisUnits``: what a spectrogram picture's axes measure (``torchlime.audio.viz``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence


@dataclass(frozen=True)
class AxisUnits:
    """What a spectrogram's axes measure, so ``plot_spectrogram_explanation`` labels them in seconds and Hz.

    A field left None is read from the explanation's audio record (``explanation.info``); without either,
    the axes count frames and frequency bins.

    Attributes:
        sample_rate: Hz of the audio, for the time and frequency axes.
        hop_length: STFT hop in samples, for the time axis.
        n_fft: STFT size, for the frequency axis: a linear STFT's ``n_fft // 2 + 1`` bins (warns when Fr
            differs, e.g. mel bins).
        bin_freqs: (Fr,) bin frequencies in Hz for the frequency axis; for mel bins
            ``torchlime.audio.segments.mel_frequencies(Fr, sample_rate)``.

    Example:
        >>> AxisUnits(sample_rate=8000, n_fft=256, hop_length=128)
        AxisUnits(sample_rate=8000, hop_length=128, n_fft=256, bin_freqs=None)
    """

    sample_rate: Optional[float] = None
    hop_length: Optional[int] = None
    n_fft: Optional[int] = None
    bin_freqs: Optional[Sequence[float]] = None
