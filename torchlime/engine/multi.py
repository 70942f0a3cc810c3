"""Models of several inputs: a tuple of tensors (and unperturbed extra arguments) as one request.

``stages.perturb.packing`` lays the tensors out as one flat carrier with one feature map and one fill;
the engine then runs as for one tensor, and ``Unpack`` hands the model its arguments chunk by chunk.
"""

from __future__ import annotations

from typing import Any, Sequence, Union

import torch

from torchlime._checks import describe
from torchlime.engine.presets import UNSET
from torchlime.engine.presets import resolve as resolve_preset
from torchlime.engine.request import Request
from torchlime.stages.perturb.packing import pack
from torchlime.typing import FeatureSpec, Model

#: options that only make sense for one tensor laid out as the model reads it
_SINGLE_TENSOR = {"perturb_fn": "a perturbation of its own", "normalize": "normalize=", "chunk_format": "chunk_format="}


def packed_request(
    model: Model,
    inputs: Union[Sequence[torch.Tensor], torch.Tensor],
    features: FeatureSpec,
    options: dict[str, Any],
    additional_forward_args: object,
) -> Request:
    """The request of a model called as ``model(*inputs, *additional_forward_args)``.

    Args:
        model: called with the k perturbed tensors, then the extra arguments.
        inputs: one (B, ...) tensor or a tuple of k tensors, each (B, *shape_i).
        features: for one tensor, its integer map (B or 1, ...) or None; for a tuple, None (one feature per
            element) or a tuple of k maps, each broadcastable to its tensor (ids shared across tensors
            are one feature).
        options: ``torchlime.explain``'s keywords; ``baseline`` may be one fill or a tuple of k.
        additional_forward_args: an object or a tuple of objects passed after the inputs, unperturbed;
            tensors whose first dim is B follow each row's input.

    Returns:
        A ``Request`` over the (B, N) carrier of every tensor's values.

    Raises:
        ValueError: options that only apply to a single tensor, mismatched tuples.
    """
    for key, what in _SINGLE_TENSOR.items():
        if options.get(key) is not None:
            raise ValueError(
                f"`{key}` applies to one input tensor laid out as the model reads it; with a tuple of inputs "
                f"or `additional_forward_args` the engine packs the tensors itself ({what} cannot be combined)"
            )
    tensors: tuple[torch.Tensor, ...]
    maps: FeatureSpec
    if isinstance(inputs, torch.Tensor) and features is None:
        tensors, maps = (inputs,), None
    elif isinstance(inputs, torch.Tensor):
        if not isinstance(features, torch.Tensor):
            raise TypeError(f"`features` must be an integer tensor for one input tensor, got {describe(features)}")
        tensors, maps = (inputs,), (features,)
    else:
        tensors, maps = tuple(inputs), features
    baseline = options.get("baseline", UNSET)
    if baseline is UNSET:
        baseline = resolve_preset(options.get("preset"), {"baseline": UNSET})["baseline"]
    carrier, flat_features, fill, unpack = pack(tensors, maps, baseline, additional_forward_args)
    return Request(model, carrier, flat_features, {**options, "baseline": fill, "perturb_fn": unpack})
