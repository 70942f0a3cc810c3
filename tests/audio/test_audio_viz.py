"""Audio pictures and WAV files."""

from __future__ import annotations

import warnings
import wave

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.stft import stft
from torchlime.audio.viz import AxisUnits, plot_spectrogram_explanation, save_top_segments_wav, write_wav


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
    exp = explain_waveform(loudness, waves, sample_rate=8000, segments="time_frequency", n_fft=256, n_samples=64)
    paths = save_top_segments_wav(exp, waves, tmp_path, k=2)
    assert all(p.exists() for p in paths.values())
    _, _, _, orig = read(paths["original"])
    _, _, _, top = read(paths["top"])
    _, _, _, rest = read(paths["complement"])
    assert (top.int() + rest.int() - orig.int()).abs().max() <= 3  # istft is linear
    fig = plot_spectrogram_explanation(exp, stft(waves, 256, 64, 256), k=2)
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
    ax = plot_spectrogram_explanation(plain, specs, units=AxisUnits(sample_rate=8000, hop_length=128)).axes[0]
    assert ax.get_xlabel() == "time (s)" and ax.get_xlim()[1] == pytest.approx(62 * 128 / 8000, abs=0.02)
    matplotlib.pyplot.close("all")


def test_save_top_segments_wav_refuses_what_it_would_write_wrongly(tmp_path):
    waves = torch.randn(2, 4000, generator=torch.Generator().manual_seed(0)) * 0.2
    exp = explain_waveform(loudness, waves, sample_rate=8000, n_samples=32)
    with pytest.raises(
        TypeError,
        match=r"`waves` must be float audio in \[-1, 1\], got dtype torch.int16; "
        r"for int16 PCM pass waves.float\(\) / 32768",
    ):
        save_top_segments_wav(exp, (waves * 32767).to(torch.int16), tmp_path)
    with pytest.raises(
        ValueError,
        match=r"`waves` must have 2 or 3 dimensions \(B, S\) or \(B, C, S\), "
        r"got 1 dimensions with shape \(4000,\)",
    ):
        save_top_segments_wav(exp, waves[0], tmp_path)
    with pytest.raises(
        ValueError,
        match=r"`waves` must have the 4000 samples the explanation's time segments "
        r"cover \(features='time'\), got 3000",
    ):
        save_top_segments_wav(exp, waves[:, :3000], tmp_path)
    with pytest.raises(ValueError, match=r"`waves` must hold the 2 clips of the explanation, got 1"):
        save_top_segments_wav(exp, waves[:1], tmp_path)
    with pytest.raises(ValueError, match=r"`index` must be an int in \[0, 2\) \(a clip of the explanation\), got 5"):
        save_top_segments_wav(exp, waves, tmp_path, index=5)
    with pytest.raises(ValueError, match=r"`target_index` must be an int in \[0, 1\) \(an explained target\), got 3"):
        save_top_segments_wav(exp, waves, tmp_path, target_index=3)
    with pytest.raises(TypeError, match=r"`index` must be an int in \[0, 2\) .*got float 1.0"):
        save_top_segments_wav(exp, waves, tmp_path, index=1.0)
    assert not list(tmp_path.iterdir())  # nothing written by a refused call


def test_save_top_segments_wav_warns_on_audio_far_outside_full_scale(tmp_path):
    waves = torch.randn(1, 4000, generator=torch.Generator().manual_seed(0)) * 0.2
    exp = explain_waveform(loudness, waves, sample_rate=8000, n_samples=32)
    with pytest.warns(
        UserWarning,
        match=r"`waves` clip 0 peaks at .*, far outside \[-1, 1\]: \d+\.\d+ % of its "
        r"samples are clipped .*divide by 32768",
    ):
        save_top_segments_wav(exp, waves * 32768, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        save_top_segments_wav(exp, (waves * 1.2).clamp(-1.2, 1.2), tmp_path)  # a little over: no warning


def test_plot_needs_spectrograms_and_a_time_frequency_explanation():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    waves = torch.randn(2, 4000) * 0.2
    tf = explain_waveform(loudness, waves, sample_rate=8000, segments="time_frequency", n_fft=256, n_samples=16)
    spec = stft(waves, 256, 64, 256)
    with pytest.raises(
        ValueError,
        match=r"`specs` must be the \(B, Fr, Tm\) or \(B, C, Fr, Tm\) spectrograms that "
        r"were explained .*torchlime.audio.stft.stft.*got shape \(2, 4000\)",
    ):
        plot_spectrogram_explanation(tf, waves)
    time = explain_waveform(loudness, waves, sample_rate=8000, n_samples=16)
    with pytest.raises(
        ValueError,
        match=r"`explanation` must be over time-frequency cells \(explain_spectrogram or "
        r"explain_waveform\(features='time_frequency'\)\), got one over time "
        r"segments \(feature map of clip 0: shape \(4000,\)\)",
    ):
        plot_spectrogram_explanation(time, spec)
    with pytest.raises(
        ValueError,
        match=r"`specs` clip 0 is a \(129, 32\) grid but the explanation's feature map "
        r"is \(129, 63\)",
    ):
        plot_spectrogram_explanation(tf, stft(waves, 256, 128, 256))
    with pytest.raises(ValueError, match=r"`index` must be an int in \[0, 2\) \(a clip of the explanation\), got 2"):
        plot_spectrogram_explanation(tf, spec, index=2)
    with pytest.raises(ValueError, match=r"`channel` must be an int in \[0, 1\) \(a channel of `specs`\), got 1"):
        plot_spectrogram_explanation(tf, spec, channel=1)
    matplotlib.pyplot.close("all")
