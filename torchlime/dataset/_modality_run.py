"""The data-set runner's explanation step for an ``Explainer`` and a modality (``explain_dataset``)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from torchlime.engine.config import Call, pick
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.typing import Model

#: the runner's keywords that are settings of the explainer
_RUN_SETTINGS = ("max_memory", "batch_size")


@dataclass(frozen=True)
class ModalityRun:
    """``explain_fn(model, inputs, **keywords)`` of one explainer and one modality.

    The data-set runner calls it with each batch, its global ``index``, the seed and its run settings
    (``max_memory``, ``batch_size``), which replace the explainer's where given; a dataclass, so that the
    folder's record of the run names the explainer's and the modality's settings.

    Attributes:
        explainer: how to explain.
        modality: the input kind (or a feature map), as ``Explainer.explain`` takes it.
    """

    explainer: Explainer
    modality: ModalitySpec

    def __call__(self, model: Model, inputs: torch.Tensor, **keywords: object) -> Explanation:
        """Explain one batch.

        Args:
            model: the model.
            inputs: (b, ...) the batch.
            **keywords: ``Call`` fields and the run settings ``max_memory`` / ``batch_size``.

        Returns:
            The batch's ``Explanation``.
        """
        settings = {k: keywords.pop(k) for k in _RUN_SETTINGS if k in keywords}
        given = {k: v for k, v in settings.items() if v is not None}
        how = dataclasses.replace(self.explainer, **given) if given else self.explainer  # type: ignore[arg-type]
        return how.run(model, inputs, self.modality, pick(Call, keywords))
