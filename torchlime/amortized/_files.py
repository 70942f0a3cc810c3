"""Saving and loading an amortized explainer: tensors and plain data only (``weights_only=True``).

The file holds the head's class name and constructor arguments (for the built-in heads), its state
dict, the feature map, the trained columns, the distances and the settings as plain data. The model,
the modality and the label settings are objects of the caller's, given again to ``load``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, TypeVar, Union

import torch
from torch import nn

from torchlime._util.checks import describe
from torchlime._util.plain import plain
from torchlime.amortized import _train
from torchlime.amortized._options import Training
from torchlime.amortized._state import Trained
from torchlime.amortized.heads import HEADS
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.typing import Model

T = TypeVar("T", bound=Trained)
#: the format this version writes
FORMAT = "torchlime.amortized/1"


def save(amort: Trained, path: Path) -> None:
    """Write ``amort`` to ``path`` (see the module)."""

    def cpu(t: torch.Tensor) -> torch.Tensor:
        return t.detach().to("cpu").clone()

    data: dict[str, Any] = {
        "format": FORMAT,
        "head_class": type(amort.head).__name__,
        "head_arguments": dict(getattr(amort.head, "arguments", {})),
        "state": {k: cpu(v) for k, v in amort.head.state_dict().items()},
        "features": cpu(amort.features),
        "input_shape": list(amort.input_shape),
        "labelled": cpu(amort.labelled),
        "label_samples": amort.label_samples,
        "distance_mean": cpu(amort.distances.mean),
        "distance_precision": cpu(amort.distances.precision),
        "threshold": amort.distances.threshold,
        "settings": plain(amort.settings),
        "report": None if amort.report is None else amort.report.as_plain(),
        "softmax": bool(amort.call.softmax),
    }
    torch.save(data, path)


def load(
    cls: type[T],
    path: Path,
    head: Optional[nn.Module],
    model: Optional[Model],
    modality: ModalitySpec,
    explainer: Optional[Explainer],
    map_location: Union[str, torch.device],
) -> T:
    """Read what ``save`` wrote (see ``AmortizedExplainer.load``)."""
    from torchlime.amortized._report import Report

    data = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else describe(data)
        raise ValueError(f"`path` must be a file written by AmortizedExplainer.save ({FORMAT}); {path} holds {found!r}")
    Training(head=head)  # the head's check
    name = data["head_class"]
    if head is None:
        if name not in HEADS:
            raise ValueError(
                f"`head` must be an instance of the file's own head class {name!r} (a user's head, which the file "
                "cannot rebuild): pass head=YourHead(...)"
            )
        head = HEADS[name](**data["head_arguments"])
    elif type(head).__name__ != name:
        raise ValueError(f"`head` must be an instance of the file's head class {name!r}, got {type(head).__name__}")
    head.load_state_dict(data["state"])
    head = head.to(map_location).eval()
    distances = _train.Distances(data["distance_mean"], data["distance_precision"], float(data["threshold"]))
    features = data["features"]
    if modality is None:
        modality = features
    report = None if data["report"] is None else Report(**data["report"])
    return cls(
        head,
        model,
        modality,
        Explainer() if explainer is None else explainer,
        features,
        tuple(data["input_shape"]),
        data["labelled"],
        int(data["label_samples"]),
        distances,
        dict(data["settings"]),
        report,
        Call(softmax=bool(data["softmax"])),
    )
