"""A small vision transformer trained on :mod:`torchlime.demo.image_data`, shipped with the package.

torchvision's ``VisionTransformer`` at 64x64 pixels with 16x16 patches (a 4 x 4 grid of patch tokens
and a class token), 3 layers of width 64: about 0.15 M parameters. It is the model the token-dropping
figures use (``explain_image(..., baseline="drop")``): the same planted-object images as the
embedded CNN, so both can be compared on one ground truth. The committed weights
(``torchlime/demo/weights/demo_vit.pt``) come from ``examples/train_demo_vit.py``; held-out accuracy,
the evidence checks and the sha256 of the weights file are in ``demo_vit.json`` beside them.
Needs torchvision (the ``[image]`` extra).
"""

from __future__ import annotations

import json
from typing import Any, cast

import torch
from torch import nn

from torchlime.demo.image_models import _data_file

VIT_WEIGHTS_FILE = "demo_vit.pt"
VIT_METADATA_FILE = "demo_vit.json"
#: torchvision ``VisionTransformer`` arguments of the demo ViT
VIT_CONFIG: dict[str, int] = dict(image_size=64, patch_size=16, num_layers=3, num_heads=4, hidden_dim=64, mlp_dim=128)


def demo_vit(n_classes: int = 4) -> nn.Module:
    """A randomly initialised demo ViT (``VIT_CONFIG``); images (B, 3, 64, 64) in [0, 1] -> logits (B, n_classes).

    Args:
        n_classes: outputs.

    Returns:
        The torchvision ``VisionTransformer``.
    """
    from torchvision.models.vision_transformer import VisionTransformer

    return cast(nn.Module, VisionTransformer(**VIT_CONFIG, num_classes=n_classes))


def load_demo_vit(device: str | torch.device = "cpu") -> nn.Module:
    """Load the committed, trained demo ViT in eval mode.

    Args:
        device: where to put the model.

    Returns:
        The model on ``device``, in eval mode.
    """
    model = demo_vit()
    with _open(VIT_WEIGHTS_FILE) as path:
        state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval()


def _open(name: str) -> Any:
    from importlib import resources

    return resources.as_file(_data_file(name))


def demo_vit_metadata() -> dict[str, Any]:
    """The metadata written next to the weights by ``examples/train_demo_vit.py``."""
    described: dict[str, Any] = json.loads(_data_file(VIT_METADATA_FILE).read_text(encoding="utf-8"))
    return described
