"""``RunRecord``: what the engine records of a call (settings, chunk size, timings, quality), typed.

``assemble`` builds it once; ``Explanation.run`` carries it, ``Explanation[i]`` slices it (``select``)
and ``Explanation.meta`` renders it as plain data (``as_plain``: what files keep, and what ``load``
rebuilds it from, ``from_plain``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Union, cast

from torchlime.engine._stored import check_plain, check_record
from torchlime.stages.weighting import WidthChoice
from torchlime.targets import TargetInfo  # the package: every target kind registers itself

#: the fields every engine call records, in ``meta``'s order
_REQUIRED = (
    "n_samples",
    "sampler",
    "kernel",
    "surrogate",
    "baseline",
    "perturbation",
    "normalize",
    "preset",
    "batch_size",
    "softmax",
    "model_rows",
    "samples_used",
    "peak_memory",
    "quality",
    "unreliable",
    "seconds_forward",
    "seconds_total",
)
#: the typed fields that ``meta`` shows in a plain form of their own
_TYPED = ("targets", "width_auto", "refit_from")


@dataclass(frozen=True)
class RunRecord:
    """A call's settings and measurements (``Explanation.run``; ``meta`` renders them as plain data).

    Attributes:
        n_samples: S per input, or the description of ``n_samples="auto"``.
        sampler: the sampler's description.
        kernel: the kernel's description.
        surrogate: the surrogate's description.
        baseline: the fill's description (a number, a name, or a repr).
        perturbation: "blend" (a blend with the fill, which the metrics can rebuild) or "custom".
        normalize: ``(mean, std)`` per channel as lists, or None.
        preset: the preset's name, or None.
        batch_size: the rows per model call the call chose.
        softmax: whether the softmax of the outputs was explained.
        model_rows: rows the model was called on.
        samples_used: samples drawn per input (B,).
        peak_memory: CUDA peak memory of the call in bytes, or None.
        quality: the quality flags (``engine.quality``): per flag, the [input, (target)] it concerns.
        unreliable: what made some fit unreliable, or None.
        seconds_forward: seconds until the last forward pass.
        seconds_total: seconds of the call.
        input_shapes: each tensor's shape, for a tuple of inputs, else None.
        targets: a structured target's record (``torchlime.targets.TargetInfo``: the boxes, the token
            ids), else None; ``meta["targets"]`` shows it as plain data.
        width_auto: how ``width="auto"`` chose the kernel's width (``stages.weighting.WidthChoice``), else
            None; ``meta["width_auto"]``.
        refit_from: for ``Explanation.refit``, the samples the refit explanation was fitted from, else
            None; ``meta["refit"]`` is ``{"from_samples": refit_from}``.
        cuda_graph: with ``accelerate="cuda_graphs"``, how the stages after the plan ran
            (``engine.graphed``): "warm-up" (the first call of its shapes, eager), "captured", "replayed",
            or "eager: " and the reason no graph could run them; else None.
    """

    n_samples: Union[int, str]
    sampler: str
    kernel: str
    surrogate: str
    baseline: object
    perturbation: str
    normalize: Optional[list[list[float]]]
    preset: Optional[str]
    batch_size: Optional[int]
    softmax: bool
    model_rows: int
    samples_used: list[int]
    peak_memory: Optional[int]
    quality: dict[str, object]
    unreliable: Optional[str]
    seconds_forward: float
    seconds_total: float
    input_shapes: Optional[list[list[int]]] = None
    targets: Optional[TargetInfo] = None
    width_auto: Optional[WidthChoice] = None
    refit_from: Optional[int] = None
    cuda_graph: Optional[str] = None

    def as_plain(self) -> dict[str, object]:
        """The record as ``meta``'s entries (the optional ones only where set)."""
        plain = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _TYPED}
        plain = {k: v for k, v in plain.items() if k in _REQUIRED or v is not None}
        if self.width_auto is not None:
            plain["width_auto"] = self.width_auto.as_plain()
        if self.targets is not None:
            plain["targets"] = self.targets.as_plain()
        if self.refit_from is not None:
            plain["refit"] = {"from_samples": self.refit_from}
        return plain

    def select(self, start: int, stop: int) -> RunRecord:
        """The record of inputs ``start:stop`` (``Explanation[i]``), renumbered from 0.

        The quality flags keep those of the kept inputs (and ``unreliable`` says which remain), the
        sample counts and the targets' record those of the kept inputs.

        Args:
            start: the first input kept.
            stop: the input after the last.

        Returns:
            The sliced record.
        """
        quality = dict(self.quality)
        flagged = []
        for name, where in self.quality.items():
            if isinstance(where, list):
                quality[name] = [[w[0] - start, *w[1:]] for w in where if w and start <= w[0] < stop]
                flagged += [name] if quality[name] else []
        unreliable = f"{', '.join(flagged)} (see torchlime.engine.quality)" if flagged else None
        return dataclasses.replace(
            self,
            quality=quality,
            unreliable=unreliable,
            samples_used=self.samples_used[start:stop],
            targets=None if self.targets is None else self.targets.select(start, stop),
        )

    @classmethod
    def from_plain(cls, meta: Mapping[str, object]) -> Optional[RunRecord]:
        """The record from ``meta`` (of a loaded explanation), or None if it lacks a field.

        Args:
            meta: an explanation's ``meta`` as a file keeps it.

        Returns:
            The record, or None for a ``meta`` not written by the engine. A structured target's record
            of a kind no target registers stays out of it (``Explanation.stored`` keeps its plain data).

        Raises:
            StoredDataError: a field of another kind than the record's (a ``ValueError`` naming it, what
                it must be and what it holds).
        """
        if not all(k in meta for k in _REQUIRED):
            return None
        names = [f.name for f in dataclasses.fields(cls) if f.name not in _TYPED]
        check_record(cls, meta, "meta", names)
        fields: dict[str, object] = {k: v for k, v in meta.items() if k in names}
        targets = meta.get("targets")
        kind = TargetInfo.registered(targets.get("kind")) if isinstance(targets, Mapping) else None
        if kind is not None and isinstance(targets, Mapping):
            check_record(kind, targets, "meta['targets']")
            fields["targets"] = TargetInfo.from_plain(dict(targets))
        chosen = meta.get("width_auto")
        if chosen is not None:
            check_plain(chosen, WidthChoice, "meta['width_auto']")
            plain = cast(Mapping[str, object], chosen)
            fields["width_auto"] = WidthChoice(**{k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()})  # type: ignore[arg-type]
        refit = meta.get("refit")
        if isinstance(refit, dict) and "from_samples" in refit:
            check_plain(refit["from_samples"], int, "meta['refit']['from_samples']")
            fields["refit_from"] = refit["from_samples"]
        return cls(**fields)  # type: ignore[arg-type]
