"""Synthetic audio clips with a known time-frequency ground truth.

Every clip is ``duration`` seconds of mono audio at ``sample_rate`` Hz holding

* background noise: white Gaussian noise of a random level;
* one to three *distractors*: steady pure tones or linear chirps, each in its
  own random time window with raised-cosine fades; they carry no information
  about the label;
* for the positive class (label 1) only, the *evidence*: a voice-like
  harmonic tone (a fundamental between 140 and 350 Hz with 3-6 harmonics of
  decaying amplitude and a 4-7 Hz vibrato) in a random window of 0.25-0.45 s.

Because the evidence is rendered separately, its exact region on the model's
spectrogram is known: ``evidence[b]`` is True on the bins where the evidence
alone reaches ``EVIDENCE_DB`` dB below its own peak. Negative clips have an
all-False mask. Generation is vectorised over clips, draws every random number
from its own ``torch.Generator`` and is fully determined by ``(n, seed)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

SAMPLE_RATE = 8000
"""Sample rate (Hz) of the clips and of the committed audio model."""
DURATION = 1.0
"""Clip length in seconds."""
N_FFT = 256
"""STFT size of the model's spectrogram (129 frequency bins of 31.25 Hz)."""
HOP_LENGTH = 128
"""STFT hop of the model's spectrogram (63 frames of 16 ms for a 1 s clip)."""
CLASS_NAMES: tuple[str, ...] = ("no_voice", "voice")
EVIDENCE_DB = 20.0
"""A bin belongs to the evidence when the evidence alone is at most this many dB below its peak."""

_F0 = (140.0, 350.0)
_HARMONICS = (3, 6)
_VIBRATO_RATE = (4.0, 7.0)
_VIBRATO_DEPTH = (0.01, 0.03)  # fraction of f0
_VOICE_LEN = (0.25, 0.45)
_VOICE_AMP = (0.08, 0.25)
_N_DISTRACTORS = 3
_DISTRACTOR_F = (150.0, 3600.0)
_DISTRACTOR_LEN = (0.15, 0.6)
_DISTRACTOR_AMP = (0.04, 0.2)
_NOISE = (0.005, 0.03)
_CHUNK = 64  # clips rendered at once (bounds temporaries)
_FADE = 0.03  # seconds of raised-cosine fade at both ends of every event


@dataclass(frozen=True)
class AudioClips:
    """A batch of synthetic clips.

    Attributes:
        waves: float32 (n, S) audio in about [-1, 1], S = sample_rate * duration.
        labels: long (n,), 1 when the clip holds the voice-like evidence.
        evidence: bool (n, Fr, Tm), the evidence's bins on the model spectrogram
            (Fr = N_FFT // 2 + 1, Tm = S // HOP_LENGTH + 1); all False for label 0.
        window: float32 (n, 2), start and end of the evidence in seconds (0 for label 0).
        f0: float32 (n,), the evidence's mean fundamental in Hz (0 for label 0).
        evidence_wave: float32 (n, S), the evidence alone.
    """

    waves: torch.Tensor
    labels: torch.Tensor
    evidence: torch.Tensor
    window: torch.Tensor
    f0: torch.Tensor
    evidence_wave: torch.Tensor


def log_spectrogram(waves: torch.Tensor, n_fft: int = N_FFT, hop_length: int = HOP_LENGTH) -> torch.Tensor:
    """The model's input: ``log1p(|STFT|)`` with a Hann window (0 means silence).

    Args:
        waves: float (..., S).
        n_fft: FFT size (and Hann window length).
        hop_length: samples between frames.

    Returns:
        float (..., n_fft // 2 + 1, S // hop_length + 1), non-negative.
    """
    return torch.log1p(stft_magnitude(waves, n_fft, hop_length))


def stft_magnitude(waves: torch.Tensor, n_fft: int = N_FFT, hop_length: int = HOP_LENGTH) -> torch.Tensor:
    """``|STFT|`` (..., Fr, Tm) of float waves (..., S), Hann window, centred frames."""
    lead = waves.shape[:-1]
    window = torch.hann_window(n_fft, device=waves.device, dtype=waves.dtype)
    spec = torch.stft(
        waves.reshape(-1, waves.shape[-1]), n_fft, hop_length, window=window, center=True, return_complex=True
    )
    return spec.abs().reshape(*lead, *spec.shape[-2:])


