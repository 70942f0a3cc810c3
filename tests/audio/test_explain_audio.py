"""Audio explanations: segmentations, spectrogram and waveform explanations (fills: tests/test_baselines.py)."""

from __future__ import annotations

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio._explain import model_sample_rate
from torchlime.audio.segments import bin_frequencies, mel_bands, spectrogram_segments
from torchlime.audio.stft import ISTFTModel, crossfade_blend, smooth_edges, stft
from torchlime.engine.presets import PRESETS
from torchlime.stages.features import cell_ids, even_bands
from torchlime.stages.forward.chunking import PROBE
from torchlime.stages.perturb.blend import Chunk


class CellModel(torch.nn.Module):
    """Score = mean of one time-frequency cell of a (c, [C,] Fr, Tm) spectrogram, twice for 2 outputs."""

    def __init__(self, rows: slice, cols: slice) -> None:
        super().__init__()
        self.rows, self.cols = rows, cols

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        s = spec[..., self.rows, self.cols].flatten(1).mean(1)
        return torch.stack([-s, s], 1)


def test_grid_segments_shapes_and_ids():
    g = cell_ids((129, 63), (4, 5))
    assert g.shape == (129, 63) and g.dtype == torch.long
    assert g.unique().tolist() == list(range(20))
    assert g[0, 0] == 0 and g[0, -1] == 4 and g[-1, 0] == 15 and g[-1, -1] == 19  # band * 5 + slot
    sizes = torch.bincount(g.flatten())
    assert int(sizes.max() - sizes.min()) <= 32 + 13 + 1  # near-equal rectangles
    assert even_bands(10, 3).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    specs = torch.rand(2, 129, 63)
    for name, n in (("grid", 20), ("time", 5), ("freq", 4)):
        f = spectrogram_segments(specs, name)
        assert f.shape == (1, 129, 63) and f.unique().numel() == n
    assert (spectrogram_segments(specs, "time")[0, :, 7] == 0).all()  # a slot spans all bins
    assert spectrogram_segments(torch.rand(2, 3, 129, 63), "grid").shape == (1, 1, 129, 63)


def test_mel_bands_are_narrow_at_low_frequencies():
    freqs = bin_frequencies(129, 8000)
    assert freqs[1] == pytest.approx(31.25) and freqs[-1] == pytest.approx(4000)
    bands = mel_bands(freqs, 4)
    sizes = torch.bincount(bands).tolist()
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1] and sum(sizes) == 129
    assert (bands.diff() >= 0).all()
    f = spectrogram_segments(torch.rand(1, 129, 63), "mel", sample_rate=8000)
    assert f.unique().numel() == 20
    f2 = spectrogram_segments(torch.rand(1, 129, 63), "mel", bin_freqs=freqs)
    assert torch.equal(f, f2)


def test_explicit_callable_and_slic_segments():
    specs = torch.rand(2, 16, 12)
    user = torch.arange(16 * 12).view(16, 12) // 24
    assert spectrogram_segments(specs, user).shape == (1, 16, 12)
    assert spectrogram_segments(specs, user.expand(2, 16, 12)).shape == (2, 16, 12)
    assert spectrogram_segments(torch.rand(2, 3, 16, 12), user).shape == (1, 1, 16, 12)
    assert spectrogram_segments(specs, lambda s: user).shape == (1, 16, 12)
    sp = spectrogram_segments(torch.rand(2, 32, 24), "slic", n_segments=8)
    assert sp.shape == (2, 32, 24) and sp.dtype == torch.long and 2 <= int(sp[0].max()) + 1 <= 32


@pytest.mark.parametrize("fill", ["zero", "signal_mean", "noise", "shuffle", "blur"])
def test_spectrogram_explanation_recovers_planted_cell(fill, device):
    specs = torch.rand(3, 40, 30, device=device) + 0.5
    specs[:, 12:18, 8:11] += 2.0  # the evidence stands out from the rest
    model = CellModel(slice(12, 18), slice(8, 11))  # band 1 of 4 (rows 10-19), slot 1 of 5 (cols 6-11)
    exp = explain_spectrogram(model, specs, baseline=fill, target=1, n_samples=300, generator=0)
    assert exp.coef.shape == (3, 1, 20) and exp.coef.device.type == device.type
    assert exp.top_features(1)[0].flatten().tolist() == [6, 6, 6]
    assert fill in exp.run.baseline.lower() and exp.meta["audio"]["segments"] == "grid"
    again = explain_spectrogram(model, specs, baseline=fill, target=1, n_samples=300, generator=0)
    assert torch.equal(exp.coef, again.coef)


def test_slime_preset_and_four_dim_specs():
    assert PRESETS["slime"]["any"]["n_samples"] == 8192
    model = CellModel(slice(0, 4), slice(0, 3))
    exp = explain_spectrogram(model, torch.rand(1, 2, 16, 10), preset="slime", target=1)
    assert exp.run.n_samples == 8192 and exp.run.preset == "slime"
    assert "width=0.25" in exp.run.kernel and exp.top_features(1)[0].item() == 0
    small = explain_spectrogram(model, torch.rand(1, 16, 10), preset="slime", n_samples=64, target=1)
    assert small.run.n_samples == 64  # explicit keywords win


