"""Looking at and listening to audio explanations.

``plot_spectrogram_explanation`` draws a spectrogram with the explanation's
coefficients overlaid (``RdBu_r``: red supports the target, blue opposes it),
segment borders and the top-k segments by |weight| numbered; axes in seconds and
Hz when the sample rate and STFT are known. matplotlib is imported only when a
figure is drawn. ``save_top_segments_wav`` writes what the model relied on as
16-bit PCM WAV files (standard-library ``wave``): the top-k segments (by |weight|,
or by signed weight with ``by="value"``) alone, their complement, and the original clip.
"""

from __future__ import annotations

import operator
import warnings
import wave
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, Union, cast

import numpy as np
import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_ndim, check_tensor, describe, require
from torchlime.audio._axis_units import AxisUnits
from torchlime.audio._spectrograms import SpectrogramInfo
from torchlime.audio._waveforms import WaveformInfo
from torchlime.audio.segments import bin_frequencies, warn_bins
from torchlime.audio.stft import istft, stft
from torchlime.engine.explanation import Explanation
from torchlime.typing import RankBy

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import NDArray


def _record(explanation: Explanation) -> Union[SpectrogramInfo, WaveformInfo, None]:
    """The explanation's audio record (``Explanation.info``; read back from files too), or None."""
    info = explanation.info
    return info if isinstance(info, (SpectrogramInfo, WaveformInfo)) else None


def _over_time(record: Union[SpectrogramInfo, WaveformInfo, None]) -> bool:
    """Whether the record says the features are time segments of waveforms (``segments="time"``)."""
    return isinstance(record, WaveformInfo) and record.segments == "time"


def _axes(
    record: Union[SpectrogramInfo, WaveformInfo, None],
    n_freq: int,
    n_time: int,
    sample_rate: Optional[float],
    hop_length: Optional[int],
    n_fft: Optional[int],
    bin_freqs: Optional[Sequence[float]],
) -> tuple[NDArray[np.float64], NDArray[np.float64], str, str]:
    """Frame times and bin frequencies (or indices) with their axis labels (defaults: the audio ``record``)."""
    sr = sample_rate or getattr(record, "sample_rate", None)
    hop = hop_length or getattr(record, "hop_length", None)
    fft = n_fft or getattr(record, "n_fft", None)
    freqs = bin_freqs if bin_freqs is not None else getattr(record, "bin_freqs", None)
    if sr and hop:
        times, t_label = np.arange(n_time) * hop / sr, "time (s)"
    else:
        times, t_label = np.arange(n_time, dtype=float), "frame"
    if freqs is not None:
        f, f_label = np.asarray(freqs, dtype=float), "frequency (Hz)"
    elif sr:
        warn_bins(n_freq, fft)
        f, f_label = bin_frequencies(n_freq, sr, fft).numpy().astype(float), "frequency (Hz)"
    else:
        f, f_label = np.arange(n_freq, dtype=float), "frequency bin"
    return times, f, t_label, f_label


def _borders(
    labels: NDArray[np.int64], times: NDArray[np.float64], freqs: NDArray[np.float64]
) -> list[list[tuple[float, float]]]:
    """Line pieces between adjacent (Fr, Tm) cells with different labels, in axis units."""
    te = np.concatenate(
        [
            [times[0] - (times[1] - times[0]) / 2 if len(times) > 1 else -0.5],
            (times[1:] + times[:-1]) / 2,
            [times[-1] + (times[-1] - times[-2]) / 2 if len(times) > 1 else 0.5],
        ]
    )
    fe = np.concatenate(
        [
            [freqs[0] - (freqs[1] - freqs[0]) / 2 if len(freqs) > 1 else -0.5],
            (freqs[1:] + freqs[:-1]) / 2,
            [freqs[-1] + (freqs[-1] - freqs[-2]) / 2 if len(freqs) > 1 else 0.5],
        ]
    )
    fi, ti = np.nonzero(labels[:, 1:] != labels[:, :-1])  # vertical borders
    lines = [[(te[t + 1], fe[f]), (te[t + 1], fe[f + 1])] for f, t in zip(fi, ti)]
    fi, ti = np.nonzero(labels[1:, :] != labels[:-1, :])  # horizontal borders
    lines += [[(te[t], fe[f + 1]), (te[t + 1], fe[f + 1])] for f, t in zip(fi, ti)]
    return lines


#: peak level above which ``save_top_segments_wav`` warns that the audio is not in [-1, 1]
CLIP_WARN_PEAK = 2.0


