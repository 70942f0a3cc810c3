"""The synthetic clips and the committed audio CNN."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.demo import audio_data
from torchlime.demo.audio_models import SpecNet, WaveformClassifier, audio_model_info, load_audio_model

DATA = Path(__file__).resolve().parents[2] / "torchlime" / "demo" / "weights"


def test_clips_are_deterministic_with_known_evidence():
    a, b = audio_data.make_clips(12, seed=5), audio_data.make_clips(12, seed=5)
    assert torch.equal(a.waves, b.waves) and torch.equal(a.evidence, b.evidence)
    assert not torch.equal(a.waves, audio_data.make_clips(12, seed=6).waves)
    assert a.waves.shape == (12, 8000) and a.evidence.shape == (12, 129, 63) and a.evidence.dtype == torch.bool
    pos = a.labels == 1
    assert a.evidence[~pos].sum() == 0 and (a.evidence[pos].flatten(1).sum(1) > 20).all()
    assert (a.window[pos, 1] > a.window[pos, 0]).all() and (a.f0[pos] >= 140).all()
    # the evidence lies inside its time window: frames of the mask are within the window (+ one frame)
    frames = a.evidence[pos].any(1).float()  # (p, Tm)
    t = torch.arange(63) * audio_data.HOP_LENGTH / audio_data.SAMPLE_RATE
    first = (frames * t + (1 - frames) * 9).amin(1)
    assert (first >= a.window[pos, 0] - 0.02).all()
    with pytest.raises(ValueError, match=r"`n` must be an int >= 1, got 0"):
        audio_data.make_clips(0, seed=0)


def test_committed_weights_load_and_are_accurate_on_fresh_clips():
    info = audio_model_info()
    weights = DATA / "audio_cnn.pt"
    assert weights.stat().st_size < 1_000_000
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == info["sha256"]
    assert info["heldout_accuracy"] >= 0.95 and info["sample_rate"] == audio_data.SAMPLE_RATE
    model = load_audio_model()
    assert isinstance(model, SpecNet) and not model.training
    clips = audio_data.make_clips(200, seed=777)  # neither the training (1) nor the held-out (2) seed
    with torch.inference_mode():
        pred = model(audio_data.log_spectrogram(clips.waves)).argmax(1)
    assert float((pred == clips.labels).float().mean()) >= 0.95
    wave_model = load_audio_model(waveform=True)
    assert isinstance(wave_model, WaveformClassifier) and wave_model.sample_rate == 8000
    with torch.inference_mode():
        assert torch.equal(wave_model(clips.waves[:8]).argmax(1), pred[:8])


def test_explanations_of_the_audio_model_point_at_the_voice():
    model = load_audio_model()
    clips = audio_data.make_clips(10, seed=31)
    pos = (clips.labels == 1).nonzero().flatten()[:3]
    specs = audio_data.log_spectrogram(clips.waves[pos])
    exp = explain_spectrogram(model, specs, target=1, n_samples=256, generator=0)
    idx, _ = exp.top_features(3)
    top = (exp.features.unsqueeze(1) == idx[:, 0].view(-1, 3, 1, 1)).any(1)  # (p, Fr, Tm)
    ev = clips.evidence[pos]
    coverage = (top & ev).flatten(1).sum(1) / ev.flatten(1).sum(1)
    assert float(coverage.mean()) > 0.5  # 3 of 20 cells, chance ~0.15
    wexp = explain_waveform(
        load_audio_model(waveform=True),
        clips.waves[pos[:2]],
        sample_rate=8000,
        segments="time_frequency",
        n_fft=256,
        hop_length=128,
        target=1,
        n_samples=48,
    )
    assert wexp.coef.shape == (2, 1, 20) and torch.isfinite(wexp.coef).all()


def test_cuda_model(cuda):
    model = load_audio_model(cuda)
    clips = audio_data.make_clips(8, seed=3)
    specs = audio_data.log_spectrogram(clips.waves).to(cuda)
    exp = explain_spectrogram(model, specs, n_samples=256, baseline="shuffle")
    assert exp.coef.is_cuda and torch.isfinite(exp.coef).all()
