"""LIME for audio models: ``explain_spectrogram`` and ``explain_waveform``.

Each builds time-frequency features (``segments``), a fill (``torchlime.stages.perturb.fills``)
and, where the perturbation is not a plain blend, a perturbation or a model wrapper,
then calls the engine once:

* spectrograms (B, Fr, Tm) or (B, C, Fr, Tm): a grid, mel bands, superpixels or a
  user map over the time-frequency plane;
* waveforms (B, S) or (B, C, S) over time segments of the samples (optionally
  crossfaded), or over cells of the waveform's STFT: the complex STFT is masked
  cell by cell and turned back into audio with ``torch.istft`` inside the batched
  forward pass (``stft.ISTFTModel``), so a model with its own front end (e.g. a
  torchaudio ``MelSpectrogram``) works unchanged.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Optional, cast

import torch

from torchlime._checks import (
    check_choice,
    check_finite,
    check_positive_float,
    check_positive_int,
    from_numpy,
)
from torchlime.audio._inputs import check_audio
from torchlime.audio.segments import (
    SegmentSpec,
    bin_frequencies,
    check_segment_counts,
    mel_bands,
    spectrogram_segments,
    warn_bins,
)
from torchlime.audio.stft import ISTFTModel, crossfade_blend, istft, stft
from torchlime.engine.explainer import execute
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import PRESETS, UNSET, check_preset, resolve
from torchlime.engine.registry import resolve_kernel
from torchlime.engine.request import Request
from torchlime.stages.features import even_bands, grid
from torchlime.stages.forward.model import Model
from torchlime.stages.perturb.fills import BaselineSpec, Blur

BLUR_SIGMA = 2.0  # bins / frames (samples for waveforms) of the audio "blur" fill
#: the audio names of fills that differ from the engine's: a light blur, and the old
#: ``content="mean"`` (each clip's mean level, ``baselines``' "signal_mean")
_AUDIO_FILLS = {"blur": Blur(BLUR_SIGMA)}
_CONTENT_NAMES = {"mean": "signal_mean"}


def model_sample_rate(model: Any) -> Optional[float]:
    """The sample rate a model declares, or None when there is none.

    The model's own ``sample_rate`` attribute, else the first submodule's (e.g. a torchaudio
    ``MelSpectrogram`` front end).
    """
    candidates = [model]
    if isinstance(model, torch.nn.Module):
        candidates += list(model.modules())[1:]
    for m in candidates:
        rate = getattr(m, "sample_rate", None)
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return float(rate)
    return None


def check_sample_rate(model: Any, sample_rate: Optional[float]) -> Optional[float]:
    """Validate ``sample_rate`` (None or > 0) against the model's declared rate.

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


def _fill(baseline: BaselineSpec, content: Any, preset: Optional[str]) -> BaselineSpec:
    """The fill of an audio explanation.

    ``baseline``, or the deprecated ``content`` name; when neither was passed, the preset's fill
    (``UNSET``: the engine resolves it) or silence ("zero").
    """
    if content is not None:
        warnings.warn(
            "`content=` is now `baseline=` (content='mean' is baseline='signal_mean')", DeprecationWarning, stacklevel=3
        )
        baseline = cast(BaselineSpec, _CONTENT_NAMES.get(content, content) if isinstance(content, str) else content)
    if baseline is UNSET:
        check_preset(preset)
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


