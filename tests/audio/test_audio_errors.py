"""Audio argument errors name the argument, what was expected and what came."""

from __future__ import annotations

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.segments import bin_frequencies, mel_bands, spectrogram_segments


def model(x: torch.Tensor) -> torch.Tensor:
    return x.flatten(1).mean(1, keepdim=True)


class RateModel(torch.nn.Module):
    sample_rate = 16000

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1).mean(1, keepdim=True)


def test_spectrogram_dimensions_dtype_and_finite():
    with pytest.raises(
        ValueError,
        match=r"`specs` must have 3 or 4 dimensions \(B, Fr, Tm\) or \(B, C, Fr, Tm\), "
        r"got 2 dimensions with shape \(16, 10\)",
    ):
        explain_spectrogram(model, torch.rand(16, 10))
    with pytest.raises(TypeError, match=r"`specs` must be a real floating tensor, got torch.int64"):
        explain_spectrogram(model, torch.ones(1, 16, 10, dtype=torch.long))
    bad = torch.rand(3, 16, 10)
    bad[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match=r"`specs` must be finite, got 1 NaN/inf values \(inputs \[1\]\)"):
        explain_spectrogram(model, bad)
    with pytest.raises(TypeError, match="`specs` must be a torch.Tensor"):
        explain_spectrogram(model, [[1.0]])


def test_more_segments_than_frames_or_bins():
    specs = torch.rand(1, 16, 10)
    with pytest.raises(ValueError, match=r"`time_segments` must be <= the number of frames of `specs` \(10\), got 11"):
        explain_spectrogram(model, specs, time_segments=11)
    with pytest.raises(
        ValueError,
        match=r"`freq_segments` must be <= the number of frequency bins of `specs` "
        r"\(16\), got 17",
    ):
        explain_spectrogram(model, specs, segments="freq", freq_segments=17)
    with pytest.raises(ValueError, match=r"`freq_segments` \(40\) is too many mel bands for 16 frequency bins"):
        mel_bands(bin_frequencies(16, 8000), 40)
    with pytest.raises(TypeError, match=r"`time_segments` must be an int >= 1, got float 2.5"):
        explain_spectrogram(model, specs, time_segments=2.5)


def test_segment_and_content_arguments():
    specs = torch.rand(2, 16, 10)
    with pytest.raises(
        ValueError,
        match=r"`segments` tensor must have shape \(16, 10\) or \(B or 1, 16, 10\) "
        r"for spectrograms of shape \(2, 16, 10\), got \(16, 9\)",
    ):
        explain_spectrogram(model, specs, segments=torch.zeros(16, 9, dtype=torch.long))
    with pytest.raises(TypeError, match=r"`segments` must have an integer dtype"):
        spectrogram_segments(specs, torch.zeros(16, 10))
    with pytest.raises(ValueError, match=r"`segments` must be one of \['grid', 'time', 'freq', 'mel', 'slic'\]"):
        explain_spectrogram(model, specs, segments="bands")
    with pytest.raises(ValueError, match=r"`segments='mel'` needs the bins' frequencies"):
        explain_spectrogram(model, specs, segments="mel")
    with pytest.raises(
        ValueError,
        match=r"`baseline` string must be one of \['zero', 'mean', 'blur', 'min', "
        r"'max', 'signal_mean', 'noise', 'shuffle'\], got 'pink'",
    ):
        explain_spectrogram(model, specs, baseline="pink")
    with pytest.raises(ValueError, match=r"`baseline` of shape \(3,\) does not broadcast"):
        explain_spectrogram(model, specs, baseline=torch.zeros(3))


