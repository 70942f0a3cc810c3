"""Typed records for explanations built by hand in tests (``Explanation.run`` of a call that never ran)."""

from __future__ import annotations

from typing import Any

from torchlime.engine.run_record import RunRecord


def run_record(batch: int, **fields: Any) -> RunRecord:
    """A ``RunRecord`` of ``batch`` inputs with plain defaults, ``fields`` replacing them.

    Example:
        >>> run_record(2, unreliable="poor_fit").samples_used
        [8, 8]
    """
    plain: dict[str, Any] = dict(
        n_samples=8,
        sampler="BernoulliSampler(p=0.5)",
        kernel="ExponentialKernel(width=0.25)",
        surrogate="Ridge(alpha=1.0)",
        baseline=0.0,
        perturbation="blend",
        normalize=None,
        preset=None,
        batch_size=8,
        softmax=False,
        model_rows=8 * batch,
        samples_used=[8] * batch,
        peak_memory=None,
        quality={},
        unreliable=None,
        seconds_forward=0.0,
        seconds_total=0.0,
    )
    plain.update(fields)
    return RunRecord(**plain)
