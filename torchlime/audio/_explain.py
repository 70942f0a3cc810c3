"""LIME for audio models: spectrogram and waveform explanations on the device.

``explain_spectrogram`` explains models of spectrograms (B, Fr, Tm) or
(B, C, Fr, Tm) over time-frequency segments (``audio_segments``); hidden
segments take a content computed on the device (``audio_content``).
``explain_waveform`` explains models of raw audio (B, S) or (B, C, S), either
over time segments of the samples (optionally crossfaded), or over
time-frequency cells of the waveform's STFT: the complex STFT is masked cell
by cell and turned back into audio with ``torch.istft`` (same length) inside
the batched forward pass, so a model with its own front end (e.g. a torchaudio
``MelSpectrogram``) works unchanged. Both run the whole explanation as one
chunked batched pass of ``torchlime.explain``.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import torch

from .._checks import check_choice, check_ndim, check_positive_float, check_positive_int, check_tensor, describe
from ._content import ContentSpec, hidden_content
from .segments import (SegmentSpec, bin_frequencies, check_segment_counts, even_bands, grid, mel_bands,
                             spectrogram_segments)
from .stft import ISTFTModel, crossfade_blend, stft
from ..engine import explain, resolve_generator
from ..explanation import Explanation
from ..forward import Model
from ..sampling import BernoulliSampler
from ..surrogate import Ridge
from ..weighting import ExponentialKernel, resolve_kernel

AUDIO_PRESETS: dict[str, dict[str, Any]] = {
    # SLIME / the veracity study: Bernoulli(1/2) masks, cosine distance on the masks,
    # kernel width 0.25, ridge alpha 1, N = 8192, all in one batched chunked pass
    "slime": dict(n_samples=8192, sampler=BernoulliSampler(0.5), kernel=ExponentialKernel(width=0.25),
                  surrogate=Ridge(alpha=1.0)),
}
AUDIO_PRESETS["veracity"] = AUDIO_PRESETS["slime"]


def model_sample_rate(model: Any) -> Optional[float]:
    """The sample rate a model declares: its own ``sample_rate`` attribute, else the first
    submodule's (e.g. a torchaudio ``MelSpectrogram`` front end); None when there is none."""
    candidates = [model]
    if isinstance(model, torch.nn.Module):
        candidates += list(model.modules())[1:]
    for m in candidates:
        rate = getattr(m, "sample_rate", None)
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            return float(rate)
    return None


def check_sample_rate(model: Any, sample_rate: Optional[float]) -> None:
    """Raise ``ValueError`` when ``sample_rate`` disagrees with the model's declared rate."""
    declared = model_sample_rate(model)
    if sample_rate is not None and declared is not None and float(sample_rate) != declared:
        raise ValueError(f"`sample_rate` ({sample_rate} Hz) disagrees with the model's sample_rate "
                         f"({declared:g} Hz); resample the audio or pass the model's rate")


