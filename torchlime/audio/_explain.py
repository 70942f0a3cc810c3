"""LIME for audio models in one call: ``explain_spectrogram`` and ``explain_waveform``.

Each door is a modality (``Spectrograms``, ``Waveforms``: the time-frequency features, the fill and,
where the perturbation is not a plain blend, a perturbation or a model wrapper) explained by the
engine once:

* spectrograms (B, Fr, Tm) or (B, C, Fr, Tm): a grid, mel bands, superpixels or a
  user map over the time-frequency plane;
* waveforms (B, S) or (B, C, S) over time segments of the samples (optionally
  crossfaded), or over cells of the waveform's STFT: the complex STFT is masked
  cell by cell and turned back into audio with ``torch.istft`` inside the batched
  forward pass (``stft.ISTFTModel``), so a model with its own front end (e.g. a
  torchaudio ``MelSpectrogram``) works unchanged.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from typing_extensions import Unpack

from torchlime.audio._common import BLUR_SIGMA, check_sample_rate, model_sample_rate
from torchlime.audio._spectrograms import SpectrogramInfo, Spectrograms
from torchlime.audio._waveforms import FreqScale, WaveformInfo, Waveforms, WaveformSegments
from torchlime.audio.segments import SegmentSpec
from torchlime.engine import Call, ExplainOptions, Explanation, explain_with
from torchlime.engine.config import documented_by
from torchlime.typing import UNSET, Model, NSamples, Seed, TargetSpec, Unset

__all__ = [
    "BLUR_SIGMA",
    "SpectrogramInfo",
    "Spectrograms",
    "WaveformInfo",
    "Waveforms",
    "check_sample_rate",
    "explain_spectrogram",
    "explain_waveform",
    "model_sample_rate",
]


@documented_by(Spectrograms)
def explain_spectrogram(  # noqa: D417, PLR0913
    model: Model,
    specs: torch.Tensor,
    *,
    segments: SegmentSpec = "grid",
    time_segments: int = 5,
    freq_segments: int = 4,
    sample_rate: Optional[float] = None,
    hop_length: Optional[int] = None,
    n_fft: Optional[int] = None,
    bin_freqs: Optional[Union[Sequence[float], torch.Tensor]] = None,
    fmin: float = 0.0,
    fmax: Optional[float] = None,
    n_segments: Optional[int] = None,
    compactness: float = 0.1,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain a model of spectrograms over time-frequency segments (``Spectrograms`` in one call).

    Args:
        model: callable from (c, Fr, Tm) or (c, C, Fr, Tm) spectrograms to scores (c, K).
        specs: real (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms (rows: frequency, columns: frames).
        n_samples: S samples per clip (the clip itself included), or "auto" (rounds of doubling).
        **options: the engine's options (``ExplainOptions``). For spectrograms, ``baseline`` is the
            fill of hidden segments: "zero" (silence), "min", "max", "signal_mean", "noise",
            "shuffle", "blur" (a Gaussian of ``BLUR_SIGMA`` bins), "mean" (each segment's own mean), a
            number, a tensor or a callable; default: the preset's fill (``preset="lime"``: "mean"),
            else "zero"; ``preset="slime"`` (or "veracity") gives the SLIME settings (N = 8192).

    Returns:
        ``Explanation`` with coef (B, T, F); ``info`` is a ``SpectrogramInfo`` (``meta["audio"]``: the
        same as plain data).

    Raises:
        ValueError / TypeError: wrong dimensions (one clip without its batch dimension),
            integer or complex spectrograms, more segments than frames or bins, non-finite
            spectrograms, a sample rate that is not positive or disagrees with the model's;
            all before any model call. Warns (``UserWarning``) when Fr is not ``n_fft // 2 + 1``.

    Example:
        >>> model = lambda s: s[:, 10:20, 5:9].mean((1, 2)).unsqueeze(1)
        >>> exp = explain_spectrogram(model, torch.rand(2, 64, 40), n_samples=256)
        >>> exp.coef.shape
        torch.Size([2, 1, 20])
    """
    modality = Spectrograms(
        segments=segments,
        time_segments=time_segments,
        freq_segments=freq_segments,
        sample_rate=sample_rate,
        hop_length=hop_length,
        n_fft=n_fft,
        bin_freqs=bin_freqs,
        fmin=fmin,
        fmax=fmax,
        n_segments=n_segments,
        compactness=compactness,
    )
    return explain_with(model, specs, modality, Call(target, n_samples, generator), options, "explain_spectrogram")


