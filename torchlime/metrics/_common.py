"""Shared pieces of the metrics: checks, a call's scoring record, feature rankings, tied ranks, the trapezoid.

Rankings are batched over inputs and targets with one stable sort each; features that do not
exist (f >= F_b, padding) always rank last and are never counted.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Union

import torch

from torchlime._util.checks import check_choice, check_positive_int, check_tensor, describe
from torchlime.engine.explanation import Explanation
from torchlime.stages.forward.model import OutputSelector

FeatureSet = Union[torch.Tensor, Sequence[Sequence[int]]]
BY = ("value", "abs")


class Scoring(NamedTuple):
    """One metric call's options, checked, with the explanation's own output selector and softmax filled in.

    Attributes:
        batch_size: rows per model call, or None (the chunking rule).
        output: the output selector.
        softmax: whether the scores are the outputs' softmax.
        progress: whether a tqdm bar counts the rows.
        desc: the metric's name, the bar's label.
    """

    batch_size: Optional[int]
    output: OutputSelector
    softmax: bool
    progress: bool
    desc: str


def check_explanation(explanation: object, name: str = "explanation") -> Explanation:
    """Raise ``TypeError`` unless ``explanation`` is an ``Explanation``."""
    if not isinstance(explanation, Explanation):
        raise TypeError(f"`{name}` must be a torchlime.Explanation, got {describe(explanation)}")
    return explanation


def target_columns(explanation: Explanation) -> torch.Tensor:
    """Long (B, T): which column of the scored rows each target reads.

    Plain targets read the model's output columns (``explanation.target``); a structured target's
    scorer gives one column per target, in order.

    Raises:
        ValueError: a structured target's explanation without its scorer (loaded from disk, or moved to
            another device): the metrics cannot score its targets; explain again.
    """
    if explanation.target_valid is None:
        return explanation.target
    if explanation.scorer is None:
        raise ValueError(
            "`explanation` of a structured target (torchlime.targets) has lost its scorer (it was loaded or "
            "moved to another device): the metrics need the explanation as its call returned it"
        )
    b, t = explanation.target.shape
    return torch.arange(t, device=explanation.target.device).expand(b, t)


def invalid_to_nan(values: torch.Tensor, explanation: Explanation) -> torch.Tensor:
    """(B, T, ...) metric values with NaN for the padded targets of a structured target."""
    if explanation.target_valid is None:
        return values
    valid = explanation.target_valid.to(values.device).view(*explanation.target_valid.shape, *([1] * (values.ndim - 2)))
    return torch.where(valid, values, torch.nan)


def check_bool(value: object, name: str) -> bool:
    """Raise ``TypeError`` unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a bool, got {describe(value)}")
    return value


def check_optional_int(value: object, name: str, minimum: int = 1) -> Optional[int]:
    """None, or an int >= ``minimum`` (``TypeError`` / ``ValueError`` otherwise)."""
    return None if value is None else check_positive_int(value, name, minimum)


def check_by(by: object) -> str:
    """``"value"`` (largest coefficient first) or ``"abs"`` (largest magnitude first)."""
    return check_choice(by, "by", BY)


def ranking_key(explanation: Explanation, by: str = "value") -> torch.Tensor:
    """(B, T, F) the key features are ranked by (descending): the coefficients or their magnitudes."""
    return explanation.coef.abs() if by == "abs" else explanation.coef


def feature_ranks(key: torch.Tensor, valid: torch.Tensor, descending: bool = True) -> torch.Tensor:
    """Position of every feature in its (input, target) ranking.

    Args:
        key: (B, T, F) scores.
        valid: bool (B, F) features that exist.
        descending: largest key first (True) or smallest first.

    Returns:
        long (B, T, F): 0 for the first feature; ties keep the lower feature index first
        (a stable sort); padded features rank after every valid one.

    Example:
        >>> feature_ranks(torch.tensor([[[0.1, 0.5, 0.5]]]), torch.tensor([[True, True, False]])).tolist()
        [[[1, 0, 2]]]
    """
    k = (key if descending else -key).double()
    k = k.masked_fill(~valid.unsqueeze(1), float("-inf"))
    order = k.argsort(dim=-1, descending=True, stable=True)
    positions = torch.arange(k.shape[-1], device=k.device).expand_as(order)
    return torch.empty_like(order).scatter_(-1, order, positions)