def _position(value: object, name: str, size: int, what: str) -> int:
    """``value`` as an int in [0, size), else a TypeError / ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise TypeError(f"`{name}` must be an int in [0, {size}) ({what}), got {describe(value)}")
    value = operator.index(value)
    if not 0 <= value < size:
        raise ValueError(f"`{name}` must be an int in [0, {size}) ({what}), got {value}")
    return value


def _clip_map(explanation: Explanation, index: int) -> torch.Tensor:
    """The feature map of clip ``index`` without its leading size-1 dimensions."""
    lab = explanation.features[index]
    while lab.ndim > 1 and lab.shape[0] == 1:
        lab = lab[0]
    return lab


def plot_spectrogram_explanation(  # noqa: PLR0913
    explanation: Explanation,
    specs: torch.Tensor,
    *,
    index: int = 0,
    target_index: int = 0,
    channel: int = 0,
    k: int = 3,
    units: Optional[AxisUnits] = None,
    truth: Optional[torch.Tensor] = None,
    alpha: float = 0.55,
    title: Optional[str] = None,
    class_names: Optional[_colours.ClassNames] = None,
    ax: Optional[Axes] = None,
) -> Figure:
    """Spectrogram of clip ``index`` with its explanation overlaid.

    Args:
        explanation: from ``explain_spectrogram`` or ``explain_waveform(segments="time_frequency")``.
        specs: the explained spectrograms (B, [C,] Fr, Tm), real or complex (shown in dB).
        index: which clip.
        target_index: which explained target (column of ``explanation.target``).
        channel: which channel of (B, C, Fr, Tm) spectrograms.
        k: number the k strongest segments (largest |weight|; 0: none), circled red when they support
            the target, blue when they oppose it.
        units: what the axes measure, for seconds and Hz (``AxisUnits(sample_rate, hop_length, n_fft,
            bin_freqs)``); a field left None, or ``units=None``, is read from the explanation's audio record.
        truth: optional bool (Fr, Tm) ground-truth region, outlined in white.
        alpha: opacity of the coefficient overlay.
        title: axes title (default: the clip and its target).
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            title and the colour bar ("weight for 'dog'"; default: the class index).
        ax: draw into these matplotlib axes (default: a new figure).

    Returns:
        The matplotlib ``Figure`` (the one of ``ax`` when it is given).

    Raises:
        ValueError / TypeError: ``specs`` that are not (B, [C,] Fr, Tm) spectrograms (e.g.
            waveforms: pass their STFT, ``torchlime.audio.stft.stft``), an explanation over time
            segments (``explain_waveform(features="time")``), a grid that is not the
            explanation's, an index, target or channel out of range.
    """
    check_tensor(specs, "specs")
    if specs.ndim not in (3, 4):
        raise ValueError(
            f"`specs` must be the (B, Fr, Tm) or (B, C, Fr, Tm) spectrograms that were explained (for "
            f"waveforms, their STFT: torchlime.audio.stft.stft(waves, n_fft, hop_length, win_length) "
            f"with the explanation's info settings), got shape {tuple(specs.shape)}"
        )
    record = _record(explanation)
    index = _position(index, "index", explanation.coef.shape[0], "a clip of the explanation")
    target_index = _position(target_index, "target_index", explanation.coef.shape[1], "an explained target")
    if specs.shape[0] != explanation.coef.shape[0]:
        raise ValueError(
            f"`specs` must hold the {explanation.coef.shape[0]} clips of the explanation, got {specs.shape[0]}"
        )
    channel = _position(channel, "channel", specs.shape[1] if specs.ndim == 4 else 1, "a channel of `specs`")
    labels = _clip_map(explanation, index).detach().cpu()
    labels = labels[channel] if labels.ndim == 3 else labels
    if labels.ndim != 2 or _over_time(record):
        raise ValueError(
            f"`explanation` must be over time-frequency cells (explain_spectrogram or "
            f"explain_waveform(features='time_frequency')), got one over time segments (feature map "
            f"of clip {index}: shape {tuple(explanation.features[index].shape)})"
        )
    x = specs[index].detach().cpu()
    x = x[channel] if x.ndim == 3 else x
    if tuple(x.shape) != tuple(labels.shape):
        raise ValueError(
            f"`specs` clip {index} is a {tuple(x.shape)} grid but the explanation's feature map is "
            f"{tuple(labels.shape)}: pass the spectrograms that were explained (for explain_waveform, "
            f"stft(waves, n_fft, hop_length, win_length) with explanation.info's settings)"
        )
    plt = require("matplotlib.pyplot", "viz", "plot_spectrogram_explanation")
    from matplotlib.collections import LineCollection

    x = 20 * torch.log10(x.abs() + 1e-6) if x.is_complex() else x.float()
    n_freq, n_time = x.shape
    u = units or AxisUnits()
    times, freqs, t_label, f_label = _axes(record, n_freq, n_time, u.sample_rate, u.hop_length, u.n_fft, u.bin_freqs)
    heat = explanation.heatmap(target_index)[index].detach().cpu().float()
    heat = heat[channel] if heat.ndim == 3 and heat.shape[0] > 1 else heat.reshape(labels.shape)
    fig: Figure
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    fig = cast("Figure", ax.figure)  # a SubFigure for the axes of a subfigure
    ax.pcolormesh(times, freqs, x.numpy(), shading="nearest", cmap="gray_r")
    lim = float(heat.abs().max()) or 1.0
    mesh = ax.pcolormesh(
        times, freqs, heat.numpy(), shading="nearest", cmap=_colours.CMAP, vmin=-lim, vmax=lim, alpha=alpha
    )
    name = _colours.class_name(int(explanation.target[index, target_index]), class_names)
    fig.colorbar(mesh, ax=ax).set_label(_colours.label(f"weight for '{name}'"), fontsize=8)
    ax.add_collection(LineCollection(_borders(labels.numpy(), times, freqs), colors="k", linewidths=0.8))
    if truth is not None:
        ax.contour(times, freqs, truth.detach().cpu().float().numpy(), levels=[0.5], colors="w", linewidths=1)
    if k:
        idx, val = explanation.top_features(k, by="abs")
        for rank, (f, v) in enumerate(zip(idx[index, target_index].tolist(), val[index, target_index].tolist()), 1):
            fi, ti = np.nonzero(labels.numpy() == f)
            if len(fi) and v != 0:
                colour = _colours.RED_HEX if v > 0 else _colours.BLUE_HEX
                ax.text(
                    times[ti].mean(),
                    freqs[fi].mean(),
                    str(rank),
                    ha="center",
                    va="center",
                    fontsize=11,
                    weight="bold",
                    color=colour,
                    bbox=dict(boxstyle="circle,pad=0.2", fc="white", ec=colour, lw=2, alpha=0.9),
                )
    ax.set_xlabel(t_label)
    ax.set_ylabel(f_label)
    ax.set_title(title or f"clip {index}, target {name}")
    return fig


def write_wav(path: Union[str, Path], audio: torch.Tensor, sample_rate: int) -> Path:
    """Write float audio (S,) or (C, S) in [-1, 1] (clipped) as 16-bit PCM WAV."""
    a = audio.detach().cpu().float()
    a = a.unsqueeze(0) if a.ndim == 1 else a
    pcm = (a.clamp(-1, 1) * 32767).round().to(torch.int16).T.contiguous().numpy()  # (S, C) interleaved
    path = Path(path)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(a.shape[0])
        f.setsampwidth(2)
        f.setframerate(int(sample_rate))
        f.writeframes(pcm.astype("<i2").tobytes())
    return path


def _keep_map(explanation: Explanation, index: int, target_index: int, k: int, by: RankBy) -> torch.Tensor:
    """Bool feature map of clip ``index`` (leading size-1 dimensions dropped): True on its top-k segments."""
    idx, _ = explanation.top_features(k, by=by)
    lab = _clip_map(explanation, index)
    return torch.isin(lab, idx[index, target_index].to(lab.device))


def _check_waves(explanation: Explanation, waves: object, index: int) -> torch.Tensor:
    """Float clip ``index`` of ``waves`` (B, [C,] S), checked against the explanation.

    Warns when it lies far outside [-1, 1] (its WAV would be mostly clipped).
    """
    waves = check_tensor(waves, "waves")
    if waves.is_complex() or not waves.is_floating_point():
        raise TypeError(
            f"`waves` must be float audio in [-1, 1], got dtype {waves.dtype}; for int16 PCM pass waves.float() / 32768"
        )
    check_ndim(waves, "waves", (2, 3), "(B, S) or (B, C, S)")
    batch = explanation.coef.shape[0]
    if waves.shape[0] != batch:
        raise ValueError(f"`waves` must hold the {batch} clips of the explanation, got {waves.shape[0]}")
    wav = waves[index].detach().float()
    peak = float(wav.abs().max()) if wav.numel() else 0.0
    if peak > CLIP_WARN_PEAK:
        clipped = float((wav.abs() > 1).float().mean()) * 100
        warnings.warn(
            f"`waves` clip {index} peaks at {peak:.4g}, far outside [-1, 1]: {clipped:.2f} % of its samples "
            f"are clipped in the 16-bit WAV files; scale the audio to [-1, 1] (int16 PCM: divide by 32768)",
            UserWarning,
            stacklevel=3,
        )
    return wav


def save_top_segments_wav(  # noqa: PLR0913
    explanation: Explanation,
    waves: torch.Tensor,
    out_dir: Union[str, Path],
    *,
    k: int = 3,
    index: int = 0,
    target_index: int = 0,
    sample_rate: Optional[int] = None,
    n_fft: Optional[int] = None,
    hop_length: Optional[int] = None,
    win_length: Optional[int] = None,
    prefix: str = "clip",
    by: RankBy = "abs",
) -> dict[str, Path]:
    """Write the clip, its top-k segments alone and their complement as WAV files.

    The top segments are those of largest |weight| (``by="abs"``, as in every listing and picture), or
    the k that support the target most (``by="value"``: what speaks for it, alone).

    Works for explanations over time segments of the samples (``explain_waveform``) and
    over time-frequency cells: the cells are applied to the STFT of ``waves`` (``n_fft`` /
    ``hop_length`` / ``win_length`` default to the record ``explanation.info``; a feature grid of another
    size, e.g. of a model spectrogram, is mapped onto the STFT grid proportionally) and the
    audio is resynthesised with ``torch.istft``.

    Args:
        explanation: the explanation of ``waves`` (or of spectrograms computed from them).
        waves: real (B, S) or (B, C, S) audio.
        out_dir: folder of the files, created if missing.
        k: how many top segments to keep.
        index: which clip.
        target_index: which explained target (column of ``explanation.target``).
        sample_rate: Hz (default ``explanation.info.sample_rate``).
        n_fft: STFT size for time-frequency cells (default ``explanation.info``, else 512).
        hop_length: STFT hop in samples (default ``explanation.info``, else n_fft // 4).
        win_length: STFT Hann window length (default ``explanation.info``, else n_fft).
        prefix: file name prefix.
        by: how segments are ranked: "abs" (largest |weight|) or "value" (largest weight).

    Returns:
        ``{"original": path, "top": path, "complement": path}``.

    Raises:
        TypeError / ValueError: ``waves`` that are not float (B, [C,] S) audio of the explained
            clips (int16 PCM: divide by 32768), of another length than a features="time"
            explanation's, an index or target out of range, no sample rate. Warns when the
            clip peaks far outside [-1, 1] (the WAV files would be clipped).
    """
    record = _record(explanation)
    index = _position(index, "index", explanation.coef.shape[0], "a clip of the explanation")
    target_index = _position(target_index, "target_index", explanation.coef.shape[1], "an explained target")
    sr = int(sample_rate or getattr(record, "sample_rate", None) or 0)
    if sr <= 0:
        raise ValueError("`sample_rate` is needed (the explanation does not record one)")
    wav = _check_waves(explanation, waves, index)
    keep = _keep_map(explanation, index, target_index, k, by).to(wav.device)
    over_time = _over_time(record) or (keep.ndim == 1 and not isinstance(record, WaveformInfo))
    if over_time and keep.shape[-1] != wav.shape[-1]:
        raise ValueError(
            f"`waves` must have the {keep.shape[-1]} samples the explanation's time segments cover "
            f"(features='time'), got {wav.shape[-1]}"
        )
    if not over_time and keep.ndim != 2:
        raise ValueError(
            f"`explanation` must be over time segments of the samples or over one time-frequency grid "
            f"(Fr, Tm) per clip, got a feature map of shape {tuple(explanation.features[index].shape)} "
            f"for clip {index}"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if over_time:
        top = wav * keep
        rest = wav - top
    else:
        fft = int(n_fft or getattr(record, "n_fft", None) or 512)
        hop = int(hop_length or getattr(record, "hop_length", None) or fft // 4)
        win = int(win_length or getattr(record, "win_length", None) or fft)
        spec = stft(wav, fft, hop, win)  # ([C,] Fr, Tm)
        grid = keep.float()[None, None]
        grid = torch.nn.functional.interpolate(grid, size=spec.shape[-2:], mode="nearest")[0, 0] > 0.5
        top = istft(spec * grid, fft, hop, win, wav.shape[-1])
        rest = istft(spec * ~grid, fft, hop, win, wav.shape[-1])
    names = dict(original=wav, top=top, complement=rest)
    return {
        name: write_wav(out / f"{prefix}{index}_{name if name != 'top' else f'top{k}'}.wav", a, sr)
        for name, a in names.items()
    }