def check_finite(x: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` naming the clips of ``x`` (B, ...) that hold NaN or inf."""
    bad = ~torch.isfinite(x.reshape(x.shape[0], -1)).all(1)
    if bool(bad.any()):
        raise ValueError(f"`{name}` must be finite; clips {bad.nonzero().flatten().tolist()} hold NaN or inf")


def _resolve(preset: Optional[str], kwargs: dict[str, Any]) -> Optional[str]:
    """Fill ``kwargs`` from an audio preset; return what ``explain`` should see as its preset."""
    if "baseline" in kwargs:
        raise TypeError("audio explanations take `content=` (a name, number, tensor or callable) "
                        "instead of `baseline=`")
    if preset in AUDIO_PRESETS:
        for key, value in AUDIO_PRESETS[preset].items():
            kwargs.setdefault(key, value)
        return None
    return preset


def _run(model: Model, inputs: torch.Tensor, features: torch.Tensor, content: ContentSpec,
         signal_dims: int, preset: Optional[str], generator: Any, audio_meta: dict[str, Any],
         kwargs: dict[str, Any]) -> Explanation:
    """Compute the content with the generator, then explain with the same generator."""
    engine_preset = _resolve(preset, kwargs)
    gen = resolve_generator(generator, inputs.device)
    base = hidden_content(inputs, content, generator=gen, signal_dims=signal_dims)
    exp = explain(model, inputs, features, baseline=base, generator=gen, preset=engine_preset, **kwargs)
    exp.meta["preset"] = preset
    exp.meta["audio"] = dict(audio_meta, content=content if isinstance(content, (str, int, float))
                             else describe(content))
    return exp


def explain_spectrogram(model: Model, specs: torch.Tensor, *, segments: SegmentSpec = "grid",
                        time_segments: int = 5, freq_segments: int = 4, content: ContentSpec = "zero",
                        sample_rate: Optional[float] = None, hop_length: Optional[int] = None,
                        n_fft: Optional[int] = None, bin_freqs: Optional[Any] = None, fmin: float = 0.0,
                        fmax: Optional[float] = None, n_segments: Optional[int] = None,
                        compactness: float = 0.1, preset: Optional[str] = None,
                        generator: Union[None, int, torch.Generator] = None, **kwargs: Any) -> Explanation:
    """Explain a model of spectrograms over time-frequency segments.

    Args:
        model: callable from (c, Fr, Tm) or (c, C, Fr, Tm) spectrograms to scores (c, K).
        specs: real (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms (rows: frequency, columns: frames).
        segments: "grid" (time x frequency, default 5 x 4 as in SLIME / the veracity study),
            "time", "freq", "mel" (bands equally spaced on the mel scale), "slic"
            (superpixels), an integer map (Fr, Tm) / (B or 1, [1 or C,] Fr, Tm) or a callable.
        time_segments, freq_segments: slots and bands of the grids.
        content: hidden segments become "zero", "min", "max", "mean", "noise", "shuffle" or
            "blur" (see ``audio_content``), a number, a tensor or a callable.
        sample_rate, hop_length, n_fft: the spectrogram's STFT (for "mel", the plots and the
            sample-rate check against ``model.sample_rate``); bin_freqs: (Fr,) bin frequencies
            in Hz (e.g. a mel spectrogram's centres); fmin / fmax: range of the mel bands.
        n_segments, compactness: SLIC settings (n_segments defaults to time x freq segments).
        preset: "slime" / "veracity" (Bernoulli 1/2, cosine, width 0.25, ridge 1, N = 8192)
            or an engine preset ("lime", "captum", ...).
        generator: seed or generator, used for the content first and then for the masks.
        **kwargs: any other ``torchlime.explain`` keyword (target, n_samples, sampler, kernel,
            surrogate, batch_size, softmax, return_samples, ...).

    Returns:
        ``Explanation`` with coef (B, T, F); ``meta["audio"]`` records the segmentation.

    Raises:
        ValueError / TypeError: wrong dimensions, more segments than frames or bins,
            non-finite spectrograms, a sample rate that disagrees with the model's.

    Example:
        >>> model = lambda s: s[:, 10:20, 5:9].mean((1, 2)).unsqueeze(1)
        >>> exp = explain_spectrogram(model, torch.rand(2, 64, 40), n_samples=256)
        >>> exp.coef.shape
        torch.Size([2, 1, 20])
    """
    check_tensor(specs, "specs")
    check_ndim(specs, "specs", (3, 4), "(B, Fr, Tm) or (B, C, Fr, Tm)")
    if specs.is_complex() or not specs.is_floating_point():
        raise TypeError(f"`specs` must be a real floating tensor, got {specs.dtype} "
                        f"(for complex STFTs of audio use explain_waveform(features='time_frequency'))")
    check_finite(specs, "specs")
    check_sample_rate(model, sample_rate)
    if isinstance(segments, str) and segments != "slic":
        t_seg = 1 if segments == "freq" else time_segments
        f_seg = 1 if segments == "time" else freq_segments
        check_segment_counts(specs.shape[-2], specs.shape[-1], f_seg, t_seg)
    features = spectrogram_segments(
        specs, segments, time_segments=time_segments, freq_segments=freq_segments, sample_rate=sample_rate,
        n_fft=n_fft, bin_freqs=bin_freqs, fmin=fmin, fmax=fmax, n_segments=n_segments, compactness=compactness)
    meta = dict(input="spectrogram", segments=segments if isinstance(segments, str) else "explicit",
                time_segments=time_segments, freq_segments=freq_segments, sample_rate=sample_rate,
                hop_length=hop_length, n_fft=n_fft, fmin=fmin, fmax=fmax,
                bin_freqs=None if bin_freqs is None else [float(f) for f in torch.as_tensor(bin_freqs)])
    return _run(model, specs, features, content, 2, preset, generator, meta, kwargs)


def explain_waveform(model: Model, waves: torch.Tensor, *, sample_rate: float, features: str = "time",
                     time_segments: Optional[int] = None, freq_segments: int = 4, n_fft: int = 512,
                     hop_length: Optional[int] = None, win_length: Optional[int] = None,
                     freq_scale: str = "linear", content: ContentSpec = "zero", crossfade: float = 0.0,
                     preset: Optional[str] = None, generator: Union[None, int, torch.Generator] = None,
                     **kwargs: Any) -> Explanation:
    """Explain a model of raw audio over time segments or time-frequency cells.

    Args:
        model: callable from (c, S) or (c, C, S) audio to scores (c, K); if it (or a
            submodule) has a ``sample_rate`` attribute it must equal ``sample_rate``.
        waves: real (B, S) or (B, C, S) audio.
        sample_rate: Hz of ``waves``.
        features: "time" (contiguous runs of samples) or "time_frequency" (cells of the STFT).
        time_segments: slots in time (default 10 for "time", 5 for "time_frequency").
        freq_segments: frequency bands for "time_frequency".
        n_fft, hop_length (default n_fft // 4), win_length (default n_fft): the Hann-window
            STFT of "time_frequency"; the model sees ``istft(masked STFT)`` of length S.
        freq_scale: "linear" or "mel" spacing of the frequency bands.
        content: hidden segments' content (``audio_content``) computed on the waveform for
            "time" and on the complex STFT for "time_frequency".
        crossfade: seconds of linear crossfade at segment borders ("time" only; 0 = hard cuts).
        preset, generator, **kwargs: as in ``explain_spectrogram``.

    Returns:
        ``Explanation``; its feature map is (1, [1,] S) for "time" and the STFT grid
        (1, [1,] Fr, Tm) for "time_frequency"; ``meta["audio"]`` records the STFT.

    Raises:
        ValueError / TypeError: wrong dimensions, non-finite audio, audio shorter than the
            STFT or than the number of segments, a sample rate that disagrees with the model's.
    """
    check_tensor(waves, "waves")
    check_ndim(waves, "waves", (2, 3), "(B, S) or (B, C, S)")
    if waves.is_complex() or not waves.is_floating_point():
        raise TypeError(f"`waves` must be a real floating tensor, got {waves.dtype}")
    check_finite(waves, "waves")
    sample_rate = check_positive_float(sample_rate, "sample_rate")
    check_sample_rate(model, sample_rate)
    check_choice(features, "features", ("time", "time_frequency"))
    check_choice(freq_scale, "freq_scale", ("linear", "mel"))
    crossfade = check_positive_float(crossfade, "crossfade", allow_zero=True)
    n_samp = waves.shape[-1]
    lead = (1,) * (waves.ndim - 1)
    meta: dict[str, Any] = dict(input="waveform", features=features, sample_rate=sample_rate, length=n_samp)
    if features == "time":
        time_segments = check_positive_int(10 if time_segments is None else time_segments, "time_segments")
        if n_samp < time_segments:
            raise ValueError(f"`waves` has {n_samp} samples, too short for time_segments={time_segments}")
        fade = int(round(crossfade * sample_rate))
        if fade and 2 * fade >= n_samp // time_segments:
            raise ValueError(f"`crossfade` ({crossfade} s = {fade} samples) must be shorter than half a "
                             f"segment ({n_samp // time_segments} samples)")
        if fade:
            kwargs.setdefault("perturb_fn", crossfade_blend(fade))
        feats = even_bands(n_samp, time_segments, waves.device).view(*lead, n_samp)
        meta.update(time_segments=time_segments, crossfade=crossfade)
        return _run(model, waves, feats, content, 1, preset, generator, meta, kwargs)

    time_segments = check_positive_int(5 if time_segments is None else time_segments, "time_segments")
    n_fft = check_positive_int(n_fft, "n_fft", minimum=2)
    hop = check_positive_int(hop_length if hop_length is not None else max(1, n_fft // 4), "hop_length")
    win = check_positive_int(win_length if win_length is not None else n_fft, "win_length")
    if win > n_fft:
        raise ValueError(f"`win_length` must be <= n_fft ({n_fft}), got {win}")
    if n_samp < n_fft:
        raise ValueError(f"`waves` has {n_samp} samples, too short for the STFT with n_fft={n_fft}; "
                         f"pass a smaller `n_fft` or longer audio")
    if crossfade:
        raise ValueError("`crossfade` applies to features='time' only (STFT cells overlap-add smoothly)")
    kernel = kwargs.get("kernel")
    if kernel is not None and resolve_kernel(kernel).space == "input":
        raise ValueError("`kernel` must measure distances on the masks (space='mask') with "
                         "features='time_frequency': the explained inputs are complex STFTs")
    spec = stft(waves, n_fft, hop, win)  # (B, [C,] Fr, Tm) complex
    n_freq, n_frames = spec.shape[-2:]
    check_segment_counts(n_freq, n_frames, freq_segments, time_segments, what="the STFT of `waves`")
    bands = mel_bands(bin_frequencies(n_freq, sample_rate, n_fft, waves.device), freq_segments) \
        if freq_scale == "mel" else None
    feats = grid(n_freq, n_frames, freq_segments, time_segments, freq_bands=bands, device=waves.device)
    wrapped = ISTFTModel(model, n_fft, hop, win, n_samp, waves)
    meta.update(time_segments=time_segments, freq_segments=freq_segments, n_fft=n_fft, hop_length=hop,
                win_length=win, freq_scale=freq_scale)
    return _run(wrapped, spec, feats.view(*lead, n_freq, n_frames), content, 2, preset, generator, meta, kwargs)