@documented_by(Waveforms)
def explain_waveform(  # noqa: D417, PLR0913
    model: Model,
    waves: torch.Tensor,
    *,
    sample_rate: float,
    segments: WaveformSegments = "time",
    time_segments: Optional[int] = None,
    freq_segments: int = 4,
    n_fft: int = 512,
    hop_length: Optional[int] = None,
    win_length: Optional[int] = None,
    freq_scale: FreqScale = "linear",
    crossfade: float = 0.0,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain a model of raw audio over time segments or time-frequency cells (``Waveforms`` in one call).

    Args:
        model: callable from (c, S) or (c, C, S) audio to scores (c, K); if it (or a
            submodule) has a ``sample_rate`` attribute it must equal ``sample_rate``.
        waves: real (B, S) or (B, C, S) audio.
        n_samples: S samples per clip (the clip itself included), or "auto" (rounds of doubling).
        **options: the engine's options (``ExplainOptions``) but ``perturb_fn`` (``crossfade`` sets
            it). For waveforms, ``baseline`` is the fill of hidden segments, as in
            ``explain_spectrogram``, computed on the waveform for "time" and on the complex STFT for
            "time_frequency"; over "time_frequency" cells a ``kernel`` must measure distances on the
            masks (the explained inputs are complex STFTs).

    Returns:
        ``Explanation`` with coef (B, T, F); its feature map ``features`` is (B, S) for "time"
        and the STFT grid (B, Fr, Tm) for "time_frequency" ((B, 1, S) and (B, 1, Fr, Tm) for
        (B, C, S) audio: one map for every channel); ``info`` is a ``WaveformInfo`` (``meta["audio"]``:
        the same as plain data, ``segments`` under its old name ``features``).

    Raises:
        ValueError / TypeError: wrong dimensions (one clip without its batch dimension,
            channels last: (B, S, C)), integer audio (int16 PCM: ``waves.float() / 32768``),
            non-finite audio, audio shorter than the
            STFT or than the number of segments, STFT settings ``torch.istft`` cannot invert
            (``hop_length`` above ``win_length``, windows that do not overlap), a sample rate
            that disagrees with the model's.

    Example:
        >>> t = torch.arange(4000) / 8000
        >>> waves = torch.sin(2 * torch.pi * 440 * t) * (t >= 0.25)  # a tone in the second half
        >>> model = lambda x: x.pow(2).mean(-1, keepdim=True)  # its energy
        >>> exp = explain_waveform(model, waves.unsqueeze(0), sample_rate=8000, n_samples=64)
        >>> exp.coef.shape, exp.features.shape, exp.top_features(1)[0].item() >= 5
        (torch.Size([1, 1, 10]), torch.Size([1, 4000]), True)
        >>> tf = explain_waveform(model, waves.unsqueeze(0), sample_rate=8000, segments="time_frequency",
        ...                       n_fft=256, n_samples=64)
        >>> tf.coef.shape, tf.features.shape
        (torch.Size([1, 1, 20]), torch.Size([1, 129, 63]))
    """
    modality = Waveforms(
        sample_rate=sample_rate,
        segments=segments,
        time_segments=time_segments,
        freq_segments=freq_segments,
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=win_length,
        freq_scale=freq_scale,
        crossfade=crossfade,
    )
    return explain_with(model, waves, modality, Call(target, n_samples, generator), options, "explain_waveform")
