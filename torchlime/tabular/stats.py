"""Training statistics of tabular data, as lime's ``LimeTabularExplainer`` keeps them.

The public API that ``Tabular`` and the lime layer (``torchlime.compat.lime``) read.
Every column gets *levels*: the bins of a continuous column (``_discretize``), or the sorted
distinct values of a categorical one. Per column: mean and scale (the standard deviation,
``StandardScaler``'s, 1 for constant columns), per level the training frequency, and for
bins the training mean, standard deviation (+1e-11, as lime) and range ``[lo, hi]`` of the
values inside (lime's ``undiscretize``: the lowest bin starts at the column's minimum, the
highest ends at its maximum). ``gaussian_draws`` draws lime's undiscretised neighbourhood from them.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Iterable, Literal, Optional, Sequence, SupportsIndex, cast

import numpy as np
import torch

from torchlime._util.checks import check_choice, check_finite, describe
from torchlime.stages.sampling import Rows, make_key
from torchlime.tabular._discretize import DISCRETIZERS, entropy_bins, quantile_bins
from torchlime.typing import Seed

__all__ = ["TabularStats", "fit_stats", "gaussian_draws", "DiscretizerName"]


@dataclass(frozen=True, eq=False)
class TabularStats:
    """What an explanation needs of the training data (all on one device, float64).

    Attributes:
        mean: (D,) column mean.
        scale: (D,) column standard deviation (constant columns: 1).
        categorical: bool (D,) categorical columns.
        boundaries: (D, Q) bin boundaries of continuous columns, +inf padded (categorical rows: +inf).
        values: (D, V) the distinct values of categorical columns, NaN padded (continuous rows: NaN).
        n_levels: long (D,) bins (continuous) or distinct values (categorical) per column.
        freq: (D, V) training frequency of every level (0 beyond ``n_levels``).
        level_mean: (D, V) mean of the training values in every bin.
        level_std: (D, V) standard deviation (+1e-11) of the training values in every bin.
        level_lo: (D, V) lowest value of every bin's range (the lowest bin: the column's minimum).
        level_hi: (D, V) highest value of every bin's range (the highest bin: the column's maximum).
        discretizer: the discretizer's name.
        n_rows: N, the training rows.
    """

    mean: torch.Tensor
    scale: torch.Tensor
    categorical: torch.Tensor
    boundaries: torch.Tensor
    values: torch.Tensor
    n_levels: torch.Tensor
    freq: torch.Tensor
    level_mean: torch.Tensor
    level_std: torch.Tensor
    level_lo: torch.Tensor
    level_hi: torch.Tensor
    discretizer: str
    n_rows: int

    @property
    def n_columns(self) -> int:
        """D, the number of columns."""
        return int(self.mean.shape[0])

    def levels(self, x: torch.Tensor) -> torch.Tensor:
        """Long (..., D) level of every value of x (..., D).

        The level is its bin, or its category's index (-1: a category unseen in training).
        Categories are compared in x's floating dtype (the training values cast to it), so
        float32 rows find the levels of float64 training data (0.1 is not exact in float32).

        Args:
            x: (..., D) rows, on any device.

        Returns:
            long (..., D) levels, on the statistics' device.
        """
        x = x.to(self.mean.device)
        flat = x.reshape(-1, self.n_columns)
        wide = flat.to(self.mean.dtype)
        bins = torch.searchsorted(self.boundaries, wide.T.contiguous()).T  # (M, D): #boundaries < x
        if flat.is_floating_point():
            hit = flat.unsqueeze(-1) == self.values.to(flat.dtype).unsqueeze(0)  # (M, D, V); NaN never matches
        else:
            hit = wide.unsqueeze(-1) == self.values.unsqueeze(0)
        cat = torch.where(hit.any(-1), hit.long().argmax(-1), -1)
        return torch.where(self.categorical, cat, bins).reshape(x.shape)

    def to(self, device: torch.device) -> TabularStats:
        """The same statistics on ``device``.

        Args:
            device: where the tensors go.
        """
        moved = {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in vars(self).items()}
        return TabularStats(**moved)  # type: ignore[arg-type]  # the fields of self, moved

    def __repr__(self) -> str:
        return (
            f"TabularStats({self.n_rows} rows, {self.n_columns} columns, "
            f"{int(self.categorical.sum())} categorical, discretizer={self.discretizer!r})"
        )


def as_float64(value: object, name: str, device: Optional[torch.device] = None) -> torch.Tensor:
    """A float64 tensor (on ``device``) from a tensor or an array of real numbers.

    Raises:
        TypeError: anything else (names the argument and what came).
    """
    if isinstance(value, torch.Tensor):
        t = value
    else:
        try:
            t = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"`{name}` must be a tensor or an array of numbers, got {describe(value)}") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"`{name}` must hold real numbers, got dtype {t.dtype}")
    return t.to(device=t.device if device is None else device, dtype=torch.float64)


def _column_index(c: object) -> int:
    """An int column index from an int, a numpy integer or a one-value integer tensor (not a bool)."""
    if isinstance(c, (bool, np.bool_)) or (isinstance(c, torch.Tensor) and c.dtype == torch.bool):
        raise TypeError(f"`categorical_features` must hold int column indices, got {describe(c)}")
    try:
        return operator.index(cast(SupportsIndex, c))  # a TypeError, caught here, where it is not
    except TypeError:
        raise TypeError(f"`categorical_features` must hold int column indices, got {describe(c)}") from None


def check_categorical(categorical_features: object, n_columns: int) -> list[int]:
    """Sorted distinct column indices, each in [0, D).

    From a sequence of ints, numpy integers, a 1-D integer array or a 1-D integer tensor (None: no
    categorical column).

    Raises:
        TypeError: not a sequence, or an index that is not an integer. ValueError: an array or
            tensor that is not 1-D, an index out of range.
    """
    value = categorical_features
    if value is None:
        return []
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if value.ndim != 1:
            raise ValueError(f"`categorical_features` must be a 1-D sequence of column indices, got {describe(value)}")
        integer = (
            not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool
            if isinstance(value, torch.Tensor)
            else value.dtype.kind in "iu"
        )
        if not integer:
            raise TypeError(f"`categorical_features` must hold int column indices, got {describe(value)}")
        items = [int(c) for c in value.tolist()]
    else:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(
                f"`categorical_features` must be a sequence of int column indices (e.g. [0]), got {describe(value)}"
            )
        items = [_column_index(c) for c in cast(Iterable[object], value)]  # it has ``__iter__``
    bad = [c for c in items if not 0 <= c < n_columns]
    if bad:
        raise ValueError(
            f"`categorical_features` must hold column indices in [0, {n_columns}) (the data has "
            f"{n_columns} columns), got {bad}"
        )
    return sorted(set(items))


def label_codes(training_labels: object, device: torch.device) -> torch.Tensor:
    """(N,) class labels as a tensor on ``device``.

    A real tensor or array as it is; strings (or other sortable objects) as the index of their value
    among the sorted distinct values.

    Raises:
        TypeError: complex labels, or labels that are neither numbers nor sortable values.

    Example:
        >>> label_codes(["yes", "no", "yes"], torch.device("cpu")).tolist()
        [1, 0, 1]
    """
    if isinstance(training_labels, torch.Tensor):
        value = training_labels
    else:
        try:
            arr = np.asarray(training_labels)
        except (TypeError, ValueError):
            raise TypeError(
                f"`training_labels` must hold class labels (numbers or strings), got {describe(training_labels)}"
            ) from None
        if arr.dtype.kind in "biuf":
            value = torch.as_tensor(arr)
        elif arr.dtype.kind in "USO":
            try:
                codes = np.unique(arr.reshape(-1), return_inverse=True)[1]
            except TypeError:
                raise TypeError(
                    f"`training_labels` must hold class labels of one kind (numbers or strings) that "
                    f"sort, got {describe(training_labels)}"
                ) from None
            value = torch.as_tensor(codes.reshape(-1).astype(np.int64))
        else:
            raise TypeError(f"`training_labels` must hold class labels (numbers or strings), got {describe(arr)}")
    if value.is_complex():
        raise TypeError(f"`training_labels` must hold class labels (numbers or strings), got {describe(value)}")
    return value.to(device).reshape(-1)


def fit_stats(
    training_data: object,
    categorical_features: Optional[Sequence[int]] = None,
    discretizer: str = "quartile",
    training_labels: object = None,
) -> TabularStats:
    """Training statistics (``TabularStats``) of tabular data, on its device.

    Args:
        training_data: (N, D) finite training rows (tensor or array; statistics on its device).
        categorical_features: indices of categorical columns (values compared exactly): ints,
            numpy integers, a 1-D integer array or tensor.
        discretizer: "quartile", "decile" or "entropy" (bins of the continuous columns).
        training_labels: (N,) class labels, needed by "entropy": numbers or strings (the classes
            are the distinct values).

    Returns:
        ``TabularStats``: means, scales, levels, frequencies and bin statistics.

    Raises:
        TypeError / ValueError: data that is not (N, D) real and finite, categorical indices that
            are not integers or out of range, an unknown discretizer, "entropy" without labels,
            labels that are not numbers or strings, or of the wrong length.

    Example:
        >>> stats = fit_stats(torch.arange(8.0).view(8, 1).repeat(1, 2), categorical_features=[1])
        >>> stats.boundaries[0].tolist(), stats.n_levels.tolist(), stats.freq[0].tolist()
        ([1.75, 3.5, 5.25], [4, 8], [0.25, 0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0])
    """
    check_choice(discretizer, "discretizer", DISCRETIZERS)
    data = as_float64(training_data, "training_data")
    if data.ndim != 2 or data.shape[0] == 0:
        raise ValueError(f"`training_data` must have shape (N, D) with N >= 1 rows, got shape {tuple(data.shape)}")
    check_finite(data, "training_data")
    n, d = data.shape
    dev = data.device
    categorical = torch.zeros(d, dtype=torch.bool, device=dev)
    categorical[check_categorical(categorical_features, d)] = True
    if discretizer == "entropy":
        if training_labels is None:
            raise ValueError(
                "discretizer='entropy' needs `training_labels` (the class of every training row, "
                "lime's EntropyDiscretizer grows a tree on them), got None"
            )
        labels = label_codes(training_labels, dev)
        if labels.shape[0] != n:
            raise ValueError(
                f"`training_labels` must have one label per training row ({n}), got shape {tuple(labels.shape)}"
            )
        bounds, n_bounds = entropy_bins(data, labels)
    else:
        bounds, n_bounds = quantile_bins(data, discretizer)
    bounds = bounds.masked_fill(categorical.unsqueeze(1), math.inf)
    mean = data.mean(0)
    var = data.var(0, correction=0)
    eps = torch.finfo(torch.float64).eps  # StandardScaler's test of a constant column, then scale 1
    constant = var <= n * eps * var + (n * mean * eps) ** 2
    scale = torch.where(constant, torch.ones_like(var), var.sqrt())

    # categorical columns: their distinct values (a short loop over those columns only)
    cat_cols = categorical.nonzero().flatten().tolist()
    distinct = [torch.unique(data[:, f]) for f in cat_cols]
    n_levels = torch.where(categorical, 0, n_bounds + 1)
    for f, v in zip(cat_cols, distinct):
        n_levels[f] = v.numel()
    width = int(n_levels.max())
    values = torch.full((d, width), math.nan, dtype=torch.float64, device=dev)
    for f, v in zip(cat_cols, distinct):
        values[f, : v.numel()] = v
    empty = torch.zeros(d, width, dtype=torch.float64, device=dev)
    e = empty  # freq, level_mean, level_std, level_lo, level_hi: filled below
    stats = TabularStats(mean, scale, categorical, bounds, values, n_levels, e, e, e, e, e, discretizer, n)
    level = stats.levels(data)  # (N, D), never -1 on the training data
    ones = torch.ones_like(data)
    count = torch.zeros(d, width, dtype=torch.float64, device=dev).scatter_add_(1, level.T, ones.T)
    total = torch.zeros_like(count).scatter_add_(1, level.T, data.T)
    level_mean = torch.where(count > 0, total / count.clamp_min(1), 0.0)
    dev2 = (data - level_mean.gather(1, level.T).T) ** 2
    bin_var = torch.zeros_like(count).scatter_add_(1, level.T, dev2.T) / count.clamp_min(1)
    level_std = bin_var.sqrt() + 1e-11  # lime's std of a bin, +1e-11
    # bin k spans (q_k, q_{k+1}]; lime's range: [min, q_1], [q_1, q_2], ..., [q_m, max]
    k = torch.arange(width, device=dev)
    q = torch.cat((bounds, torch.full((d, 1), math.inf, dtype=torch.float64, device=dev)), 1)
    last = q.shape[1] - 1
    lo = torch.where(k == 0, data.min(0).values.unsqueeze(1), q.gather(1, (k - 1).clamp(0, last).expand(d, -1)))
    hi = torch.where(
        k.unsqueeze(0) >= n_bounds.unsqueeze(1),
        data.max(0).values.unsqueeze(1),
        q.gather(1, k.clamp_max(last).expand(d, -1)),
    )
    return TabularStats(
        mean, scale, categorical, bounds, values, n_levels, count / n, level_mean, level_std, lo, hi, discretizer, n
    )


#: the discretizers of continuous columns
DiscretizerName = Literal["quartile", "decile", "entropy"]


_GAUSS, _CATEGORY = 104, 105  # hash streams of ``gaussian_draws`` (the sampler's are 101..103)


def gaussian_draws(
    stats: TabularStats,
    x: torch.Tensor,
    n_samples: int,
    generator: Seed,
    *,
    around_instance: bool = False,
    ids: Optional[torch.Tensor] = None,
    fixed: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lime's undiscretised neighbourhood of every row of x: float64 (B, S, D) values, sample 0 the row.

    A continuous column f takes ``c_f + scale_f · z``, z ~ N(0, 1), c the training mean (lime's
    default) or the row's own value (``around_instance``, lime's ``sample_around_instance``); a
    categorical column one of its training values, drawn by training frequency. Every row draws
    from a generator of its own on the statistics' device, seeded by a counter-based hash of the
    call's key (``make_key``) and the row's id, so a row's samples do not depend on the other rows.

    Args:
        stats: the training statistics (``fit_stats``).
        x: (B, D) the rows (any float dtype; moved to the statistics' device).
        n_samples: S >= 1, samples per row (the row itself included).
        generator: an int seed, None (seed 0) or a ``torch.Generator``.
        around_instance: centre the continuous columns on the row instead of the training mean.
        ids: long (B,) every row's id (its randomness; default 0..B-1).
        fixed: optional bool (B, D) columns that keep the row's value in every sample (lime leaves
            the zero entries of a sparse row at zero).

    Returns:
        ``(values, z)`` on the statistics' device: float64 (B, S, D) the sample rows (sample 0 the row),
        and float32 (B, S, D) the normals z of every column (a continuous column's value is
        ``c + scale · z``; z means nothing for categorical or fixed columns, and row 0 of z is not the
        row's), for callers that need the scaled rows ``(values - c) / scale`` without computing them again.

    Example:
        >>> from torchlime.tabular import fit_stats
        >>> stats = fit_stats(torch.arange(20.0).view(10, 2), categorical_features=[1])
        >>> rows, _ = gaussian_draws(stats, torch.tensor([[3.0, 4.0]]), 500, 0)
        >>> rows.shape, rows[0, 0].tolist(), set(rows[0, 1:, 1].tolist()) <= set(range(1, 20, 2))
        (torch.Size([1, 500, 2]), [3.0, 4.0], True)
    """
    dev = stats.mean.device
    x = x.to(device=dev, dtype=torch.float64)
    b, d = x.shape
    ids = torch.arange(b, device=dev) if ids is None else ids.to(dev).long()
    keys = Rows(make_key(generator, dev), ids, ids * 0, ids * 0 + d, d)
    seeds = [hi << 32 | lo for hi, lo in zip(keys.input_hash(_GAUSS).tolist(), keys.input_hash(_CATEGORY).tolist())]
    cat = stats.categorical.nonzero().flatten()
    cum = stats.freq[cat].cumsum(-1)  # (C, V): a category by inverse CDF of its training frequencies
    out = torch.empty(b, n_samples, d, dtype=torch.float64, device=dev)  # filled row by row below
    z = torch.empty(b, n_samples, d, device=dev)
    for i, seed in enumerate(seeds):  # a generator per row; the samples of a row at once
        own = torch.Generator(device=dev)
        own.manual_seed(seed)
        torch.randn(n_samples, d, generator=own, device=dev, out=z[i])
        torch.addcmul(x[i] if around_instance else stats.mean, stats.scale, z[i], out=out[i])
        if cat.numel():
            t = torch.rand(n_samples, cat.numel(), generator=own, device=dev, dtype=torch.float64) * cum[:, -1]
            level = torch.minimum((cum <= t.unsqueeze(-1)).sum(-1), stats.n_levels[cat] - 1)
            out[i, :, cat] = stats.values[cat].T.gather(0, level)  # the values (V, C) by level
    if fixed is not None:
        out = torch.where(fixed.to(dev).unsqueeze(1), x.unsqueeze(1), out)
    out[:, 0] = x
    return out, z
