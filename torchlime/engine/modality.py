"""The seam between an input kind and the engine: a ``Modality`` prepares inputs, the engine explains.

A modality (``torchlime.Images``, ``Spectrograms``, ``Waveforms``, ``Tokens``, ``Words``, ``Tabular``,
``Series``, or one of your own) is a small frozen object holding its own settings (the segmentation, the
fill it prefers, ...). ``prepare`` checks the inputs and turns them into a ``Prepared`` hand-over: the
tensor the engine perturbs, its integer feature map, the configuration and call with the modality's
own fields set (a fill, a perturbation hook, a model wrapper), and a typed info record; ``finish``
may add to the result. ``FeatureMap`` is the plain one: the caller's own feature map.

Writing one takes only public names::

    @dataclass(frozen=True)
    class Rows(torchlime.Modality):
        width: int = 4

        def prepare(self, model, inputs, how, call):
            ids = torch.arange(inputs.shape[1]) // self.width
            return torchlime.Prepared(inputs, ids.view(1, -1), how, call)

    torchlime.Explainer().explain(model, x, Rows(width=2))
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch

from torchlime.engine.config import Call, Config
from torchlime.engine.explanation import Explanation
from torchlime.engine.info import Info
from torchlime.typing import Model, PresetScope


@dataclass(frozen=True)
class Prepared:
    """What a modality hands the engine: one call, ready to explain.

    Attributes:
        inputs: (B, ...) the tensor the engine perturbs (never modified).
        features: integer (B or 1, ...) feature map broadcastable to ``inputs``; negative ids are
            never perturbed.
        how: the configuration, with the modality's own settings (e.g. its fill) where unset.
        call: the call, with the modality's own hooks (``perturb_fn``, ``normalize``, ...).
        adapter: turns the caller's model into the one the engine runs on ``inputs`` (e.g. an
            inverse STFT before an audio model, strings rebuilt from tokens), or None.
        scope: whose preset settings apply: "any", "image", "audio", "text" or "tabular".
        input_name: the name of the inputs in error messages ("images", "input_ids", ...).
        info: the typed record the explanation carries (``Explanation.info``), or None.
    """

    inputs: torch.Tensor
    features: torch.Tensor
    how: Config
    call: Call
    adapter: Optional[Callable[[Model], Model]] = None
    scope: PresetScope = "any"
    input_name: str = "inputs"
    info: Optional[Info] = None


class Modality(abc.ABC):
    """An input kind: checks its inputs, builds the feature map, the fill and any perturbation hook.

    Subclasses are frozen dataclasses of their own settings; ``owns`` names the fields of ``Call``
    (or ``Config``) the modality sets itself (its front door does not offer them).
    """

    owns: ClassVar[frozenset[str]] = frozenset()

    @abc.abstractmethod
    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check ``inputs`` and build the hand-over.

        Args:
            model: the caller's model (to inspect, e.g. its sample rate; wrap it with ``adapter``).
            inputs: the caller's inputs (numpy arrays are already tensors).
            how: the caller's configuration.
            call: the caller's call.

        Returns:
            The ``Prepared`` call.

        Raises:
            TypeError / ValueError: bad inputs or settings, named, before any model call.
        """

    def finish(self, explanation: Explanation, prepared: Prepared) -> Explanation:
        """Complete the result (the default: nothing to add; the engine attaches ``prepared.info``).

        Args:
            explanation: the engine's result.
            prepared: the hand-over it came from.

        Returns:
            The explanation the caller gets.
        """
        return explanation


@dataclass(frozen=True)
class FeatureMap(Modality):
    """The caller's own integer feature map (what a tensor in the modality's place means).

    Attributes:
        features: integer (B or 1, ...) map broadcastable to the inputs, or None: one feature per
            element (captum's default).
    """

    features: Optional[torch.Tensor] = None

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """The inputs with this map (one feature per element when there is none).

        Args:
            model: the caller's model (not called here).
            inputs: (B, ...) the inputs.
            how: the configuration, unchanged.
            call: the call, unchanged.

        Returns:
            The hand-over; the map is checked against the inputs by the engine before any use.
        """
        features = self.features
        if features is None and isinstance(inputs, torch.Tensor) and inputs.dim() >= 1:
            features = torch.arange(inputs[0].numel(), device=inputs.device).view(1, *inputs.shape[1:])
        # checked by ``resolve.check_inputs`` before any use
        return Prepared(inputs, features, how, call)  # type: ignore[arg-type]
