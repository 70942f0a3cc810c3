"""The state of a trained amortized explainer (``Trained``), which ``AmortizedExplainer`` adds its methods to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from torch import nn

from torchlime.amortized._report import Report
from torchlime.amortized._train import Distances
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.typing import Model


@dataclass
class Trained:
    """What an amortized explainer learnt and how (the fields of ``AmortizedExplainer``).

    Attributes:
        head: the trained network: (B, *input_shape) -> (B, K, F + 1) coefficients and intercept, and
            (B, D) penultimate features.
        model: the explained model (for the top class, the fallback and the report), or None.
        modality: the input kind (its ``prepare`` gives each explanation's record), or the feature map.
        explainer: the label settings (an ``Explainer``).
        features: long (1, *fshape) the feature map shared by every input, ids 0..F-1.
        input_shape: the shape of one input.
        labelled: bool (K,) the output columns the head was trained on.
        label_samples: N of the labels.
        distances: the out-of-distribution distances (``_train.Distances``).
        settings: plain data: the label settings as their run record says them, the seed, the inputs
            trained and held out, the per-epoch losses.
        report: the quality measured on the held-out inputs at ``fit`` (``Report``), or None.
        call: the labels' call (its ``softmax`` and ``output``, which the metrics read).
    """

    head: nn.Module
    model: Optional[Model]
    modality: ModalitySpec
    explainer: Explainer
    features: torch.Tensor
    input_shape: tuple[int, ...]
    labelled: torch.Tensor
    label_samples: int
    distances: Distances
    settings: dict[str, Any] = field(default_factory=dict)
    report: Optional[Report] = None
    call: Call = field(default_factory=Call)
