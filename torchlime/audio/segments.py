"""Interpretable features of audio explanations: segmentations of a spectrogram.

Every segmentation is an integer map over the (Fr, Tm) time-frequency plane
(rows are frequency bins, columns are frames). Grid cells are numbered like an
image read row by row from the lowest band: ``id = band * time_segments + slot``.

* ``"grid"``: time x frequency rectangles of (nearly) equal size (SLIME, the
  veracity study's 5 time x 4 frequency);
* ``"time"`` / ``"freq"``: time slots only / frequency bands only;
* ``"mel"``: the grid with frequency bands equally spaced on the mel scale
  (needs the bins' frequencies: ``sample_rate`` and ``n_fft`` or ``bin_freqs``);
* ``"slic"``: SLIC superpixels of the spectrogram (``torchlime.image.segments.slic``);
* an explicit integer tensor, or a callable ``specs -> tensor``.
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional, Sequence, Union

import torch

from torchlime._util.checks import check_integer, check_positive_int, describe, user_stacklevel
from torchlime.stages.features import cell_ids

SegmentSpec = Union[str, torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]
SEGMENTATIONS = ("grid", "time", "freq", "mel", "slic")


def hz_to_mel(freq: torch.Tensor) -> torch.Tensor:
    """HTK mel scale: ``2595 log10(1 + f / 700)``."""
    return 2595.0 * torch.log10(1.0 + freq / 700.0)


def mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    """Inverse of ``hz_to_mel``."""
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def bin_frequencies(
    n_bins: int, sample_rate: float, n_fft: Optional[int] = None, device: Union[str, torch.device, None] = None
) -> torch.Tensor:
    """Centre frequency (Hz) of each of the ``n_bins`` rows of a linear STFT spectrogram.

    ``n_fft`` defaults to ``2 * (n_bins - 1)`` (a one-sided spectrum).

    Returns:
        float32 (n_bins,).
    """
    n_fft = 2 * (n_bins - 1) if n_fft is None else n_fft
    return torch.arange(n_bins, device=device, dtype=torch.float32) * (float(sample_rate) / n_fft)


def mel_frequencies(n_mels: int, sample_rate: float, fmin: float = 0.0, fmax: Optional[float] = None) -> torch.Tensor:
    """Centre frequencies (Hz) of the rows of a mel spectrogram, for ``bin_freqs=``.

    The peaks of ``n_mels`` triangular filters equally spaced on the HTK mel scale between
    ``fmin`` and ``fmax`` (torchaudio's ``MelSpectrogram`` defaults: ``mel_scale="htk"``,
    ``f_min=0``, ``f_max=sample_rate / 2``).

    Args:
        n_mels: mel bins (rows of the spectrogram).
        sample_rate: Hz of the audio.
        fmin: lowest filter edge in Hz.
        fmax: highest filter edge in Hz (default ``sample_rate / 2``).

    Returns:
        float32 (n_mels,), increasing.

    Example:
        >>> mel_frequencies(40, 16000).shape
        torch.Size([40])
    """
    n_mels = check_positive_int(n_mels, "n_mels")
    hi = float(sample_rate) / 2 if fmax is None else float(fmax)
    mels = torch.linspace(float(hz_to_mel(torch.tensor(float(fmin)))), float(hz_to_mel(torch.tensor(hi))), n_mels + 2)
    return mel_to_hz(mels[1:-1])


def warn_bins(n_bins: int, n_fft: Optional[int], name: str = "specs") -> None:
    """Warn (``UserWarning``) when ``n_bins`` frequency rows are not a linear STFT's ``n_fft // 2 + 1``.

    Frequencies computed from ``n_fft`` (the plots' axis, ``segments="mel"``) assume a linear
    STFT; a mel (or cropped) spectrogram needs its own ``bin_freqs``.

    Args:
        n_bins: Fr, the spectrogram's frequency rows.
        n_fft: the STFT size given (None: nothing to compare).
        name: the spectrogram's name in the message.
    """
    if n_fft is None or n_bins == n_fft // 2 + 1:
        return
    warnings.warn(
        f"`n_fft`={n_fft} implies a linear STFT of n_fft // 2 + 1 = {n_fft // 2 + 1} frequency bins, but `{name}` "
        f"has {n_bins} bins (a mel or cropped spectrogram?): the frequency axis and mel bands computed from "
        f"`n_fft` assume a linear STFT and would be wrong. Label mel bins with bin_freqs="
        f"torchlime.audio.segments.mel_frequencies({n_bins}, sample_rate) (their centres in Hz), or leave "
        f"`n_fft` out",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def mel_bands(bin_freqs: torch.Tensor, n_bands: int, fmin: float = 0.0, fmax: Optional[float] = None) -> torch.Tensor:
    """Assign bins to ``n_bands`` bands whose edges are equally spaced on the mel scale.

    Args:
        bin_freqs: (Fr,) frequency of every bin in Hz (increasing).
        n_bands: number of bands.
        fmin: lowest frequency (Hz) of the range split into bands (default 0); lower bins join
            the first band.
        fmax: highest frequency (Hz) of that range (default: the highest bin); higher bins join
            the last band.

    Returns:
        long (Fr,) band of every bin, 0..n_bands-1.

    Raises:
        ValueError: when a band would hold no bin (too many bands for the resolution).
    """
    f = bin_freqs.float()
    hi = float(f.max()) if fmax is None else float(fmax)
    edges = torch.linspace(
        float(hz_to_mel(torch.tensor(float(fmin)))), float(hz_to_mel(torch.tensor(hi))), n_bands + 1, device=f.device
    )
    bands = torch.bucketize(hz_to_mel(f.clamp_min(0)), edges[1:-1], right=True)
    counts = torch.bincount(bands, minlength=n_bands)
    if bool((counts == 0).any()):
        empty = (counts == 0).nonzero().flatten().tolist()
        raise ValueError(
            f"`freq_segments` ({n_bands}) is too many mel bands for {f.numel()} frequency bins: "
            f"bands {empty} hold no bin; use fewer bands or a finer spectrogram"
        )
    return bands


def check_segment_counts(
    n_freq: int, n_time: int, freq_segments: int, time_segments: int, what: str = "`specs`"
) -> None:
    """Raise unless 1 <= time_segments <= Tm frames and 1 <= freq_segments <= Fr bins."""
    check_positive_int(time_segments, "time_segments")
    check_positive_int(freq_segments, "freq_segments")
    if time_segments > n_time:
        raise ValueError(f"`time_segments` must be <= the number of frames of {what} ({n_time}), got {time_segments}")
    if freq_segments > n_freq:
        raise ValueError(
            f"`freq_segments` must be <= the number of frequency bins of {what} ({n_freq}), got {freq_segments}"
        )


def slic_segments(specs: torch.Tensor, n_segments: int, compactness: float = 0.1) -> torch.Tensor:
    """SLIC superpixels of spectrograms (B, C, Fr, Tm), each min-max scaled to [0, 1] first.

    Returns:
        long (B, Fr, Tm), labels 0..F_b-1 per spectrogram (``torchlime.image.segments.slic``).
    """
    from torchlime.image.segments import SlicSettings, slic_labels

    x = specs.float()
    lo = x.amin(dim=(1, 2, 3), keepdim=True)
    hi = x.amax(dim=(1, 2, 3), keepdim=True)
    x = (x - lo) / (hi - lo).clamp_min(1e-12)
    return slic_labels(x, SlicSettings(n_segments=n_segments, compactness=compactness, lab=False))


def spectrogram_segments(  # noqa: PLR0913
    specs: torch.Tensor,
    segments: SegmentSpec = "grid",
    *,
    time_segments: int = 5,
    freq_segments: int = 4,
    sample_rate: Optional[float] = None,
    n_fft: Optional[int] = None,
    bin_freqs: Optional[Sequence[float] | torch.Tensor] = None,
    fmin: float = 0.0,
    fmax: Optional[float] = None,
    n_segments: Optional[int] = None,
    compactness: float = 0.1,
) -> torch.Tensor:
    """The feature map of spectrograms (B, Fr, Tm) or (B, C, Fr, Tm).

    Args:
        specs: (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms (only their shape is used, except for
            ``"slic"``).
        segments: a name in ``SEGMENTATIONS``, an integer tensor (Fr, Tm), (B or 1, Fr, Tm)
            or (B or 1, 1 or C, Fr, Tm), or a callable ``specs -> tensor``.
        time_segments: time slots of the grids.
        freq_segments: frequency bands of the grids.
        sample_rate: Hz of the audio, for the bins' frequencies of ``"mel"``.
        n_fft: STFT size, for the bins' frequencies of ``"mel"`` (default ``2 * (Fr - 1)``).
        bin_freqs: (Fr,) frequency of every bin in Hz, for ``"mel"`` (instead of ``sample_rate``).
        fmin: lowest frequency (Hz) of the ``"mel"`` bands.
        fmax: highest frequency (Hz) of the ``"mel"`` bands (default: the highest bin).
        n_segments: superpixels of ``"slic"`` (default time_segments x freq_segments).
        compactness: SLIC compactness of ``"slic"``.

    Returns:
        long feature map with ``specs.ndim`` dimensions: (1 or B, Fr, Tm), or
        (1 or B, 1 or C, Fr, Tm) for 4-D ``specs``, on the spectrograms' device.
    """
    n_freq, n_time = specs.shape[-2:]
    dev = specs.device
    if callable(segments) and not isinstance(segments, torch.Tensor):
        segments = segments(specs)
    if isinstance(segments, torch.Tensor):
        return _explicit(segments, specs)
    if segments in ("grid", "time", "freq"):
        counts = (1 if segments == "time" else freq_segments, 1 if segments == "freq" else time_segments)
        check_segment_counts(n_freq, n_time, *counts)
        out = cell_ids((n_freq, n_time), counts, device=dev)
    elif segments == "mel":
        check_segment_counts(n_freq, n_time, freq_segments, time_segments)
        if bin_freqs is not None:
            freqs = torch.as_tensor(bin_freqs, dtype=torch.float32, device=dev)
            if freqs.shape != (n_freq,):
                raise ValueError(
                    f"`bin_freqs` must have one frequency per bin, shape ({n_freq},), got {tuple(freqs.shape)}"
                )
        elif sample_rate is not None:
            freqs = bin_frequencies(n_freq, sample_rate, n_fft, dev)
        else:
            raise ValueError(
                "`segments='mel'` needs the bins' frequencies: pass `sample_rate` "
                "(and `n_fft` if it is not 2 * (Fr - 1)) or `bin_freqs`"
            )
        bands = mel_bands(freqs, freq_segments, fmin, fmax)
        out = cell_ids((n_freq, n_time), (freq_segments, time_segments), bands=(bands, None), device=dev)
    elif segments == "slic":
        x = specs if specs.ndim == 4 else specs.unsqueeze(1)
        n_seg = n_segments if n_segments is not None else time_segments * freq_segments
        labels = slic_segments(x, check_positive_int(n_seg, "n_segments"), compactness)
        return labels.unsqueeze(1) if specs.ndim == 4 else labels
    else:
        raise ValueError(
            f"`segments` must be one of {list(SEGMENTATIONS)}, an integer tensor or a callable, "
            f"got {describe(segments)}"
        )
    return out.view(1, 1, n_freq, n_time) if specs.ndim == 4 else out.view(1, n_freq, n_time)


def _explicit(segments: torch.Tensor, specs: torch.Tensor) -> torch.Tensor:
    """Reshape a user feature map to ``specs.ndim`` dimensions, checking its shape."""
    check_integer(segments, "segments")
    fr_tm = tuple(specs.shape[-2:])
    seg = segments.to(specs.device)
    if seg.ndim == 2:
        seg = seg.unsqueeze(0)
    if seg.ndim == 3 and specs.ndim == 4:
        seg = seg.unsqueeze(1)
    ok = seg.ndim == specs.ndim and tuple(seg.shape[-2:]) == fr_tm and seg.shape[0] in (1, specs.shape[0])
    if ok and specs.ndim == 4:
        ok = seg.shape[1] in (1, specs.shape[1])
    if not ok:
        lead = "(B or 1, 1 or C, " if specs.ndim == 4 else "(B or 1, "
        raise ValueError(
            f"`segments` tensor must have shape {fr_tm} or {lead}{fr_tm[0]}, {fr_tm[1]}) for "
            f"spectrograms of shape {tuple(specs.shape)}, got {tuple(segments.shape)}"
        )
    return seg.long()