def explain_spectrogram(
    model: Model,
    specs: torch.Tensor,
    *,
    segments: SegmentSpec = "grid",
    time_segments: int = 5,
    freq_segments: int = 4,
    baseline: BaselineSpec = UNSET,
    sample_rate: Optional[float] = None,
    hop_length: Optional[int] = None,
    n_fft: Optional[int] = None,
    bin_freqs: Optional[Any] = None,
    fmin: float = 0.0,
    fmax: Optional[float] = None,
    n_segments: Optional[int] = None,
    compactness: float = 0.1,
    content: Any = None,
    **kwargs: Any,
) -> Explanation:
    """Explain a model of spectrograms over time-frequency segments.

    Args:
        model: callable from (c, Fr, Tm) or (c, C, Fr, Tm) spectrograms to scores (c, K).
        specs: real (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms (rows: frequency, columns: frames).
        segments: "grid" (time x frequency, default 5 x 4 as in SLIME / the veracity study),
            "time", "freq", "mel" (bands equally spaced on the mel scale), "slic"
            (superpixels), an integer map (Fr, Tm) / (B or 1, [1 or C,] Fr, Tm) or a callable.
        time_segments: time slots of the grids ("grid", "time", "mel").
        freq_segments: frequency bands of the grids ("grid", "freq", "mel").
        baseline: the fill of hidden segments (``torchlime.stages.perturb.fills``): "zero" (silence),
            "min", "max", "signal_mean", "noise", "shuffle", "blur" (a Gaussian of
            ``BLUR_SIGMA`` bins), "mean" (each segment's own mean), a number, a tensor or a
            callable. Default: the preset's fill (``preset="lime"``: "mean"), else "zero".
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
        content: deprecated name of ``baseline`` (content="mean" is baseline="signal_mean").
        **kwargs: any other ``torchlime.explain`` keyword (preset, target, n_samples, sampler,
            kernel, surrogate, generator, batch_size, softmax, return_samples, ...);
            ``preset="slime"`` (or "veracity") gives the SLIME settings (N = 8192).

    Returns:
        ``Explanation`` with coef (B, T, F); ``meta["audio"]`` records the segmentation.

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
    specs, segments = from_numpy(specs), from_numpy(segments)  # numpy arrays in, as at every door
    check_audio(specs, "specs", (3, 4), "(B, Fr, Tm) or (B, C, Fr, Tm)")
    sample_rate = check_sample_rate(model, sample_rate)
    if n_fft is not None:
        n_fft = check_positive_int(n_fft, "n_fft", minimum=2)
        if bin_freqs is None:
            warn_bins(specs.shape[-2], n_fft)
    if hop_length is not None:
        hop_length = check_positive_int(hop_length, "hop_length")
    features = spectrogram_segments(
        specs,
        segments,
        time_segments=time_segments,
        freq_segments=freq_segments,
        sample_rate=sample_rate,
        n_fft=n_fft,
        bin_freqs=bin_freqs,
        fmin=fmin,
        fmax=fmax,
        n_segments=n_segments,
        compactness=compactness,
    )
    fill = _fill(baseline, content, kwargs.get("preset"))
    exp = execute(Request(model, specs, features, dict(kwargs, baseline=fill), modality="audio", input_name="specs"))
    exp.meta["audio"] = dict(
        input="spectrogram",
        segments=segments if isinstance(segments, str) else "explicit",
        time_segments=time_segments,
        freq_segments=freq_segments,
        sample_rate=sample_rate,
        hop_length=hop_length,
        n_fft=n_fft,
        fmin=fmin,
        fmax=fmax,
        bin_freqs=None if bin_freqs is None else [float(f) for f in torch.as_tensor(bin_freqs)],
    )
    return exp


def explain_waveform(
    model: Model,
    waves: torch.Tensor,
    *,
    sample_rate: float,
    features: str = "time",
    time_segments: Optional[int] = None,
    freq_segments: int = 4,
    n_fft: int = 512,
    hop_length: Optional[int] = None,
    win_length: Optional[int] = None,
    freq_scale: str = "linear",
    baseline: BaselineSpec = UNSET,
    crossfade: float = 0.0,
    content: Any = None,
    **kwargs: Any,
) -> Explanation:
    """Explain a model of raw audio over time segments or time-frequency cells.

    Args:
        model: callable from (c, S) or (c, C, S) audio to scores (c, K); if it (or a
            submodule) has a ``sample_rate`` attribute it must equal ``sample_rate``.
        waves: real (B, S) or (B, C, S) audio.
        sample_rate: Hz of ``waves``.
        features: "time" (contiguous runs of samples) or "time_frequency" (cells of the STFT).
        time_segments: slots in time (default 10 for "time", 5 for "time_frequency").
        freq_segments: frequency bands for "time_frequency".
        n_fft: FFT size of the Hann-window STFT of "time_frequency"; the model sees
            ``istft(masked STFT)`` of length S.
        hop_length: hop of that STFT in samples (default n_fft // 4).
        win_length: Hann window length of that STFT (default n_fft).
        freq_scale: "linear" or "mel" spacing of the frequency bands.
        baseline: the fill of hidden segments, as in ``explain_spectrogram``, computed on
            the waveform for "time" and on the complex STFT for "time_frequency".
        crossfade: seconds of linear crossfade at segment borders ("time" only; 0 = hard cuts).
        content: deprecated name of ``baseline``.
        **kwargs: as in ``explain_spectrogram``.

    Returns:
        ``Explanation`` with coef (B, T, F); its feature map ``features`` is (B, S) for "time"
        and the STFT grid (B, Fr, Tm) for "time_frequency" ((B, 1, S) and (B, 1, Fr, Tm) for
        (B, C, S) audio: one map for every channel); ``meta["audio"]`` records the STFT.

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
        >>> tf = explain_waveform(model, waves.unsqueeze(0), sample_rate=8000, features="time_frequency",
        ...                       n_fft=256, n_samples=64)
        >>> tf.coef.shape, tf.features.shape
        (torch.Size([1, 1, 20]), torch.Size([1, 129, 63]))
    """
    waves = from_numpy(waves)  # numpy arrays in, as at every door
    check_audio(waves, "waves", (2, 3), "(B, S) or (B, C, S)")
    sample_rate = cast(float, check_sample_rate(model, check_positive_float(sample_rate, "sample_rate")))
    check_choice(features, "features", ("time", "time_frequency"))
    check_choice(freq_scale, "freq_scale", ("linear", "mel"))
    crossfade = check_positive_float(crossfade, "crossfade", allow_zero=True)
    fill = _fill(baseline, content, kwargs.get("preset"))
    n_samp = waves.shape[-1]
    lead = (1,) * (waves.ndim - 1)
    meta: dict[str, Any] = dict(input="waveform", features=features, sample_rate=sample_rate, length=n_samp)
    if features == "time":
        time_segments = check_positive_int(10 if time_segments is None else time_segments, "time_segments")
        if n_samp < time_segments:
            raise ValueError(f"`waves` has {n_samp} samples, too short for time_segments={time_segments}")
        fade = int(round(crossfade * sample_rate))
        if fade and 2 * fade >= n_samp // time_segments:
            raise ValueError(
                f"`crossfade` ({crossfade} s = {fade} samples) must be shorter than half a "
                f"segment ({n_samp // time_segments} samples)"
            )
        if fade:
            kwargs.setdefault("perturb_fn", crossfade_blend(fade))
        feats = even_bands(n_samp, time_segments, waves.device).view(*lead, n_samp)
        meta.update(time_segments=time_segments, crossfade=crossfade)
        exp = execute(Request(model, waves, feats, dict(kwargs, baseline=fill), modality="audio", input_name="waves"))
        exp.meta["audio"] = meta
        return exp

    time_segments = check_positive_int(5 if time_segments is None else time_segments, "time_segments")
    n_fft = check_positive_int(n_fft, "n_fft", minimum=2)
    hop = check_positive_int(hop_length if hop_length is not None else max(1, n_fft // 4), "hop_length")
    win = check_positive_int(win_length if win_length is not None else n_fft, "win_length")
    if win > n_fft:
        raise ValueError(f"`win_length` must be <= n_fft ({n_fft}), got {win}")
    if hop > win:
        raise ValueError(
            f"`hop_length` must be <= win_length ({win}) for the STFT of features='time_frequency' "
            f"(frames must overlap for torch.istft to rebuild the audio), got {hop}"
        )
    if n_samp < n_fft:
        raise ValueError(
            f"`waves` has {n_samp} samples, too short for the STFT with n_fft={n_fft}; "
            f"pass a smaller `n_fft` or longer audio"
        )
    if crossfade:
        raise ValueError("`crossfade` applies to features='time' only (STFT cells overlap-add smoothly)")
    kernel, source = kwargs.get("kernel"), "`kernel`"
    if kernel is None and kwargs.get("preset") is not None:  # the preset's kernel applies
        kernel = resolve(kwargs["preset"], dict(kernel=UNSET), "audio")["kernel"]
        source = f"`kernel` (from preset={kwargs['preset']!r})"
    if kernel is not None and resolve_kernel(kernel).space == "input":
        raise ValueError(
            f"{source} must measure distances on the masks (space='mask') with "
            f"features='time_frequency': the explained inputs are complex STFTs; pass a mask-space "
            f"kernel (e.g. kernel='lime')"
        )
    check_finite(waves, "waves")  # the engine checks the STFT, not the audio itself
    spec = stft(waves, n_fft, hop, win)  # (B, [C,] Fr, Tm) complex
    check_invertible(spec, n_fft, hop, win, n_samp)
    n_freq, n_frames = spec.shape[-2:]
    check_segment_counts(n_freq, n_frames, freq_segments, time_segments, what="the STFT of `waves`")
    bands = (
        mel_bands(bin_frequencies(n_freq, sample_rate, n_fft, waves.device), freq_segments)
        if freq_scale == "mel"
        else None
    )
    feats = grid((n_freq, n_frames), (freq_segments, time_segments), bands=(bands, None), device=waves.device)
    adapter = functools.partial(ISTFTModel, n_fft=n_fft, hop_length=hop, win_length=win, length=n_samp, reference=waves)
    meta.update(
        time_segments=time_segments,
        freq_segments=freq_segments,
        n_fft=n_fft,
        hop_length=hop,
        win_length=win,
        freq_scale=freq_scale,
    )
    feature_map = feats.view(*lead, n_freq, n_frames)
    exp = execute(
        Request(
            model, spec, feature_map, dict(kwargs, baseline=fill), modality="audio", input_name="waves", adapter=adapter
        )
    )
    exp.meta["audio"] = meta
    return exp
