"""The fit of a surrogate that works in sample space (``Surrogate.sample_space``, ``stages.sample_space``).

Such a surrogate forms no (F, F) normal equations: the engine keeps the masks and weights of the call
(``rows.Run``, ``fit.accumulate_blocks`` without an accumulator) and ``solve_samples`` fits it on them.
What needs normal equations is refused with it before any model call (``check_sample_space``):
``n_samples="auto"`` and ``ExponentialKernel(width="auto")``.
"""

from __future__ import annotations

import torch

from torchlime.stages.fixed_cost import record_function
from torchlime.stages.normal import Fit
from torchlime.stages.sample_space import Design, design
from torchlime.stages.surrogate import Surrogate

__all__ = ["solve_samples", "check_sample_space"]


def solve_samples(
    masks: torch.Tensor, weights: torch.Tensor, scores: torch.Tensor, surrogate: Surrogate, valid: torch.Tensor
) -> tuple[Design, Fit]:
    """A sample-space surrogate fitted on kept samples (the engine's fit when ``surrogate.sample_space``).

    Args:
        masks: bool (B, S, F) the masks.
        weights: (B, S) their weights.
        scores: (B, S, T) their scores.
        surrogate: a surrogate with ``sample_space`` True.
        valid: bool (B, F) the features that exist.

    Returns:
        ``(design, fit)``: the scaled, centred samples (with Σw, Σw² and Σ w (y - ȳ)², what the quality
        check reads) and the ``Fit``.
    """
    with record_function("torchlime::fit"):
        return design(masks, scores, weights, valid), surrogate.fit(masks, scores, weights, valid)


def check_sample_space(surrogate: Surrogate, adaptive: bool, auto_width: bool) -> None:
    """Refuse, before any model call, what a sample-space surrogate cannot do: it has no normal equations.

    Args:
        surrogate: the call's surrogate.
        adaptive: ``n_samples="auto"`` (its rounds test the normal equations' coefficients).
        auto_width: an ``ExponentialKernel(width="auto")`` (its folds are fitted on normal equations).

    Raises:
        ValueError: either of them with a surrogate whose ``sample_space`` is True.
    """
    if not surrogate.sample_space:
        return
    if adaptive:
        raise ValueError(
            f"`surrogate` {surrogate!r} fits in sample space, without normal equations: it needs an int "
            f"n_samples, not 'auto'"
        )
    if auto_width:
        raise ValueError(
            f"`kernel` ExponentialKernel(width='auto') chooses its width on normal equations, which `surrogate` "
            f"{surrogate!r} does not form: pass a number width"
        )
