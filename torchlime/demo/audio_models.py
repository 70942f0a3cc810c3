"""A small spectrogram CNN trained on ``torchlime.demo.audio_data`` clips, with committed weights.

``SpecNet`` classifies log-magnitude spectrograms (``audio_data.log_spectrogram``,
129 bins x 63 frames for a 1 s clip at 8 kHz) into "no_voice" / "voice";
``WaveformClassifier`` puts the spectrogram front end inside the module so it
takes raw audio. ``load_audio_model`` loads the weights shipped in
``torchlime/demo/weights/audio_cnn.pt`` (trained by ``examples/train_audio_model.py``)
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

import torch
from torch import nn

from torchlime.demo import audio_data

WEIGHTS = "audio_cnn.pt"
METADATA = "audio_cnn.json"


class SpecNet(nn.Module):
    """Three strided convolutions, global max pooling over time and frequency, a linear head.

    Args:
        n_classes: K outputs (logits).
        channels: output channels of the three convolutions.
        in_channels: C of the input spectrograms.

    Input: (B, Fr, Tm) or (B, C, Fr, Tm) non-negative spectrograms (any Fr, Tm >= 8).
    Output: (B, K) logits.
    """

    def __init__(self, n_classes: int = 2, channels: tuple[int, int, int] = (8, 16, 32), in_channels: int = 1) -> None:
        super().__init__()
        c1, c2, c3 = channels
        self.in_channels = in_channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 5, stride=2, padding=2),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(c2, c3, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(c3, n_classes)
        # input standardisation, set from the training data
        self.register_buffer("offset", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        """(B, [C,] Fr, Tm) -> (B, K) logits."""
        if spec.ndim == 3:
            spec = spec.unsqueeze(1)
        h = self.features((spec - self.get_buffer("offset")) * self.get_buffer("scale"))
        out: torch.Tensor = self.head(h.amax(dim=(2, 3)))
        return out


class WaveformClassifier(nn.Module):
    """Raw audio (B, S) or (B, 1, S) -> (B, K) logits: ``log_spectrogram`` then ``SpecNet``.

    The ``sample_rate`` attribute lets ``explain_waveform`` check the caller's rate.
    """

    def __init__(
        self,
        net: SpecNet,
        sample_rate: int = audio_data.SAMPLE_RATE,
        n_fft: int = audio_data.N_FFT,
        hop_length: int = audio_data.HOP_LENGTH,
    ) -> None:
        super().__init__()
        self.net = net
        self.sample_rate = sample_rate
        self.n_fft = n_fft
        self.hop_length = hop_length

    def forward(self, waves: torch.Tensor) -> torch.Tensor:
        """(B, [1,] S) float audio -> (B, K) logits."""
        if waves.ndim == 3:
            waves = waves.squeeze(1)
        out: torch.Tensor = self.net(audio_data.log_spectrogram(waves, self.n_fft, self.hop_length))
        return out


def _data_file(name: str) -> Path:
    return Path(str(resources.files(__package__) / "weights" / name))


def audio_model_info() -> dict[str, Any]:
    """The metadata written next to the weights (sample rate, STFT, accuracy, training setup)."""
    described: dict[str, Any] = json.loads(_data_file(METADATA).read_text())
    return described


def load_audio_model(
    device: Union[str, torch.device] = "cpu", *, waveform: bool = False, path: Optional[Union[str, Path]] = None
) -> nn.Module:
    """Load the committed audio CNN in eval mode.

    Args:
        device: where to put it.
        waveform: return a ``WaveformClassifier`` (raw audio in) instead of the ``SpecNet``
            (spectrograms from ``audio_data.log_spectrogram`` in).
        path: other weights written by ``examples/train_audio_model.py`` (default: the committed ones).

    Returns:
        The model, on ``device``, in eval mode, with ``requires_grad`` left on.

    Example:
        >>> model = load_audio_model()
        >>> clips = audio_data.make_clips(2, seed=5)
        >>> model(audio_data.log_spectrogram(clips.waves)).shape
        torch.Size([2, 2])
    """
    info = audio_model_info() if path is None else json.loads(Path(path).with_suffix(".json").read_text())
    net = SpecNet(n_classes=len(info["class_names"]), channels=tuple(info["channels"]))
    state = torch.load(path or _data_file(WEIGHTS), map_location="cpu", weights_only=True)
    net.load_state_dict(state)
    model: nn.Module = net
    if waveform:
        model = WaveformClassifier(net, info["sample_rate"], info["n_fft"], info["hop_length"])
    return model.to(device).eval()