def make_clips(
    n: int, seed: int, *, sample_rate: int = SAMPLE_RATE, duration: float = DURATION, positive_fraction: float = 0.5
) -> AudioClips:
    """Synthesise ``n`` clips (see the module docstring).

    Args:
        n: number of clips (>= 1).
        seed: seed of the private generator; equal arguments give equal clips.
        sample_rate: Hz (>= 8000 so that the harmonics fit below Nyquist).
        duration: seconds (>= 0.6).
        positive_fraction: probability that a clip holds the evidence.

    Returns:
        ``AudioClips`` on the CPU.

    Example:
        >>> clips = make_clips(4, seed=0)
        >>> clips.waves.shape, clips.evidence.shape
        (torch.Size([4, 8000]), torch.Size([4, 129, 63]))
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be an int >= 1, got {n!r}")
    if sample_rate < 8000:
        raise ValueError(f"`sample_rate` must be >= 8000 Hz, got {sample_rate}")
    if duration < 0.6:
        raise ValueError(f"`duration` must be >= 0.6 s, got {duration}")
    gen = torch.Generator().manual_seed(seed)
    s = int(round(sample_rate * duration))
    t = torch.arange(s, dtype=torch.float32) / sample_rate  # (S,)
    p = _draw(n, s, duration, positive_fraction, gen)
    wave_parts, voice = zip(
        *(_render({k: v[i : i + _CHUNK] for k, v in p.items()}, t, sample_rate) for i in range(0, n, _CHUNK))
    )
    waves, evidence_wave = torch.cat(wave_parts), torch.cat(voice)
    labels = p["labels"]
    mag = stft_magnitude(evidence_wave)
    peak = mag.flatten(1).amax(1).view(-1, 1, 1)
    evidence = (mag > peak * 10 ** (-EVIDENCE_DB / 20)) & (labels.view(-1, 1, 1) == 1)
    pos = labels.bool()
    window = torch.stack([p["v_on"], p["v_on"] + p["v_len"]], 1) * pos.view(-1, 1)
    return AudioClips(waves, labels, evidence, window, p["f0"] * pos, evidence_wave)


def _draw(n: int, s: int, duration: float, positive_fraction: float, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Every random parameter of n clips (leading dim n), drawn in a fixed order from ``gen``."""

    def uni(shape: tuple[int, ...], lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(shape, generator=gen)

    p: dict[str, torch.Tensor] = {}
    p["labels"] = (torch.rand(n, generator=gen) < positive_fraction).long()
    p["noise"] = uni((n, 1), *_NOISE) * torch.randn(n, s, generator=gen)
    # Distractors: slot k is used when k < count; tones have f_end == f_start.
    shape = (n, _N_DISTRACTORS)
    count = torch.randint(1, _N_DISTRACTORS + 1, (n, 1), generator=gen)
    p["f_start"], f_end = uni(shape, *_DISTRACTOR_F), uni(shape, *_DISTRACTOR_F)
    p["f_end"] = torch.where(torch.rand(shape, generator=gen) < 0.5, p["f_start"], f_end)
    p["d_len"] = uni(shape, *_DISTRACTOR_LEN)
    p["d_on"] = uni(shape, 0.0, 1.0) * (duration - p["d_len"])
    p["d_amp"] = uni(shape, *_DISTRACTOR_AMP) * (torch.arange(_N_DISTRACTORS).view(1, -1) < count)
    p["d_phase"] = uni(shape, 0.0, 2 * math.pi)
    # Evidence: harmonic stack with vibrato (amplitude 0 for negative clips).
    p["f0"] = uni((n,), *_F0)
    p["n_harm"] = torch.randint(_HARMONICS[0], _HARMONICS[1] + 1, (n, 1), generator=gen)
    p["v_len"] = uni((n,), *_VOICE_LEN)
    p["v_on"] = uni((n,), 0.05, 1.0) * (duration - 0.05 - p["v_len"])
    p["v_rate"], p["v_depth"] = uni((n, 1), *_VIBRATO_RATE), uni((n, 1), *_VIBRATO_DEPTH)
    p["v_amp"] = uni((n, 1), *_VOICE_AMP) * p["labels"].view(-1, 1)
    p["h_phase"] = uni((n, _HARMONICS[1], 1), 0.0, 2 * math.pi)
    return p


def _render(p: dict[str, torch.Tensor], t: torch.Tensor, sample_rate: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Render the clips of parameters ``p`` at times t (S,): ``(waves, evidence)``, each (n, S)."""
    # time since onset, clamped to the event: the phase of a linear chirp in closed form
    d_on, d_len, f_start = p["d_on"], p["d_len"], p["f_start"]
    x = (t.view(1, 1, -1) - d_on.unsqueeze(-1)).clamp_min(0).minimum(d_len.unsqueeze(-1))  # (n, D, S)
    sweep = ((p["f_end"] - f_start) / (2 * d_len)).unsqueeze(-1)
    phase = p["d_phase"].unsqueeze(-1) + 2 * math.pi * x * (f_start.unsqueeze(-1) + sweep * x)
    distract = (p["d_amp"].unsqueeze(-1) * _envelope(t, d_on, d_len) * torch.sin(phase)).sum(1)
    # phase of f0 (1 + depth sin(2 pi rate t)), integrated in closed form
    f0 = p["f0"].view(-1, 1)
    w = 2 * math.pi * p["v_rate"]
    base = 2 * math.pi * f0 * (t.view(1, -1) + p["v_depth"] / w * (1 - torch.cos(w * t.view(1, -1))))
    h = torch.arange(1, _HARMONICS[1] + 1, dtype=torch.float32).view(1, -1)  # (1, H)
    h_amp = (h <= p["n_harm"]).float() / h * (f0 * h < 0.45 * sample_rate).float()  # (n, H)
    voice = (h_amp.unsqueeze(-1) * torch.sin(h.unsqueeze(-1) * base.unsqueeze(1) + p["h_phase"])).sum(1)
    env = _envelope(t, p["v_on"].view(-1, 1), p["v_len"].view(-1, 1)).squeeze(1)
    voice = p["v_amp"] * env * voice
    return p["noise"] + distract + voice, voice


def _envelope(t: torch.Tensor, onset: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """Raised-cosine gated window: (n, D, S) for onsets/lengths (n, D) and times t (S,)."""
    x = t.view(1, 1, -1) - onset.unsqueeze(-1)
    rise = (x / _FADE).clamp(0, 1)
    fall = ((length.unsqueeze(-1) - x) / _FADE).clamp(0, 1)
    ramp = torch.minimum(rise, fall)
    return 0.5 - 0.5 * torch.cos(math.pi * ramp)
