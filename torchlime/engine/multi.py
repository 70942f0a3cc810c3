"""Models of several inputs: a tuple of tensors (and unperturbed extra arguments) as one request.

``stages.perturb.packing`` lays the tensors out as one flat carrier with one feature map and one fill;
the engine then runs as for one tensor, and ``UnpackArgs`` hands the model its arguments chunk by chunk.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

import torch

from torchlime._util.checks import describe
from torchlime.engine.config import Call, Config
from torchlime.engine.modality import Modality, Prepared
from torchlime.engine.presets import resolve as resolve_preset
from torchlime.stages.perturb.packing import pack
from torchlime.typing import UNSET, BaselineSpecs, FeatureSpec, Model

#: options that only make sense for one tensor laid out as the model reads it
_SINGLE_TENSOR = {"perturb_fn": "a perturbation of its own", "normalize": "normalize=", "chunk_format": "chunk_format="}


@dataclass(frozen=True)
class Packed(Modality):
    """Several input tensors (and unperturbed extra arguments) of a model, as one flat carrier.

    Attributes:
        features: for one tensor, its integer map (B or 1, ...) or None; for a tuple, None (one
            feature per element) or a tuple of k maps, each broadcastable to its tensor (ids shared
            across tensors are one feature).
    """

    features: FeatureSpec = None

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """The (B, N) carrier of every tensor's values, its map, one fill and the unpacking hook.

        Args:
            model: called with the k perturbed tensors, then ``call.additional_forward_args``.
            inputs: one (B, ...) tensor or a tuple of k tensors, each (B, *shape_i).
            how: the configuration; ``baseline`` may be one fill or a tuple of k.
            call: the call; ``perturb_fn``, ``normalize`` and ``chunk_format`` must be unset.

        Returns:
            The hand-over.

        Raises:
            ValueError: settings that only apply to a single tensor, mismatched tuples.
        """
        for key, what in _SINGLE_TENSOR.items():
            if getattr(call, key) is not None:
                raise ValueError(
                    f"`{key}` applies to one input tensor laid out as the model reads it; with a tuple of inputs "
                    f"or `additional_forward_args` the engine packs the tensors itself ({what} cannot be combined)"
                )
        features: object = self.features
        tensors: tuple[torch.Tensor, ...]
        maps: FeatureSpec
        if isinstance(inputs, torch.Tensor) and features is None:
            tensors, maps = (inputs,), None
        elif isinstance(inputs, torch.Tensor):
            if not isinstance(features, torch.Tensor):
                raise TypeError(f"`features` must be an integer tensor for one input tensor, got {describe(features)}")
            tensors, maps = (inputs,), (features,)
        else:
            tensors, maps = tuple(inputs), self.features
        baseline = how.baseline
        if baseline is UNSET:
            baseline = resolve_preset(how.preset, {"baseline": UNSET})["baseline"]
        carrier, flat_features, fill, unpack = pack(tensors, maps, baseline, call.additional_forward_args)
        how = dataclasses.replace(how, baseline=cast(BaselineSpecs, fill))
        call = dataclasses.replace(call, perturb_fn=unpack, additional_forward_args=None)
        return Prepared(carrier, flat_features, how, call)
