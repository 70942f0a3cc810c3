"""Audio pictures and WAV files."""
from __future__ import annotations

import wave

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.stft import stft
from torchlime.audio.viz import plot_spectrogram_explanation, save_top_segments_wav, write_wav


def loudness(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1).abs().mean(1, keepdim=True)


def read(path) -> tuple[int, int, int, torch.Tensor]:
    with wave.open(str(path), "rb") as f:
        data = torch.frombuffer(bytearray(f.readframes(f.getnframes())), dtype=torch.int16)
        return f.getframerate(), f.getnchannels(), f.getsampwidth(), data


def test_write_wav_16_bit(tmp_path):
    audio = torch.tensor([[0.0, 0.5, -1.0, 2.0], [0.1, 0.1, 0.1, 0.1]])
    rate, channels, width, data = read(write_wav(tmp_path / "a.wav", audio, 8000))
    assert (rate, channels, width) == (8000, 2, 2)
    assert data.view(4, 2)[:, 0].tolist() == [0, 16384, -32767, 32767]  # interleaved, clipped


def test_time_segments_wavs_split_the_clip(tmp_path):
    waves = torch.randn(2, 4000) * 0.2
    exp = explain_waveform(loudness, waves, sample_rate=8000, n_samples=64)
    paths = save_top_segments_wav(exp, waves, tmp_path, k=3, index=1)
    assert sorted(paths) == ["complement", "original", "top"]
    _, _, _, orig = read(paths["original"])
    _, _, _, top = read(paths["top"])
    _, _, _, rest = read(paths["complement"])
    assert len(orig) == 4000 and (top != 0).sum() <= 1200 + 5
    assert (top.int() + rest.int() - orig.int()).abs().max() <= 1


def test_time_frequency_wavs_and_plot(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    waves = torch.randn(1, 4000) * 0.2
    exp = explain_waveform(loudness, waves, sample_rate=8000, features="time_frequency", n_fft=256,
                           n_samples=64)
    paths = save_top_segments_wav(exp, waves, tmp_path, k=2)
    assert all(p.exists() for p in paths.values())
    _, _, _, orig = read(paths["original"])
    _, _, _, top = read(paths["top"])
    _, _, _, rest = read(paths["complement"])
    assert (top.int() + rest.int() - orig.int()).abs().max() <= 3  # istft is linear
    fig = plot_spectrogram_explanation(exp, stft(waves, 256, 64, 256), top_k=2)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time (s)" and ax.get_ylabel() == "frequency (Hz)"
    assert ax.get_ylim()[1] == pytest.approx(4000 + 15.625, rel=0.01)
    fig.savefig(tmp_path / "e.png")
    specs = torch.rand(1, 2, 129, 63)
    sexp = explain_spectrogram(loudness, specs, segments="mel", sample_rate=8000, hop_length=128, n_samples=32)
    fig = plot_spectrogram_explanation(sexp, specs, channel=1, truth=specs[0, 0] > 0.9)
    assert fig.axes[0].get_xlim()[1] == pytest.approx(62 * 128 / 8000, abs=0.02)
    plain = explain_spectrogram(loudness, specs, n_samples=32)
    assert plot_spectrogram_explanation(plain, specs).axes[0].get_xlabel() == "frame"
    matplotlib.pyplot.close("all")