def test_waveform_errors():
    waves = torch.randn(2, 1000)
    with pytest.raises(
        ValueError,
        match=r"`waves` must have 2 or 3 dimensions \(B, S\) or \(B, C, S\), "
        r"got 1 dimensions with shape \(1000,\)",
    ):
        explain_waveform(model, waves[0], sample_rate=8000)
    with pytest.raises(ValueError, match=r"`waves` has 1000 samples, too short for the STFT with n_fft=2048"):
        explain_waveform(model, waves, sample_rate=8000, segments="time_frequency", n_fft=2048)
    with pytest.raises(ValueError, match=r"`waves` has 1000 samples, too short for time_segments=1001"):
        explain_waveform(model, waves, sample_rate=8000, time_segments=1001)
    with pytest.raises(
        ValueError,
        match=r"`time_segments` must be <= the number of frames of the STFT of "
        r"`waves` \(16\), got 20",
    ):
        explain_waveform(model, waves, sample_rate=8000, segments="time_frequency", n_fft=256, time_segments=20)
    bad = waves.clone()
    bad[0, 5] = float("inf")
    with pytest.raises(ValueError, match=r"`waves` must be finite, got 1 NaN/inf values \(inputs \[0\]\)"):
        explain_waveform(model, bad, sample_rate=8000)
    with pytest.raises(
        ValueError,
        match=r"`sample_rate` \(8000.0 Hz\) disagrees with the model's sample_rate "
        r"\(16000 Hz\)",
    ):
        explain_waveform(RateModel(), waves, sample_rate=8000)
    with pytest.raises(ValueError, match=r"`sample_rate` \(8000 Hz\) disagrees"):
        explain_spectrogram(RateModel(), torch.rand(1, 16, 10), sample_rate=8000)
    with pytest.raises(ValueError, match=r"`sample_rate` must be finite and > 0, got -1.0"):
        explain_waveform(model, waves, sample_rate=-1)
    with pytest.raises(ValueError, match=r"`segments` must be one of \['time', 'time_frequency'\], got 'mel'"):
        explain_waveform(model, waves, sample_rate=8000, segments="mel")
    with pytest.raises(
        ValueError,
        match=r"`crossfade` \(0.01 s = 80 samples\) must be shorter than half a segment "
        r"\(100 samples\)",
    ):
        explain_waveform(model, waves, sample_rate=8000, crossfade=0.01)
    with pytest.raises(ValueError, match=r"`kernel` must measure distances on the masks"):
        explain_waveform(model, waves, sample_rate=8000, segments="time_frequency", n_fft=256, kernel="captum")
    with pytest.raises(TypeError, match=r"`waves` must be a real floating tensor, got torch.complex64"):
        explain_waveform(model, torch.zeros(1, 100, dtype=torch.complex64), sample_rate=8000)


@pytest.mark.parametrize(
    "kw,match",
    [
        (
            dict(n_fft=256, hop_length=512),
            r"`hop_length` must be <= win_length \(256\) for the STFT of "
            r"segments='time_frequency' .*got 512",
        ),
        (dict(n_fft=256, win_length=128, hop_length=200), r"`hop_length` must be <= win_length \(128\) .*got 200"),
        (
            dict(n_fft=256, hop_length=256),
            r"the STFT with n_fft=256, hop_length=256, win_length=256 cannot be "
            r"inverted .*pass a smaller `hop_length` \(e.g. 64 = win_length // 4\)",
        ),
        (
            dict(n_fft=64, win_length=12, hop_length=11),
            r"the STFT with n_fft=64, hop_length=11, win_length=12 cannot "
            r"be inverted",
        ),
    ],
)
def test_stft_settings_are_checked_up_front(kw, match):
    # these failed inside the batched forward pass (torch.istft), after the STFT and the sampling
    calls = []

    def counting(x):
        calls.append(x)
        return model(x)

    with pytest.raises(ValueError, match=match):
        explain_waveform(
            counting,
            torch.randn(2, 4000),
            sample_rate=8000,
            segments="time_frequency",
            time_segments=2,
            freq_segments=2,
            n_samples=8,
            **kw,
        )
    assert not calls


def test_a_presets_input_space_kernel_is_refused_for_stft_cells():
    # preset="captum" brings a kernel on the inputs: the explained inputs are complex STFTs, whose
    # imaginary part the kernel dropped with a ComplexWarning; refused as an explicit kernel is
    with pytest.raises(ValueError, match=r"`kernel` \(from preset='captum'\) must measure distances on the masks"):
        explain_waveform(
            model, torch.randn(2, 1000), sample_rate=8000, segments="time_frequency", n_fft=256, preset="captum"
        )
