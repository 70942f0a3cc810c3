"""Choosing and building the head for a modality, and the model's output columns.

The head follows the inputs: token ids (an integer tensor) get a ``TokenHead``, table rows (B, D) an
``MLPHead``, images and spectrograms (B, [C,] H, W) a ``ConvHead``; a waveform's features lie on its
STFT, not on the input, so waveforms are refused. Each built-in head is made under a seeded RNG (the
global one is left as it was) and calibrated with the training inputs' statistics.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from torchlime._util.checks import describe
from torchlime.amortized.heads import ConvHead, MLPHead, TokenHead
from torchlime.engine.explainer import ModalitySpec
from torchlime.stages.forward.model import eval_mode, select_output
from torchlime.typing import Model, OutputSelector


def n_outputs(model: Model, x: torch.Tensor, output: OutputSelector) -> int:
    """K, the model's output columns, from one input (B = 1) of ``x``."""
    return int(scores(model, x[:1], output).shape[-1])


def scores(model: Model, x: torch.Tensor, output: OutputSelector) -> torch.Tensor:
    """The model's (B, K) scores of ``x`` (eval mode, no autograd; (B,) outputs become (B, 1))."""
    with torch.inference_mode(), eval_mode(model):
        out = select_output(model(x), output, x.shape[0])
    return out.reshape(x.shape[0], -1)


def head_kind(modality: ModalitySpec, x: torch.Tensor) -> str:
    """The head for inputs ``x`` of this modality: "token", "mlp" or "conv".

    Raises:
        ValueError: waveforms (their features lie on the STFT), or inputs of no kind a head takes.
    """
    check_modality(modality)
    if not x.dtype.is_floating_point:
        return "token"
    if x.dim() == 2:
        return "mlp"
    if x.dim() in (3, 4):
        return "conv"
    raise ValueError(
        "`inputs` must be token ids (B, L), table rows (B, D), spectrograms (B, Fr, Tm) or images (B, C, H, W) "
        f"for a built-in head, got shape {tuple(x.shape)} of {x.dtype} (pass head= your own nn.Module)"
    )


def check_modality(modality: ModalitySpec) -> None:
    """Raise for a modality whose features do not lie on its inputs (waveforms: on their STFT).

    Raises:
        ValueError: ``Waveforms``.
    """
    if type(modality).__name__ == "Waveforms":
        raise ValueError(
            "`modality` must lay its features on the inputs; Waveforms lays them on the STFT: explain "
            "spectrograms with torchlime.Spectrograms(...) to amortize audio explanations"
        )


def positions(kind: str, features: torch.Tensor, input_shape: tuple[int, ...]) -> torch.Tensor:
    """The feature id of every position the head pools: (H*W,) for images, (D,) or (L,) otherwise.

    Raises:
        ValueError: an image map whose channels differ (a conv head pools pixels).
    """
    full = features.expand(1, *input_shape)[0]
    if kind == "conv" and full.dim() == 3:
        if not bool((full == full[:1]).all()):
            raise ValueError("`modality` must give every channel of a pixel the same feature for a conv head")
        full = full[0]
    return full.reshape(-1)


def build_head(
    kind: str, x: torch.Tensor, features: torch.Tensor, k: int, out_scale: torch.Tensor, seed: int
) -> nn.Module:
    """A built-in head for inputs ``x`` (n, ...), calibrated with their statistics and the labels' scale.

    Args:
        kind: "token", "mlp" or "conv".
        x: (n, *input_shape) training inputs.
        features: (P,) the feature id of every pooled position (``positions``).
        k: K.
        out_scale: 0-d, the labels' root mean square.
        seed: the initial weights' seed.

    Returns:
        The head on ``x``'s device.
    """
    f = int(features.max()) + 1
    devices = [x.device] if x.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        head: nn.Module
        if kind == "token":
            head = TokenHead(int(x.max()) + 1, x.shape[1], f, k)
            shift, scale = torch.zeros(1), torch.ones(1)
        elif kind == "mlp":
            head = MLPHead(x.shape[1], f, k)
            shift, scale = x.float().mean(0), x.float().std(0) if x.shape[0] > 1 else torch.ones(x.shape[1])
        else:
            img = x if x.dim() == 4 else x.unsqueeze(1)
            head = ConvHead(img.shape[1], img.shape[2], img.shape[3], f, k)
            flat = img.float().transpose(0, 1).reshape(img.shape[1], -1)
            shift, scale = flat.mean(1), flat.std(1)
    head = head.to(x.device)
    head.calibrate(
        features.to(x.device), shift.to(x.device), scale.to(x.device), out_scale.clamp_min(1e-12).to(x.device)
    )
    return head


def check_head(head: Optional[nn.Module]) -> None:
    """Raise unless ``head`` is None or an ``nn.Module``."""
    if head is not None and not isinstance(head, nn.Module):
        raise TypeError(f"`head` must be None (a built-in head) or an nn.Module, got {describe(head)}")
