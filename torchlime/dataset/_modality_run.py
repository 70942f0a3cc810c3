"""What a data-set tool explains with: an explainer, a modality and a call (``explain_dataset``, Ray's ``Explain``).

The tools take the engine's three records as ``Explainer.run`` does: the ``explainer`` (how), the
``modality`` (the input kind, or a feature map) and the ``call`` (targets, samples, seed). ``ModalityRun``
checks them once, explains each batch with its global ``index`` and the seed, and describes itself as
plain data for a result folder's ``index.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.dataset._describe import Plain, describe_value
from torchlime.engine.config import Call, Config
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.engine.modality import Modality
from torchlime.stages.forward.targets import check_shared_target
from torchlime.typing import UNSET, Model, TargetSpec, Unset

#: settings of the explainer that change how a run is computed, never what it computes (not recorded)
RUN_SETTINGS = ("max_memory", "batch_size", "progress")


def _given(record: Union[Config, Call], leave_out: tuple[str, ...]) -> dict[str, Plain]:
    """The fields of ``record`` that differ from their defaults, described (a new field keeps old records)."""
    out: dict[str, Plain] = {}
    for field in dataclasses.fields(record):
        value = describe_value(getattr(record, field.name))
        if field.name not in leave_out and value != describe_value(field.default):
            out[field.name] = value
    return out


#: what the shards may keep besides the coefficients
KEEPS = ("features", "inputs")


def check_keep(keep: object, default: Collection[str]) -> dict[str, bool]:
    """``{"keep_features": bool, "keep_inputs": bool}`` of a tool's ``keep=`` (a collection of ``KEEPS``).

    Args:
        keep: the caller's ``keep``.
        default: the tool's default, for the message.

    Returns:
        Whether each of ``KEEPS`` is kept, under the names ``index.json`` records.

    Raises:
        TypeError / ValueError: not a tuple, list or set of names in ``KEEPS``.
    """
    if not isinstance(keep, (tuple, list, set, frozenset)) or not all(isinstance(k, str) for k in keep):
        raise TypeError(
            f"`keep` must be a tuple of names among {list(KEEPS)} (e.g. {tuple(default)!r}), got {describe(keep)}"
        )
    unknown = sorted(set(keep) - set(KEEPS))
    if unknown:
        raise ValueError(f"`keep` must name only {list(KEEPS)}, got {unknown}")
    return {f"keep_{name}": name in keep for name in KEEPS}


@dataclass(frozen=True)
class ModalityRun:
    """One tool's explainer, modality and call: ``run(model, inputs, index)`` explains a batch.

    Attributes:
        explainer: how to explain (``torchlime.Explainer``).
        modality: the input kind (``torchlime.Images(...)``, ``Tabular(...)``, ...) or a feature map, as
            ``Explainer.explain`` takes it.
        call: what to explain (``torchlime.Call``: target, n_samples, softmax, ...); its ``generator`` is
            the int seed of every input's masks, which derive from the seed and the input's global index.
    """

    explainer: Explainer
    modality: ModalitySpec
    call: Call

    @classmethod
    def checked(cls, explainer: Optional[Explainer], modality: object, call: Optional[Call], who: str) -> ModalityRun:
        """The run of a tool's arguments, checked before any data is read.

        Args:
            explainer: the caller's explainer, or None (the engine's defaults).
            modality: a ``Modality``, an integer feature map (a tensor, or a tuple of them), or None (one
                feature per element).
            call: the caller's call, or None (the defaults: top class, the preset's or the engine's N, seed 0).
            who: the tool's name, for messages.

        Returns:
            The run, its call's ``generator`` an int.

        Raises:
            TypeError / ValueError: an argument of the wrong kind, a ``call`` with an ``index`` (the tool
                passes each input's own) or a per-input target, a seed that is no int >= 0.
        """
        if explainer is None:
            explainer = Explainer()
        if not isinstance(explainer, Explainer):
            raise TypeError(f"`explainer` must be None or a torchlime.Explainer, got {describe(explainer)}")
        if not _is_modality(modality):
            raise TypeError(
                f"`modality` must be a torchlime Modality (Images(...), Tabular(...), ...), an integer feature map "
                f"or None (one feature per element), got {describe(modality)}"
            )
        if call is None:
            call = Call()
        if not isinstance(call, Call):
            raise TypeError(
                f"`call` must be None or a torchlime.Call (target, n_samples, generator, ...), got {describe(call)}"
            )
        if call.index is not None:
            raise ValueError(f"`call.index` must not be given: {who} passes each input's global index itself")
        seed = 0 if call.generator is None else call.generator
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(
                f"`call.generator` must be an int seed (every input's masks derive from the seed and its index, "
                f"so a torch.Generator's state cannot be used), got {describe(seed)}"
            )
        if seed < 0:
            raise ValueError(f"`call.generator` must be an int seed >= 0, got {seed}")
        check_shared_target(None if isinstance(call.target, Unset) else call.target, who)
        return cls(explainer, modality, dataclasses.replace(call, generator=int(seed)))  # type: ignore[arg-type]

    @property
    def seed(self) -> int:
        """The int seed of every input's masks and random fills."""
        return int(self.call.generator)  # type: ignore[arg-type]

    @property
    def by_label(self) -> bool:
        """Whether every input is explained for its own label (``target="label"``)."""
        return isinstance(self.call.target, str) and self.call.target == "label"

    def to(self, device: torch.device) -> ModalityRun:
        """The run with its tensors (a feature map, a baseline, a segments map) on ``device``.

        Args:
            device: where the inputs are explained.

        Returns:
            A new run (the same one when nothing moves).
        """
        modality = self.modality
        if isinstance(modality, torch.Tensor):
            modality = modality.to(device)
        elif isinstance(modality, Modality) and dataclasses.is_dataclass(modality):
            moved = {
                f.name: getattr(modality, f.name).to(device)
                for f in dataclasses.fields(modality)
                if isinstance(getattr(modality, f.name), torch.Tensor)
            }
            modality = dataclasses.replace(modality, **moved) if moved else modality
        explainer = self.explainer
        if isinstance(explainer.baseline, torch.Tensor):
            explainer = dataclasses.replace(explainer, baseline=explainer.baseline.to(device))
        return ModalityRun(explainer, modality, self.call)

    def __call__(
        self, model: Model, inputs: object, index: torch.Tensor, target: Union[TargetSpec, Unset] = UNSET
    ) -> Explanation:
        """Explain one batch.

        Args:
            model: the model.
            inputs: (b, ...) the batch (a tensor, or strings for a text modality).
            index: long (b,) the inputs' global indices, which their masks follow.
            target: the batch's targets (its labels for ``target="label"``); unset: the call's.

        Returns:
            The batch's ``Explanation``.
        """
        call = dataclasses.replace(self.call, index=index)
        if not isinstance(target, Unset):
            call = dataclasses.replace(call, target=target)
        return self.explainer.run(model, inputs, self.modality, call)

    def describe(self) -> dict[str, Plain]:
        """The run as plain data for ``index.json``.

        Returns:
            The explainer's and the call's settings that differ from the defaults (the run settings
            max_memory, batch_size and progress left out: they change no number), and the modality.
        """
        modality = describe_value(self.modality)
        if isinstance(modality, dict) and isinstance(self.modality, Modality):  # named where users import it
            public = type(self.modality).__module__.split(".")
            public = public[: next((i for i, p in enumerate(public) if p.startswith("_")), len(public))]
            modality = {**modality, "type": ".".join([*public, type(self.modality).__qualname__])}
        return {
            "explainer": _given(self.explainer, RUN_SETTINGS),
            "modality": modality,
            "call": _given(self.call, ("index", "generator")),
        }


def _is_modality(modality: object) -> bool:
    if isinstance(modality, (tuple, list)):
        return all(m is None or isinstance(m, torch.Tensor) for m in modality)
    return modality is None or isinstance(modality, (Modality, torch.Tensor, np.ndarray))
