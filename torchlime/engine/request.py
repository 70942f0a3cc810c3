"""What a front door hands the engine: one ``Request`` instead of private keywords.

A ``Request`` carries the model, the inputs, their feature map, the caller's keywords and the front
door's own hooks (which presets apply, the name of the inputs in messages, a model wrapper);
``explainer.execute`` explains it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from torchlime.typing import Modality, Model


@dataclass(frozen=True)
class Request:
    """One explanation call as the engine receives it (a front door's private hand-over).

    Attributes:
        model: the caller's model (any callable from a batch to scores).
        inputs: (B, ...) the inputs to explain (never modified).
        features: integer (B or 1, ...) feature map, broadcastable to ``inputs``.
        options: the caller's ``torchlime.explain`` keywords; ``presets.UNSET`` (or absent) where
            the caller passed nothing, so that presets can fill them.
        modality: "any", "image", "audio", "text" or "tabular": which presets' settings apply.
        input_name: the name of ``inputs`` in error messages ("images", "input_ids", ...).
        adapter: turns the caller's model into the model the engine runs (a front door's wrapper,
            e.g. the inverse STFT of waveform cells, the token unpacking of text), or None.
    """

    model: Model
    inputs: torch.Tensor
    features: torch.Tensor
    options: dict[str, Any] = field(default_factory=dict)
    modality: Modality = "any"
    input_name: str = "inputs"
    adapter: Optional[Callable[[Model], Model]] = None
