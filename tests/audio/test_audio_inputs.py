"""Everyday audio inputs at the audio doors: refused before any model call, with the fix, and a
warning when a spectrogram's bin count is not the ``n_fft`` it is labelled with."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.segments import mel_frequencies

pytestmark = pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")

CLIP = torch.randn(2, 1000, generator=torch.Generator().manual_seed(0)) * 0.3
SPEC = torch.rand(2, 40, 20, generator=torch.Generator().manual_seed(1))  # 40 mel bins, 20 frames


class Counting:
    """A model that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x.flatten(1).abs().mean(1, keepdim=True)


@pytest.mark.parametrize(
    "waves,error,match",
    [
        (
            (CLIP * 32767).to(torch.int16),
            TypeError,
            r"`waves` must be a real floating tensor, got torch.int16; convert with waves.float\(\) / 32768",
        ),
        (CLIP.long(), TypeError, r"`waves` must be a real floating tensor, got torch.int64; convert with waves.float"),
        (
            CLIP[0],
            ValueError,
            r"`waves` must have 2 or 3 dimensions \(B, S\) or \(B, C, S\), got 1 dimensions with shape \(1000,\); "
            r"for one clip, add the batch dimension: waves.unsqueeze\(0\)",
        ),
        (
            torch.stack((CLIP, CLIP), -1),
            ValueError,
            r"`waves` must be \(B, S\) or \(B, C, S\) with samples on the last axis, got shape \(2, 1000, 2\), "
            r"whose last axis looks like channels .*pass waves.transpose\(1, 2\)",
        ),
        (CLIP.T, ValueError, r"got shape \(1000, 2\), whose last axis looks like channels .*waves.T.unsqueeze\(0\)"),
    ],
    ids=["int16", "int64", "one_clip", "channels_last", "one_clip_channels_last"],
)
@pytest.mark.parametrize("segments", ["time", "time_frequency"])
def test_bad_waves_are_refused_before_any_model_call(waves, error, match, segments):
    model, before = Counting(), waves.clone()
    with pytest.raises(error, match=match):
        explain_waveform(model, waves, sample_rate=8000, segments=segments, n_fft=256, n_samples=16)
    assert model.calls == 0 and torch.equal(waves, before)


@pytest.mark.parametrize(
    "specs,error,match",
    [
        (SPEC.long(), TypeError, r"`specs` must be a real floating tensor, got torch.int64; convert with specs.float"),
        (
            SPEC.to(torch.complex64),
            TypeError,
            r"`specs` must be a real floating tensor, got torch.complex64; pass the magnitude specs.abs\(\)",
        ),
        (SPEC[0], ValueError, r"got 2 dimensions with shape \(40, 20\); .*specs.unsqueeze\(0\)"),
    ],
    ids=["int64", "complex", "one_clip"],
)
def test_bad_specs_are_refused_before_any_model_call(specs, error, match):
    model, before = Counting(), specs.clone()
    with pytest.raises(error, match=match):
        explain_spectrogram(model, specs, n_samples=16)
    assert model.calls == 0 and torch.equal(specs, before)


@pytest.mark.parametrize("n_fft,error,match", [(1, ValueError, r"`n_fft` must be >= 2"), (2.5, TypeError, r"`n_fft`")])
def test_spectrogram_n_fft_is_checked(n_fft, error, match):
    model = Counting()
    with pytest.raises(error, match=match):
        explain_spectrogram(model, SPEC, n_fft=n_fft, n_samples=16)
    with pytest.raises(ValueError, match=r"`hop_length` must be >= 1, got 0"):
        explain_spectrogram(model, SPEC, hop_length=0, n_samples=16)
    assert model.calls == 0


MISMATCH = (
    r"`n_fft`=512 implies a linear STFT of n_fft // 2 \+ 1 = 257 frequency bins, but `specs` has 40 bins .*"
    r"bin_freqs=torchlime.audio.segments.mel_frequencies\(40, sample_rate\)"
)


def test_mel_spectrogram_with_n_fft_warns_at_explain_time():
    with pytest.warns(UserWarning, match=MISMATCH) as record:
        exp = explain_spectrogram(Counting(), SPEC, sample_rate=16000, n_fft=512, n_samples=16)
    assert [w.filename for w in record if "linear STFT" in str(w.message)] == [__file__]  # the caller's line
    assert exp.coef.shape == (2, 1, 20)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "`n_fft`")  # no warning: a linear STFT, or bins labelled
        explain_spectrogram(Counting(), torch.rand(2, 257, 20), sample_rate=16000, n_fft=512, n_samples=16)
        freqs = mel_frequencies(40, 16000)
        explain_spectrogram(Counting(), SPEC, sample_rate=16000, n_fft=512, bin_freqs=freqs, n_samples=16)


def test_mel_spectrogram_with_n_fft_warns_in_the_plot(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from torchlime.audio.viz import AxisUnits, plot_spectrogram_explanation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain_spectrogram(Counting(), SPEC, sample_rate=16000, n_fft=512, n_samples=16)
    with pytest.warns(UserWarning, match=MISMATCH):  # the n_fft recorded in meta["audio"]
        plot_spectrogram_explanation(exp, SPEC)
    plain = explain_spectrogram(Counting(), SPEC, sample_rate=16000, n_samples=16)
    with pytest.warns(UserWarning, match=MISMATCH):  # or passed to the plot
        plot_spectrogram_explanation(plain, SPEC, units=AxisUnits(n_fft=512))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "`n_fft`")
        fig = plot_spectrogram_explanation(plain, SPEC, units=AxisUnits(bin_freqs=mel_frequencies(40, 16000).tolist()))
    lo, hi = fig.axes[0].get_ylim()
    assert hi < 8000 * 1.05 and fig.axes[0].get_ylabel() == "frequency (Hz)"


def test_mel_frequencies_are_torchaudios_filter_centres():
    torchaudio = pytest.importorskip("torchaudio")
    fb = torchaudio.functional.melscale_fbanks(257, 0.0, 8000.0, 40, 16000)  # (freqs, mels)
    peaks = torch.linspace(0, 8000, 257)[fb.argmax(0)]
    assert torch.allclose(mel_frequencies(40, 16000), peaks, atol=8000 / 256)
    assert mel_frequencies(40, 16000).diff().gt(0).all()
