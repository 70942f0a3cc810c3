"""Looking at and listening to audio explanations.

``plot_spectrogram_explanation`` draws a spectrogram with the explanation's
coefficients overlaid, segment borders and the top-k segments numbered; axes in
seconds and Hz when the sample rate and STFT are known. matplotlib is imported
only when a figure is drawn. ``save_top_segments_wav`` writes what the model
relied on as 16-bit PCM WAV files (standard-library ``wave``): the top-k
segments alone, their complement, and the original clip.
"""
from __future__ import annotations

import wave
from pathlib import Path
from typing import Any, Optional, Sequence, Union

import numpy as np
import torch

from .._checks import require
from ..explanation import Explanation
from .segments import bin_frequencies
from .stft import istft, stft


def _axes(meta: dict[str, Any], n_freq: int, n_time: int, sample_rate: Optional[float],
          hop_length: Optional[int], n_fft: Optional[int],
          bin_freqs: Optional[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, str, str]:
    """Frame times and bin frequencies (or indices) with their axis labels."""
    sr = sample_rate or meta.get("sample_rate")
    hop = hop_length or meta.get("hop_length")
    fft = n_fft or meta.get("n_fft")
    freqs = bin_freqs if bin_freqs is not None else meta.get("bin_freqs")
    if sr and hop:
        times, t_label = np.arange(n_time) * hop / sr, "time (s)"
    else:
        times, t_label = np.arange(n_time, dtype=float), "frame"
    if freqs is not None:
        f, f_label = np.asarray(freqs, dtype=float), "frequency (Hz)"
    elif sr:
        f, f_label = bin_frequencies(n_freq, sr, fft).numpy().astype(float), "frequency (Hz)"
    else:
        f, f_label = np.arange(n_freq, dtype=float), "frequency bin"
    return times, f, t_label, f_label


def _borders(labels: np.ndarray, times: np.ndarray, freqs: np.ndarray) -> list[list[tuple[float, float]]]:
    """Line pieces between adjacent (Fr, Tm) cells with different labels, in axis units."""
    te = np.concatenate([[times[0] - (times[1] - times[0]) / 2 if len(times) > 1 else -0.5],
                         (times[1:] + times[:-1]) / 2, [times[-1] + (times[-1] - times[-2]) / 2
                                                        if len(times) > 1 else 0.5]])
    fe = np.concatenate([[freqs[0] - (freqs[1] - freqs[0]) / 2 if len(freqs) > 1 else -0.5],
                         (freqs[1:] + freqs[:-1]) / 2, [freqs[-1] + (freqs[-1] - freqs[-2]) / 2
                                                        if len(freqs) > 1 else 0.5]])
    fi, ti = np.nonzero(labels[:, 1:] != labels[:, :-1])  # vertical borders
    lines = [[(te[t + 1], fe[f]), (te[t + 1], fe[f + 1])] for f, t in zip(fi, ti)]
    fi, ti = np.nonzero(labels[1:, :] != labels[:-1, :])  # horizontal borders
    lines += [[(te[t], fe[f + 1]), (te[t + 1], fe[f + 1])] for f, t in zip(fi, ti)]
    return lines


def plot_spectrogram_explanation(explanation: Explanation, specs: torch.Tensor, *, index: int = 0,
                                 target_index: int = 0, channel: int = 0, top_k: int = 3,
                                 sample_rate: Optional[float] = None, hop_length: Optional[int] = None,
                                 n_fft: Optional[int] = None, bin_freqs: Optional[Sequence[float]] = None,
                                 truth: Optional[torch.Tensor] = None, alpha: float = 0.55,
                                 title: Optional[str] = None, ax: Any = None) -> Any:
    """Spectrogram of clip ``index`` with its explanation overlaid.

    Args:
        explanation: from ``explain_spectrogram`` or ``explain_waveform(features="time_frequency")``.
        specs: the explained spectrograms (B, [C,] Fr, Tm), real or complex (shown in dB).
        index, target_index, channel: which clip, explained target and channel.
        top_k: number the k most positive segments (0: none).
        sample_rate, hop_length, n_fft, bin_freqs: axis units (default: ``explanation.meta["audio"]``).
        truth: optional bool (Fr, Tm) ground-truth region, outlined in white.
        alpha: opacity of the coefficient overlay. title: axes title. ax: draw into these axes.

    Returns:
        The matplotlib ``Figure``.
    """
    plt = require("matplotlib.pyplot", "viz", "plot_spectrogram_explanation")
    from matplotlib.collections import LineCollection

    meta = explanation.meta.get("audio", {})
    x = specs[index].detach().cpu()
    x = x[channel] if x.ndim == 3 else x
    x = 20 * torch.log10(x.abs() + 1e-6) if x.is_complex() else x.float()
    n_freq, n_time = x.shape
    times, freqs, t_label, f_label = _axes(meta, n_freq, n_time, sample_rate, hop_length, n_fft, bin_freqs)
    heat = explanation.heatmap(target_index)[index].detach().cpu().float()
    heat = heat[channel] if heat.ndim == 3 else heat
    labels = explanation.features[index].detach().cpu()
    labels = labels.reshape(labels.shape[-2:]) if labels.ndim == 3 else labels
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
    fig = ax.figure
    ax.pcolormesh(times, freqs, x.numpy(), shading="nearest", cmap="gray_r")
    lim = float(heat.abs().max()) or 1.0
    mesh = ax.pcolormesh(times, freqs, heat.numpy(), shading="nearest", cmap="RdBu_r",
                         vmin=-lim, vmax=lim, alpha=alpha)
    fig.colorbar(mesh, ax=ax, label="LIME coefficient")
    ax.add_collection(LineCollection(_borders(labels.numpy(), times, freqs), colors="k", linewidths=0.8))
    if truth is not None:
        ax.contour(times, freqs, truth.detach().cpu().float().numpy(), levels=[0.5], colors="w", linewidths=1)
    if top_k:
        idx, _ = explanation.top_features(top_k)
        for rank, f in enumerate(idx[index, target_index].tolist(), 1):
            fi, ti = np.nonzero(labels.numpy() == f)
            if len(fi):
                ax.text(times[ti].mean(), freqs[fi].mean(), str(rank), ha="center", va="center",
                        fontsize=11, weight="bold", color="k",
                        bbox=dict(boxstyle="circle,pad=0.2", fc="yellow", alpha=0.8))
    ax.set_xlabel(t_label)
    ax.set_ylabel(f_label)
    ax.set_title(title or f"clip {index}, target {int(explanation.target[index, target_index])}")
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


def _keep_map(explanation: Explanation, index: int, target_index: int, k: int) -> torch.Tensor:
    """Bool feature map (…fshape of clip ``index``): True on its top-k segments."""
    idx, _ = explanation.top_features(k)
    lab = explanation.features[index]
    return torch.isin(lab, idx[index, target_index].to(lab.device))


def save_top_segments_wav(explanation: Explanation, waves: torch.Tensor, out_dir: Union[str, Path], *,
                          k: int = 3, index: int = 0, target_index: int = 0,
                          sample_rate: Optional[int] = None, n_fft: Optional[int] = None,
                          hop_length: Optional[int] = None, win_length: Optional[int] = None,
                          prefix: str = "clip") -> dict[str, Path]:
    """Write the clip, its top-k segments alone and their complement as WAV files.

    Works for explanations over time segments of the samples (``explain_waveform``) and
    over time-frequency cells: the cells are applied to the STFT of ``waves`` (``n_fft`` /
    ``hop_length`` / ``win_length`` default to ``meta["audio"]``; a feature grid of another
    size, e.g. of a model spectrogram, is mapped onto the STFT grid proportionally) and the
    audio is resynthesised with ``torch.istft``.

    Args:
        explanation: the explanation of ``waves`` (or of spectrograms computed from them).
        waves: real (B, S) or (B, C, S) audio. out_dir: created if missing.
        k, index, target_index: top-k segments of clip ``index`` for that target.
        sample_rate: Hz (default ``meta["audio"]["sample_rate"]``).
        prefix: file name prefix.

    Returns:
        ``{"original": path, "top": path, "complement": path}``.
    """
    meta = explanation.meta.get("audio", {})
    sr = int(sample_rate or meta.get("sample_rate") or 0)
    if sr <= 0:
        raise ValueError("`sample_rate` is needed (the explanation does not record one)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wav = waves[index].detach().float()
    keep = _keep_map(explanation, index, target_index, k).to(wav.device)
    if keep.shape[-1] == wav.shape[-1] and meta.get("features") == "time":
        top = wav * keep.reshape(-1)
        rest = wav - top
    else:
        fft = int(n_fft or meta.get("n_fft") or 512)
        hop = int(hop_length or meta.get("hop_length") or fft // 4)
        win = int(win_length or meta.get("win_length") or fft)
        spec = stft(wav, fft, hop, win)  # ([C,] Fr, Tm)
        grid = keep.reshape(keep.shape[-2:]).float()[None, None]
        grid = torch.nn.functional.interpolate(grid, size=spec.shape[-2:], mode="nearest")[0, 0] > 0.5
        top = istft(spec * grid, fft, hop, win, wav.shape[-1])
        rest = istft(spec * ~grid, fft, hop, win, wav.shape[-1])
    names = dict(original=wav, top=top, complement=rest)
    return {name: write_wav(out / f"{prefix}{index}_{name if name != 'top' else f'top{k}'}.wav", a, sr)
            for name, a in names.items()}
