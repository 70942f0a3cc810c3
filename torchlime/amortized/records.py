"""Typed records of amortized explanations: what trained the head (``AmortizedRecord``) and the run record.

An amortized explanation carries ``AmortizedRun``, the engine's ``RunRecord`` with one more typed field,
``amortized``, which ``meta["amortized"]`` shows as plain data: the head's class and digest, the label
settings and their N, and each input's distance from the training inputs. The record's other fields say
what the engine would say of a call that drew no sample: ``n_samples`` 0, ``model_rows`` the B rows of
the top-class forward (0 with given targets), ``score`` NaN (no fit to judge).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, cast

from torchlime._util.argdocs import with_args
from torchlime.engine.run_record import RunRecord

__all__ = ["AmortizedRecord", "AmortizedRun", "OUT_OF_DISTRIBUTION"]

#: the arguments of the records' ``select``
_SLICE = {"start": "the first input kept.", "stop": "one past the last input kept."}

#: the quality flag of inputs far from the training inputs (``RunRecord.quality``)
OUT_OF_DISTRIBUTION = "out_of_distribution"


@dataclass(frozen=True)
class AmortizedRecord:
    """How an amortized explanation was made.

    Attributes:
        head: the head's class name.
        head_digest: SHA-256 of the head's state dict (its tensors' bytes, in key order).
        labels: the label settings, as the labels' run record says them (sampler, kernel, surrogate,
            baseline, preset, softmax), or ``{"source": "results"}`` plus those for labels read from a folder.
        label_samples: N, the samples per input of the labels.
        trained_inputs: the inputs the head was trained on (the held-out ones excluded).
        distance: each input's Mahalanobis distance from the training inputs in the head's penultimate
            features (B floats).
        threshold: the held-out inputs' 99th percentile of that distance (at least the training inputs');
            above it an input is flagged.
        fallback: the inputs explained by the engine instead (``explain(x, fallback=True)``), as indices.
    """

    head: str
    head_digest: str
    labels: dict[str, object]
    label_samples: int
    trained_inputs: int
    distance: list[float]
    threshold: float
    fallback: list[int] = dataclasses.field(default_factory=list)

    @with_args(_SLICE)
    def select(self, start: int, stop: int) -> AmortizedRecord:
        """The record of inputs ``start:stop``, renumbered from 0.

        Returns:
            The sliced record.
        """
        kept = [i - start for i in self.fallback if start <= i < stop]
        return dataclasses.replace(self, distance=self.distance[start:stop], fallback=kept)

    def as_plain(self) -> dict[str, object]:
        """The record as plain data (``meta["amortized"]``)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class AmortizedRun(RunRecord):
    """The run record of an amortized explanation: ``RunRecord`` and ``amortized``.

    Attributes:
        amortized: how the head was trained and how far each input is from its training inputs.
    """

    amortized: Optional[AmortizedRecord] = None

    def as_plain(self) -> dict[str, object]:
        """``RunRecord.as_plain`` with ``meta["amortized"]``."""
        plain = {k: v for k, v in super().as_plain().items() if k != "amortized"}
        if self.amortized is not None:
            plain["amortized"] = self.amortized.as_plain()
        return plain

    @with_args(_SLICE)
    def select(self, start: int, stop: int) -> AmortizedRun:
        """``RunRecord.select`` and the amortized record's inputs ``start:stop``.

        Returns:
            The sliced record.
        """
        sliced = cast(AmortizedRun, super().select(start, stop))  # ``replace`` keeps the subclass
        record = None if self.amortized is None else self.amortized.select(start, stop)
        return dataclasses.replace(sliced, amortized=record)