def test_istft_of_unmasked_stft_reproduces_the_audio(device):
    waves = torch.randn(2, 3000, device=device) * 0.3
    seen = []

    def model(x):
        seen.append(x)
        return x.pow(2).mean(-1, keepdim=True)

    spec = stft(waves, 256, 64, 256)
    out = ISTFTModel(model, 256, 64, 256, 3000, waves)(spec)
    assert out.shape == (2, 1) and torch.allclose(seen[-1], waves, atol=1e-5)
    seen.clear()
    exp = explain_waveform(
        model,
        waves,
        sample_rate=8000,
        segments="time_frequency",
        n_fft=256,
        masks=torch.ones(2, 16, 20, dtype=torch.bool),
        n_samples=16,
    )
    assert exp.features.shape == (2, 129, 47) and exp.coef.shape == (2, 1, 20)
    rows = torch.cat(seen)  # the model sees each of the B x N = 32 rows once, none more
    probes = 2 * PROBE if rows.is_cuda else 0  # a model's first call on CUDA: the chunk rule's probes first
    assert rows.shape == (32 + probes, 3000)
    rows = rows[probes:]
    assert torch.allclose(rows, waves[torch.tensor([0, 1] + [0] * 15 + [1] * 15)], atol=1e-5)


def test_crossfade_blend_ramps_and_keeps_all_ones():
    keep = torch.tensor([[0.0] * 10 + [1.0] * 10])
    ramp = smooth_edges(keep, 2)
    assert ramp[0, :8].eq(0).all() and ramp[0, 12:].eq(1).all()
    assert torch.allclose(ramp[0, 8:12], torch.tensor([0.2, 0.4, 0.6, 0.8]))
    x, base = torch.rand(1, 20), torch.zeros(1, 20)
    labels = (torch.arange(20) // 10).view(1, 20)
    masks = torch.tensor([[True, True], [False, True]])
    out = crossfade_blend(2)(x, base, labels, Chunk(masks, torch.tensor([0, 0]), torch.tensor([0, 1]), 0, 0))
    assert torch.allclose(out[0], x[0]) and torch.allclose(out[1], x[0] * ramp[0])


def test_mel_front_end_model_works_unchanged():
    torchaudio = pytest.importorskip("torchaudio")
    torch.manual_seed(0)
    front = torchaudio.transforms.MelSpectrogram(sample_rate=8000, n_fft=256, hop_length=128, n_mels=32)
    model = torch.nn.Sequential(front, torch.nn.Flatten(1), torch.nn.Linear(32 * 32, 3))
    assert model_sample_rate(model) == 8000
    waves = torch.randn(2, 4000) * 0.2
    for feats in ("time", "time_frequency"):
        exp = explain_waveform(
            model,
            waves,
            sample_rate=8000,
            segments=feats,
            n_fft=256,
            n_samples=64,
            baseline="noise",
            crossfade=0.005 if feats == "time" else 0.0,
        )
        assert exp.coef.shape == (2, 1, 10 if feats == "time" else 20) and torch.isfinite(exp.score).all()
    exp = explain_waveform(
        model, waves, sample_rate=8000, segments="time_frequency", n_fft=256, freq_scale="mel", n_samples=32
    )
    assert exp.meta["audio"]["freq_scale"] == "mel" and exp.coef.shape == (2, 1, 20)
    with pytest.raises(
        ValueError,
        match=r"`sample_rate` \(16000.0 Hz\) disagrees with the model's sample_rate "
        r"\(8000 Hz\)",
    ):
        explain_waveform(model, waves, sample_rate=16000, n_samples=16)


def test_waveform_time_segments_multichannel():
    waves = torch.rand(2, 2, 1000)
    model = lambda w: w[..., 300:400].mean((1, 2)).unsqueeze(1)  # noqa: E731
    exp = explain_waveform(model, waves, sample_rate=1000, time_segments=10, n_samples=200)
    assert exp.features.shape == (2, 1, 1000) and exp.top_features(1)[0].flatten().tolist() == [3, 3]


def test_a_preset_fills_the_baseline_the_caller_did_not_pass():
    model = CellModel(slice(0, 4), slice(0, 3))
    specs, waves = torch.rand(1, 16, 10), torch.randn(1, 2000) * 0.1
    wave_model = lambda x: x.pow(2).mean(-1, keepdim=True)  # noqa: E731
    assert PRESETS["lime"]["any"]["baseline"] == "mean"
    assert explain_spectrogram(model, specs, preset="lime", n_samples=16).run.baseline == "mean"
    for feats in ("time", "time_frequency"):
        exp = explain_waveform(
            wave_model, waves, sample_rate=8000, segments=feats, n_fft=256, preset="lime", n_samples=16
        )
        assert exp.run.baseline == "mean", feats
    # explicit keywords win; without a preset (or with one that has no fill) the fill stays silence
    assert explain_spectrogram(model, specs, preset="lime", baseline="zero", n_samples=16).run.baseline == "zero"
    assert explain_spectrogram(model, specs, n_samples=16).run.baseline == "zero"
    assert explain_spectrogram(model, specs, preset="slime", n_samples=16).run.baseline == "zero"
    assert explain_waveform(wave_model, waves, sample_rate=8000, n_samples=16).run.baseline == "zero"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_waves_on_cpu_get_a_float32_stft(dtype):
    # the CPU FFT has no half / bfloat16 kernels (NotImplementedError from torch.stft)
    waves = (torch.randn(2, 2000, generator=torch.Generator().manual_seed(0)) * 0.3).to(dtype)
    spec = stft(waves, 256, 64, 256)
    assert spec.dtype == torch.complex64
    torch.testing.assert_close(spec, stft(waves.float(), 256, 64, 256))
    seen = []

    def model(x):
        seen.append(x.dtype)
        return x.float().pow(2).mean(-1, keepdim=True)

    exp = explain_waveform(model, waves, sample_rate=8000, segments="time_frequency", n_fft=256, n_samples=16)
    assert exp.coef.shape == (2, 1, 20) and torch.isfinite(exp.coef).all() and set(seen) == {dtype}
