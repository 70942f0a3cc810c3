"""``RunRecord``: what the engine records of a call (settings, chunk size, timings, quality), typed.

``assemble`` builds it once; ``Explanation.run`` carries it and ``Explanation.meta`` shows it as plain
data (what files keep, and what ``load`` rebuilds it from).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Union

from torchlime.engine._stored import check_record

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


@dataclass(frozen=True)
class RunRecord:
    """A call's settings and measurements (``Explanation.run``; ``meta`` shows them as plain data).

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
        quality: the quality flags (``engine.quality``).
        unreliable: what made some fit unreliable, or None.
        seconds_forward: seconds until the last forward pass.
        seconds_total: seconds of the call.
        input_shapes: each tensor's shape, for a tuple of inputs, else None.
        targets: a structured target's per-input records as plain data, else None.
    """

    n_samples: Union[int, str]
    sampler: str
    kernel: str
    surrogate: str
    baseline: object
    perturbation: str
    normalize: Optional[list[object]]
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
    targets: Optional[dict[str, object]] = None

    def as_plain(self) -> dict[str, object]:
        """The record as ``meta``'s entries (the optional ones only where set)."""
        plain = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {k: v for k, v in plain.items() if k in _REQUIRED or v is not None}

    @classmethod
    def from_plain(cls, meta: Mapping[str, object]) -> Optional[RunRecord]:
        """The record from ``meta`` (of a loaded or sliced explanation), or None if it lacks a field.

        Args:
            meta: an explanation's ``meta``.

        Returns:
            The record, or None for a ``meta`` not written by the engine.

        Raises:
            StoredDataError: a field of another kind than the record's (a ``ValueError`` naming it, what
                it must be and what it holds).
        """
        if not all(k in meta for k in _REQUIRED):
            return None
        check_record(cls, meta, "meta")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in meta.items() if k in names})  # type: ignore[arg-type]
