"""A tiny CNN trained on :mod:`torchlime.demo.image_data`, shipped with the package.

The committed weights (``torchlime/demo/weights/demo_cnn.pt``) come from
``examples/train_demo_model.py``; its metadata, including held-out accuracy and
the sha256 of the weights file, is in ``torchlime/demo/weights/demo_cnn.json``.

Example:
    >>> from torchlime.demo.image_data import make_images
    >>> model = load_demo_model()
    >>> images, labels, _ = make_images(4, seed=7)
    >>> model(images).shape
    torch.Size([4, 4])
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import torch
from torch import nn

WEIGHTS_FILE = "demo_cnn.pt"
METADATA_FILE = "demo_cnn.json"


def _block(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    """3x3 convolution (no bias), batch norm and ReLU; divides the size by ``stride``."""
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class DemoNet(nn.Module):
    """Small CNN classifying the shape of the evidence object in demo images.

    A stride-2 stem conv (16 channels, 64 -> 32 pixels), three conv blocks
    (24, 48, 64 channels) with 2x2 max pooling after the first two (down to
    8 x 8 cells with a 37-pixel receptive field), global max pooling ("is the
    shape anywhere?") and a linear layer. Every conv is 3x3 with batch norm and
    ReLU. About 42k parameters (about 170 kB in float32).

    Input: float (B, 3, 64, 64) in [0, 1] (any size >= 8 works); output: logits
    (B, 4) in the order of :data:`torchlime.demo.image_data.CLASS_NAMES`.
    """

    def __init__(self, n_classes: int = 4, widths: tuple[int, int, int, int] = (16, 24, 48, 64)) -> None:
        super().__init__()
        stem, w1, w2, w3 = widths
        self.features = nn.Sequential(
            _block(3, stem, stride=2),
            _block(stem, w1),
            nn.MaxPool2d(2),
            _block(w1, w2),
            nn.MaxPool2d(2),
            _block(w2, w3),
        )
        self.head = nn.Linear(w3, n_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Map images (B, 3, H, W) in [0, 1] to class logits (B, n_classes)."""
        maps = self.features(images - 0.5)  # (B, C, H/8, W/8)
        out: torch.Tensor = self.head(maps.amax(dim=(2, 3)))
        return out


def _data_file(name: str) -> Any:
    """A traversable for ``torchlime/demo/weights/<name>`` (works from a wheel or a checkout)."""
    return resources.files(__package__).joinpath("weights").joinpath(name)


def load_demo_model(device: str | torch.device = "cpu") -> DemoNet:
    """Load the committed, pre-trained :class:`DemoNet` in eval mode.

    Args:
        device: where to put the model.

    Returns:
        The model on ``device``, in eval mode, with gradients still enabled on
        its parameters (explainers run it under ``torch.no_grad`` themselves).
    """
    model = DemoNet()
    with resources.as_file(_data_file(WEIGHTS_FILE)) as path:
        state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval()


def demo_model_metadata() -> dict[str, Any]:
    """The metadata written next to the weights by ``examples/train_demo_model.py``."""
    described: dict[str, Any] = json.loads(_data_file(METADATA_FILE).read_text(encoding="utf-8"))
    return described