def top_k_mask(key: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Bool (B, T, F): the min(k, F_b) valid features of largest key (ties: lower index first)."""
    return (feature_ranks(key, valid) < k) & valid.unsqueeze(1)


def average_ranks(key: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Ascending 1-based ranks with ties averaged, over the valid features only.

    Args:
        key: (..., F) finite scores.
        valid: bool, broadcastable to ``key`` (e.g. (..., F) or a 0-d True).

    Returns:
        ``(ranks, ties)``: float64 (..., F) ranks (valid features get 1..F_b, the mean
        position for tied values; padded features get ranks above F_b) and float64 (...)
        the tie term Σ_groups (t³ - t) over the groups of t tied valid values.

    Example:
        >>> r, t = average_ranks(torch.tensor([3.0, 1.0, 3.0, 2.0]), torch.tensor(True))
        >>> r.tolist(), float(t)
        ([3.5, 1.0, 3.5, 2.0], 6.0)
    """
    valid = valid.expand(key.shape)
    v = key.double().masked_fill(~valid, float("inf"))
    v, order = v.sort(dim=-1, stable=True)
    n = v.shape[-1]
    pos = torch.arange(n, device=v.device).expand_as(v)
    change = v[..., 1:] != v[..., :-1]
    true = torch.ones_like(change[..., :1])
    start = torch.where(torch.cat((true, change), -1), pos, 0).cummax(-1).values
    end = torch.where(torch.cat((change, true), -1), pos, n - 1).flip(-1).cummin(-1).values.flip(-1)
    mean_rank = (start + end).double() / 2 + 1
    run = (end - start + 1).double()
    ranks = torch.empty_like(mean_rank).scatter_(-1, order, mean_rank)
    run = torch.empty_like(run).scatter_(-1, order, run)
    ties = ((run * run - 1) * valid).sum(-1)  # each of the t members of a group adds t² - 1: t³ - t a group
    return ranks, ties


def trapezoid(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Area under y(x) by the trapezoid rule along the last dim: Σ_j (x_{j+1} - x_j)(y_j + y_{j+1}) / 2.

    Example:
        >>> float(trapezoid(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])))
        0.5
    """
    return ((x[..., 1:] - x[..., :-1]) * (y[..., 1:] + y[..., :-1]) / 2).sum(-1)


def feature_set(value: object, explanation: Explanation, name: str) -> torch.Tensor:
    """Bool (B, F) on the explanation's device from a bool (B, F) tensor or B lists of feature indices.

    Features that do not exist (f >= F_b) are dropped from a tensor; an index list naming one
    raises.

    Raises:
        TypeError / ValueError: naming ``name``, what was expected and what came.
    """
    b, _, f = explanation.coef.shape
    dev = explanation.coef.device
    valid = explanation.valid
    if isinstance(value, torch.Tensor):
        if value.dtype != torch.bool or tuple(value.shape) != (b, f):
            raise ValueError(
                f"`{name}` must be a bool tensor ({b}, {f}) over the features or {b} lists of "
                f"feature indices, got {describe(value)}"
            )
        return value.to(dev) & valid
    if not isinstance(value, (list, tuple)) or len(value) != b:
        raise TypeError(
            f"`{name}` must be a bool tensor ({b}, {f}) or a list of {b} lists of feature indices, "
            f"got {describe(value)}"
        )
    counts = explanation.n_features.tolist()
    out = torch.zeros(b, f, dtype=torch.bool)
    for row, (ids, n) in enumerate(zip(value, counts)):  # host data: the user's own lists
        ids = list(ids) if isinstance(ids, (list, tuple, range)) else ids
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise TypeError(f"`{name}[{row}]` must be a list of int feature indices, got {describe(ids)}")
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            raise ValueError(
                f"`{name}[{row}]` must hold feature indices in [0, {n}) (input {row} has {n} features), got {bad}"
            )
        out[row, ids] = True
    return out.to(dev)


def given_perturbations(perturbations: object, inputs: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Check explicit perturbations (B, n, *shape) of ``inputs`` (B, *shape).

    Returns n and the perturbations as (B·n, *shape) in the inputs' device and dtype.

    Raises:
        TypeError / ValueError: not a tensor, or of the wrong shape (named).
    """
    perturbations = check_tensor(perturbations, "perturbations")
    b, shape = inputs.shape[0], tuple(inputs.shape[1:])
    if perturbations.ndim != inputs.ndim + 1 or perturbations.shape[0] != b or tuple(perturbations.shape[2:]) != shape:
        raise ValueError(
            f"`perturbations` must have shape ({b}, n, {', '.join(map(str, shape))}), got {tuple(perturbations.shape)}"
        )
    n = perturbations.shape[1]
    return n, perturbations.to(device=inputs.device, dtype=inputs.dtype).reshape(b * n, *shape)
