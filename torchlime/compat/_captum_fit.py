"""Which fit a captum call runs: on normal equations, or in sample space when there are no more samples than features.

captum's ``Lime`` and ``KernelShap`` without a ``feature_mask`` make every element a feature (3,072 for one
3x32x32 image, 150,528 at 3x224x224), with 25 samples at captum's defaults. Normal equations (F, F) would
cost O(F²) memory and O(F³) time there; with S <= F the same objectives are solved on the (S, F) samples
(``torchlime.stages.sample_space``): captum's ``SkLearnLinearRegression`` (KernelShap) as the minimum-norm
least squares, ``SkLearnLasso`` (Lime's default) by the LARS homotopy, ``SkLearnRidge`` through the (S, S)
Gram. The engine's own fit of the call (its quality check) then runs in sample space too, so no (F, F)
array is formed anywhere.
"""

from __future__ import annotations

import torch

from torchlime.stages.sample_space import SampleRidge, in_sample_space
from torchlime.stages.surrogate import Ridge, Surrogate

__all__ = ["fitters", "feature_ids"]


def fitters(surrogate: Surrogate, n_samples: int, n_features: int) -> tuple[Surrogate, Surrogate]:
    """The engine's surrogate for a captum call and the surrogate of captum's own fit.

    Args:
        surrogate: the surrogate of captum's ``interpretable_model`` (``captum._surrogate``).
        n_samples: S, captum's samples per example.
        n_features: F, the features of the largest example.

    Returns:
        ``(engine, fit)``: least squares for the engine's fit (its quality check), in sample space when
        S <= F and ``surrogate`` has a sample-space form (``in_sample_space``), and ``surrogate`` itself or
        that form.
    """
    fit = in_sample_space(surrogate) if n_samples <= n_features else None
    if fit is None:
        return Ridge(alpha=0.0, dtype=torch.float64), surrogate
    return SampleRidge(alpha=0.0, dtype=torch.float64), fit


def feature_ids(masks: tuple[torch.Tensor, ...], examples: int, m: int, dev: torch.device) -> torch.Tensor:
    """Bool (E, M): the ids of captum's numbering that appear in each example's masks.

    Args:
        masks: long masks per input, (1 or E, ...).
        examples: E.
        m: M, the largest id + 1.
        dev: the device of the result.

    Returns:
        Bool (E, M).
    """
    seen = torch.zeros(examples, m + 1, dtype=torch.bool, device=dev)
    for mk in masks:
        if not mk.numel():
            continue
        flat = mk.reshape(mk.shape[0], -1).expand(examples, -1) if mk.shape[0] == 1 else mk.reshape(examples, -1)
        seen.scatter_(1, flat.clamp(min=-1) % (m + 1), True)
    return seen[:, :m]
