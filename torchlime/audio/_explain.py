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

from torchlime.audio._common import BLUR_SIGMA, check_sample_rate, model_sample_rate
from torchlime.audio._spectrograms import SpectrogramInfo, Spectrograms
from torchlime.audio._waveforms import FreqScale, WaveformInfo, Waveforms, WaveformSegments
from torchlime.audio.segments import SegmentSpec
from torchlime.engine import Explanation, explain_with
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import PerturbFn
from torchlime.typing import (
    UNSET,
    AccelerateMode,
    BaselineSpecs,
    BatchSize,
    KernelSpec,
    MemorySpec,
    Model,
    NormalizeSpec,
    NSamples,
    OutputSelector,
    PresetName,
    SamplerSpec,
    Seed,
    SurrogateSpec,
    TargetSpec,
    Unset,
)

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


def explain_spectrogram(
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
    index: Optional[torch.Tensor] = None,
    return_samples: bool = False,
    output: OutputSelector = None,
    softmax: bool = False,
    masks: Optional[torch.Tensor] = None,
    perturb_fn: Optional[PerturbFn] = None,
    normalize: Optional[NormalizeSpec] = None,
    chunk_format: Optional[InputFormat] = None,
    additional_forward_args: object = None,
    sampler: Union[SamplerSpec, Unset] = UNSET,
    kernel: Union[KernelSpec, Unset] = UNSET,
    surrogate: Union[SurrogateSpec, Unset] = UNSET,
    baseline: Union[BaselineSpecs, Unset] = UNSET,
    preset: Optional[PresetName] = None,
    accelerate: Optional[AccelerateMode] = None,
    max_memory: MemorySpec = None,
    batch_size: BatchSize = None,
    progress: bool = False,
) -> Explanation:
    """Explain a model of spectrograms over time-frequency segments (``Spectrograms`` in one call).

    Args:
        model: callable from (c, Fr, Tm) or (c, C, Fr, Tm) spectrograms to scores (c, K).
        specs: real (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms (rows: frequency, columns: frames).
        segments: "grid" (time x frequency, default 5 x 4 as in SLIME / the veracity study),
            "time", "freq", "mel" (bands equally spaced on the mel scale), "slic"
            (superpixels), an integer map (Fr, Tm) / (B or 1, [1 or C,] Fr, Tm) or a callable.
        time_segments: time slots of the grids ("grid", "time", "mel").
        freq_segments: frequency bands of the grids ("grid", "freq", "mel").
        sample_rate: Hz of the audio behind the spectrogram (for "mel", the plots and the check
            against ``model.sample_rate``).
        hop_length: the spectrogram's STFT hop in samples (recorded for the plots).
        n_fft: the spectrogram's STFT size (for "mel" and the plots: the bins' frequencies, those
            of a linear STFT of ``n_fft // 2 + 1`` bins; warns when Fr differs).
        bin_freqs: (Fr,) bin frequencies in Hz (e.g. a mel spectrogram's centres:
            ``segments.mel_frequencies(Fr, sample_rate)``).
        fmin: lowest frequency (Hz) of the mel bands.
        fmax: highest frequency (Hz) of the mel bands (default: the highest bin).
        n_segments: SLIC superpixels (defaults to time x freq segments).
        compactness: SLIC compactness.
        baseline: the fill of hidden segments (``torchlime.stages.perturb.fills``): "zero" (silence),
            "min", "max", "signal_mean", "noise", "shuffle", "blur" (a Gaussian of
            ``BLUR_SIGMA`` bins), "mean" (each segment's own mean), a number, a tensor or a
            callable. Default: the preset's fill (``preset="lime"``: "mean"), else "zero".
            (``content=``, its old name, warns and is accepted for one release;
            content="mean" is baseline="signal_mean".)
        target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all", "topK", or a
            structured target (``torchlime.targets``).
        n_samples: S samples per clip (the clip itself included), or "auto" (rounds of doubling).
        generator: an int seed or a ``torch.Generator``; None: seed 0.
        index: long (B,) index of every clip in a larger data set (masks follow it).
        return_samples: keep the masks (B, S, F), outputs (B, S, T) and weights (B, S).
        output: selector of tuple / dict model outputs (a key, an index or a callable).
        softmax: explain the softmax of the outputs (probabilities of a logit model).
        masks: explicit bool masks (B, S, F) instead of sampling.
        perturb_fn: replaces the blend (``stages.perturb.blend.PerturbFn``).
        normalize: ``(mean, std)`` per channel (dim 1), fused into the blend.
        chunk_format: dtype and layout of the perturbed chunks (``stages.forward.model.InputFormat``).
        additional_forward_args: passed to the model after the inputs, never perturbed.
        sampler: a ``Sampler`` or a name ("bernoulli", "uniform_count", "shapley", ...).
        kernel: a ``Kernel``, a float width or a name ("lime", "captum", "uniform", ...).
        surrogate: a ``Surrogate`` or a name ("ridge", "lasso", "klasso", "bayes").
        preset: a name in ``presets.PRESETS``; ``preset="slime"`` (or "veracity") gives the SLIME
            settings (N = 8192).
        accelerate: None (the model runs as given) or "fast" (``accel.accelerate_model``).
        max_memory: CUDA memory budget of a chunk: bytes or a fraction of the device's memory;
            None: half of the memory free when the call starts.
        batch_size: rows per model call; None: the default rule; "measure": timed once per model.
        progress: show a progress bar.

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
    return explain_with(model, specs, modality, locals())


def explain_waveform(
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
    index: Optional[torch.Tensor] = None,
    return_samples: bool = False,
    output: OutputSelector = None,
    softmax: bool = False,
    masks: Optional[torch.Tensor] = None,
    normalize: Optional[NormalizeSpec] = None,
    chunk_format: Optional[InputFormat] = None,
    additional_forward_args: object = None,
    sampler: Union[SamplerSpec, Unset] = UNSET,
    kernel: Union[KernelSpec, Unset] = UNSET,
    surrogate: Union[SurrogateSpec, Unset] = UNSET,
    baseline: Union[BaselineSpecs, Unset] = UNSET,
    preset: Optional[PresetName] = None,
    accelerate: Optional[AccelerateMode] = None,
    max_memory: MemorySpec = None,
    batch_size: BatchSize = None,
    progress: bool = False,
) -> Explanation:
    """Explain a model of raw audio over time segments or time-frequency cells (``Waveforms`` in one call).

    Args:
        model: callable from (c, S) or (c, C, S) audio to scores (c, K); if it (or a
            submodule) has a ``sample_rate`` attribute it must equal ``sample_rate``.
        waves: real (B, S) or (B, C, S) audio.
        sample_rate: Hz of ``waves``.
        segments: "time" (contiguous runs of samples) or "time_frequency" (cells of the STFT).
            (``features=``, its old name, warns and is accepted for one release.)
        time_segments: slots in time (default 10 for "time", 5 for "time_frequency").
        freq_segments: frequency bands for "time_frequency".
        n_fft: FFT size of the Hann-window STFT of "time_frequency"; the model sees
            ``istft(masked STFT)`` of length S.
        hop_length: hop of that STFT in samples (default n_fft // 4).
        win_length: Hann window length of that STFT (default n_fft).
        freq_scale: "linear" or "mel" spacing of the frequency bands.
        crossfade: seconds of linear crossfade at segment borders ("time" only; 0 = hard cuts).
        baseline: the fill of hidden segments, as in ``explain_spectrogram``, computed on
            the waveform for "time" and on the complex STFT for "time_frequency".
            (``content=``, its old name, warns and is accepted for one release.)
        kernel: as in ``torchlime.explain``; over "time_frequency" cells it must measure distances
            on the masks (the explained inputs are complex STFTs).
        target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all", "topK", or a
            structured target (``torchlime.targets``).
        n_samples: S samples per clip (the clip itself included), or "auto" (rounds of doubling).
        generator: an int seed or a ``torch.Generator``; None: seed 0.
        index: long (B,) index of every clip in a larger data set (masks follow it).
        return_samples: keep the masks (B, S, F), outputs (B, S, T) and weights (B, S).
        output: selector of tuple / dict model outputs (a key, an index or a callable).
        softmax: explain the softmax of the outputs (probabilities of a logit model).
        masks: explicit bool masks (B, S, F) instead of sampling.
        normalize: ``(mean, std)`` per channel (dim 1), fused into the blend.
        chunk_format: dtype and layout of the perturbed chunks (``stages.forward.model.InputFormat``).
        additional_forward_args: passed to the model after the inputs, never perturbed.
        sampler: a ``Sampler`` or a name ("bernoulli", "uniform_count", "shapley", ...).
        surrogate: a ``Surrogate`` or a name ("ridge", "lasso", "klasso", "bayes").
        preset: a name in ``presets.PRESETS`` fills the keywords not given.
        accelerate: None (the model runs as given) or "fast" (``accel.accelerate_model``).
        max_memory: CUDA memory budget of a chunk: bytes or a fraction of the device's memory;
            None: half of the memory free when the call starts.
        batch_size: rows per model call; None: the default rule; "measure": timed once per model.
        progress: show a progress bar.

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
    return explain_with(model, waves, modality, locals())
