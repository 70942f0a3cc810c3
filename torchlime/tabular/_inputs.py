"""The checks of the tabular modality: rows, names, seed, training statistics and given sample rows.

Each raises a ``TypeError`` / ``ValueError`` naming the argument, what was expected and what came,
before any model call.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Optional, Union, cast

import numpy as np
import numpy.typing as npt
import torch

from torchlime._util.checks import check_finite, check_tensor, describe, user_stacklevel
from torchlime.engine.presets import check_preset
from torchlime.tabular.stats import TabularStats, as_float64, fit_stats
from torchlime.typing import Seed

#: (N, D) training rows: a tensor, an array or nested lists of numbers, or fitted ``TabularStats``
TrainingData = Union[torch.Tensor, "npt.NDArray[np.generic]", Sequence[Sequence[float]], TabularStats]
#: categorical column indices: ints (or numpy integers), a 1-D integer array or tensor
Columns = Union[Sequence[int], torch.Tensor, "npt.NDArray[np.generic]"]
#: (N,) class labels of the training rows: numbers or strings
Labels = Union[torch.Tensor, "npt.NDArray[np.generic]", Sequence[object]]
#: rows of numbers: a tensor, or a numpy array (taken as a float32 tensor on the CPU)
Rows = Union[torch.Tensor, "npt.NDArray[np.generic]"]

#: presets with tabular settings: the others would only swap the surrogate (the sampler, kernel
#: and values stay lime's tabular ones), so e.g. "kernel_shap" would not give Shapley values
PRESETS = (None, "lime")


def check_tabular_preset(preset: object) -> None:
    """Refuse presets without tabular settings (anything but None and "lime")."""
    check_preset(preset)
    if preset not in PRESETS:
        raise ValueError(
            f"`preset` must be None or 'lime' for tabular data (explain_tabular draws lime's tabular "
            f"samples and kernel; other presets would only change the surrogate), got {preset!r}"
        )


def check_x(x: object) -> torch.Tensor:
    """``x`` as float (B, D) finite rows, B >= 1, D >= 2.

    Args:
        x: the rows to explain.

    Returns:
        ``x``, checked.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"`X` must be a torch.Tensor or a numpy array of numbers (B, D), got {describe(x)}")
    if not x.is_floating_point():
        raise TypeError(
            f"`X` must be a floating tensor (float32 or float64), got dtype {x.dtype}; convert with X.float()"
        )
    if x.ndim != 2 or x.shape[0] == 0:
        hint = "; for one row, add the batch dimension: X.unsqueeze(0) (numpy: X.reshape(1, -1))" if x.ndim == 1 else ""
        raise ValueError(f"`X` must have shape (B, D) with B >= 1 rows to explain, got shape {tuple(x.shape)}{hint}")
    if x.shape[1] < 2:
        raise ValueError(f"`X` must have at least 2 columns (features) to explain, got shape {tuple(x.shape)}")
    check_finite(x, "X")
    return x


def check_names(names: object, d: int) -> Optional[list[str]]:
    """``names`` as D strings, or None.

    Args:
        names: the ``feature_names`` given.
        d: D, the columns of X.

    Returns:
        The names as a list, or None.
    """
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"`feature_names` must be a sequence of {d} names, got {describe(names)}")
    out = [str(n) for n in names]
    if len(out) != d:
        raise ValueError(f"`feature_names` must hold {d} names (one per column of X), got {len(out)}")
    return out


def call_seed(generator: Seed) -> int:
    """The call's int seed: the engine's masks and the values both derive from it.

    Args:
        generator: None (seed 0), an int seed, or a ``torch.Generator`` (one number is drawn from it).

    Returns:
        The seed.
    """
    if generator is None:
        return 0
    if isinstance(generator, torch.Generator):
        return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(f"`generator` must be None, an int seed or a torch.Generator, got {describe(generator)}")
    return generator


def warn_unseen(levels: torch.Tensor, stats: TabularStats, names: Optional[list[str]]) -> None:
    """One warning naming the categorical columns (and rows) of X whose value training never had.

    Args:
        levels: long (B, D) the inputs' levels (-1: a category training never had).
        stats: the training statistics.
        names: the D column names, or None.
    """
    unseen = (levels < 0) & stats.categorical  # (B, D)
    if not bool(unseen.any()):
        return
    cols = unseen.any(0).nonzero().flatten().tolist()
    rows = unseen.any(1).nonzero().flatten().tolist()
    named = f" ({[names[c] for c in cols]})" if names is not None else ""
    warnings.warn(
        f"`X` has values never seen in `training_data` in categorical column(s) {cols}{named} "
        f"(rows {rows}): lime never draws such a value, so every perturbed sample replaces it with a "
        f"training category and the feature is 1 only in sample 0",
        UserWarning,
        stacklevel=user_stacklevel(),
    )


def training_stats(
    training_data: object, x: torch.Tensor, categorical: object, discretizer: str, labels: object
) -> TabularStats:
    """Fitted statistics on X's device, checked against X.

    Args:
        training_data: (N, D) rows, or fitted ``TabularStats``.
        x: (B, D) the rows to explain.
        categorical: the categorical column indices given, or None.
        discretizer: the discretizer's name.
        labels: (N,) training labels, or None.

    Returns:
        The statistics on ``x``'s device.
    """
    d = x.shape[1]
    if isinstance(training_data, TabularStats):
        if categorical is not None or labels is not None or discretizer != training_data.discretizer:
            raise ValueError(
                f"`training_data` is a TabularStats ({training_data!r}): it carries its own "
                f"categorical features, discretizer and labels; pass discretizer="
                f"{training_data.discretizer!r} and no categorical_features / training_labels"
            )
        if training_data.n_columns != d:
            raise ValueError(f"`training_data` must describe {d} columns like `X`, got {training_data.n_columns}")
        return training_data.to(x.device)
    data = as_float64(training_data, "training_data", x.device)
    if data.ndim != 2 or data.shape[1] != d or data.shape[0] == 0:
        raise ValueError(
            f"`training_data` must have shape (N, {d}) (N >= 1 rows, the {d} columns of `X`), "
            f"got shape {tuple(data.shape)}"
        )
    # fit_stats checks both (indices of any integer kind; labels that are numbers or strings)
    return fit_stats(
        data, cast(Optional[Sequence[int]], categorical), discretizer, cast(Optional[torch.Tensor], labels)
    )


def check_perturbed(perturbed: object, x: torch.Tensor) -> torch.Tensor:
    """Explicit sample rows, checked: finite (B, S, D) like ``x``.

    Args:
        perturbed: the sample rows given (numpy arrays are already tensors).
        x: (B, D) the rows to explain.

    Returns:
        ``perturbed`` (B, S, D) on ``x``'s device.
    """
    rows = check_tensor(perturbed, "perturbed")
    if rows.ndim != 3 or rows.shape[0] != x.shape[0] or rows.shape[2] != x.shape[1]:
        raise ValueError(
            f"`perturbed` must have shape ({x.shape[0]}, S, {x.shape[1]}) (S sample rows per row of "
            f"X), got shape {tuple(rows.shape)}"
        )
    check_finite(rows, "perturbed")
    return rows.to(x.device)
