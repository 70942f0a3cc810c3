"""The audio modalities: ``Spectrograms`` and ``Waveforms`` through ``Explainer`` equal the front doors bit for bit."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from torchlime.audio import Spectrograms, Waveforms, explain_spectrogram, explain_waveform
from torchlime.audio._spectrograms import SpectrogramInfo
from torchlime.audio._waveforms import WaveformInfo
from torchlime.audio.stft import crossfade_blend
from torchlime.engine import Explainer, Explanation, Info

from tests.helpers.doors import check_door_form


def spec_model(s: torch.Tensor) -> torch.Tensor:
    """Two scores of (c, [C,] Fr, Tm) spectrograms: the mean of two cells."""
    return torch.stack([s[..., 12:18, 8:11].flatten(1).mean(1), s[..., 0:5, 0:4].flatten(1).mean(1)], 1)


def wave_model(x: torch.Tensor) -> torch.Tensor:
    """Two scores of (c, [C,] S) audio: the energy of samples 1000-1500 and the mean."""
    return torch.stack([x[..., 1000:1500].pow(2).flatten(1).mean(1), x.flatten(1).mean(1)], 1)


SPECS = torch.rand(3, 40, 30, generator=torch.Generator().manual_seed(1)) + 0.5
WAVES = torch.randn(2, 3000, generator=torch.Generator().manual_seed(2)) * 0.3


def assert_same(a: Explanation, b: Explanation) -> None:
    for name in ("coef", "intercept", "score", "local_pred", "target", "features", "n_features"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.meta["audio"] == b.meta["audio"] and a.meta["baseline"] == b.meta["baseline"]


@pytest.mark.parametrize(
    "settings, config",
    [
        (dict(), dict()),
        (dict(segments="time", time_segments=6), dict(baseline="blur")),
        (dict(segments="mel", sample_rate=8000, n_fft=78, hop_length=32), dict(baseline="signal_mean")),
        (dict(segments="slic", n_segments=8), dict(preset="lime")),
        (dict(bin_freqs=torch.linspace(0, 4000, 40), segments="mel", fmin=100.0), dict(baseline="noise")),
    ],
)
def test_spectrograms_through_the_explainer_equal_the_door(settings, config):
    door = explain_spectrogram(spec_model, SPECS, **settings, **config, target=1, n_samples=128, generator=3)
    exp = Explainer(**config).explain(spec_model, SPECS, Spectrograms(**settings), target=1, n_samples=128, generator=3)
    assert_same(door, exp)


@pytest.mark.parametrize(
    "settings, config",
    [
        (dict(), dict()),
        (dict(crossfade=0.01, time_segments=8), dict(baseline="blur")),
        (dict(segments="time_frequency", n_fft=256), dict()),
        (dict(segments="time_frequency", n_fft=256, freq_scale="mel"), dict(baseline="noise")),
        (dict(segments="time_frequency", n_fft=256, hop_length=32, win_length=128), dict(preset="lime")),
    ],
)
@pytest.mark.parametrize("channels", [False, True])
def test_waveforms_through_the_explainer_equal_the_door(settings, config, channels):
    waves = torch.stack([WAVES, WAVES.flip(-1)], 1) if channels else WAVES
    door = explain_waveform(wave_model, waves, sample_rate=8000, **settings, **config, n_samples=64, generator=5)
    exp = Explainer(**config).explain(wave_model, waves, Waveforms(8000, **settings), n_samples=64, generator=5)
    assert_same(door, exp)


def test_the_typed_info_and_meta_audio():
    exp = explain_spectrogram(
        spec_model, SPECS, segments="mel", sample_rate=8000, n_fft=78, hop_length=32, n_samples=64
    )
    assert isinstance(exp.info, SpectrogramInfo) and isinstance(exp.info, Info) and exp.info.key == "audio"
    assert exp.info.segments == "mel" and exp.info.n_fft == 78 and exp.info.hop_length == 32
    assert exp.meta["audio"] == dict(
        input="spectrogram",
        segments="mel",
        time_segments=5,
        freq_segments=4,
        sample_rate=8000.0,
        hop_length=32,
        n_fft=78,
        fmin=0.0,
        fmax=None,
        bin_freqs=None,
    )
    explicit = explain_spectrogram(
        spec_model,
        SPECS,
        segments=torch.zeros(40, 30, dtype=torch.long).index_fill(1, torch.arange(15), 1),
        bin_freqs=[0.0, 1.5] * 20,
        n_samples=8,
    )
    assert explicit.meta["audio"]["segments"] == "explicit" and explicit.meta["audio"]["bin_freqs"] == [0.0, 1.5] * 20
    assert explicit.info.bin_freqs == (0.0, 1.5) * 20

    time = explain_waveform(wave_model, WAVES, sample_rate=8000, crossfade=0.01, n_samples=16)
    assert isinstance(time.info, WaveformInfo) and time.info.segments == "time" and time.info.n_fft is None
    assert time.meta["audio"] == dict(
        input="waveform", features="time", sample_rate=8000.0, length=3000, time_segments=10, crossfade=0.01
    )
    tf = explain_waveform(wave_model, WAVES, sample_rate=8000, segments="time_frequency", n_fft=256, n_samples=64)
    assert tf.info.segments == "time_frequency" and tf.info.crossfade is None
    assert tf.meta["audio"] == dict(
        input="waveform",
        features="time_frequency",
        sample_rate=8000.0,
        length=3000,
        time_segments=5,
        freq_segments=4,
        n_fft=256,
        hop_length=64,
        win_length=256,
        freq_scale="linear",
    )
    one = tf[1]  # one clip keeps the record
    assert one.info == tf.info and one.meta["audio"] == tf.meta["audio"]


def test_unknown_and_owned_keywords_are_type_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_sample'"):
        explain_waveform(wave_model, WAVES, sample_rate=8000, n_sample=16)
    with pytest.raises(TypeError, match="unexpected keyword argument 'segmentation'"):
        explain_spectrogram(spec_model, SPECS, segmentation="grid")
    with pytest.raises(TypeError, match="unexpected keyword argument 'perturb_fn'"):  # Waveforms owns it
        explain_waveform(wave_model, WAVES, sample_rate=8000, perturb_fn=crossfade_blend(4))


def test_a_crossfade_and_a_perturb_fn_are_refused_together():
    with pytest.raises(ValueError, match=r"`perturb_fn` must be None with a `crossfade`"):
        Explainer().explain(wave_model, WAVES, Waveforms(8000, crossfade=0.01), perturb_fn=crossfade_blend(4))


@pytest.mark.parametrize("door, modality", [(explain_spectrogram, Spectrograms), (explain_waveform, Waveforms)])
def test_the_doors_offer_the_modality_the_named_call_fields_and_the_options(door, modality):
    names = list(inspect.signature(door).parameters)[2:]
    own = [f.name for f in dataclasses.fields(modality)]
    assert names == [*own, "target", "n_samples", "generator", "options"]
    check_door_form(door, modality, WAVES, **({"sample_rate": 8000} if door is explain_waveform else {}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        modality(sample_rate=8000).sample_rate = 16000  # type: ignore[misc]
