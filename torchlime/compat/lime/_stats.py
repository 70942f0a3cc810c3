"""Training statistics from lime's own objects: a ``training_data_stats`` dict or a lime discretizer.

lime keeps, for every discretized column, the bin boundaries and each bin's mean, standard
deviation, minimum and maximum; and for every column treated as categorical the values and their
frequencies. ``stats_from_lime`` writes them into torchlime's ``TabularStats``, so that the engine
samples exactly the bins and values lime would.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime.tabular.stats import TabularStats


def _per_column(source: object, key: str) -> Mapping[int, Sequence[float]]:
    """``source[key]`` of a stats dict, or the attribute of a lime discretizer."""
    value = source.get(key) if isinstance(source, Mapping) else getattr(source, key, None)
    if value is None:
        raise ValueError(f"lime's statistics lack {key!r} (a training_data_stats dict needs {key!r} per column)")
    return {int(k): list(v) for k, v in dict(value).items()}


def boundaries_of(source: object) -> dict[int, list[float]]:
    """Bin boundaries per discretized column (``bins`` of a stats dict; a discretizer's ``mins`` after the first).

    Args:
        source: a ``training_data_stats`` dict or a lime discretizer.

    Returns:
        column -> its sorted boundaries.
    """
    if isinstance(source, Mapping):
        return {int(k): [float(b) for b in v] for k, v in dict(source["bins"]).items()}
    return {f: [float(b) for b in v[1:]] for f, v in _per_column(source, "mins").items()}


def stats_from_lime(data: NDArray[np.float64], categorical: Sequence[int], source: object, name: str) -> TabularStats:
    """``TabularStats`` holding lime's statistics.

    Args:
        data: (N, D) training rows (the column scales are lime's ``StandardScaler``'s of them).
        categorical: the columns lime treats as categories (not discretized).
        source: a ``training_data_stats`` dict ("bins", "means", "stds", "mins", "maxs",
            "feature_values", "feature_frequencies") or a lime discretizer object.
        name: the discretizer's name, kept in the statistics.

    Returns:
        The statistics (float64, on the CPU).
    """
    n, d = data.shape
    bounds = boundaries_of(source)
    means, stds = _per_column(source, "means"), _per_column(source, "stds")
    mins, maxs = _per_column(source, "mins"), _per_column(source, "maxs")
    cats = sorted(set(int(c) for c in categorical) - set(bounds))
    distinct = {f: np.unique(data[:, f]) for f in cats}
    n_levels = [len(bounds[f]) + 1 if f in bounds else len(distinct.get(f, [])) for f in range(d)]
    width = max(max(n_levels), 1)
    q = max((len(b) for b in bounds.values()), default=0)
    boundaries = torch.full((d, max(q, 1)), math.inf, dtype=torch.float64)
    values = torch.full((d, width), math.nan, dtype=torch.float64)
    freq, level_mean, level_std, lo, hi = (torch.zeros(d, width, dtype=torch.float64) for _ in range(5))
    for f, b in bounds.items():
        k = len(b) + 1
        boundaries[f, : len(b)] = torch.tensor(b, dtype=torch.float64)
        level_mean[f, :k] = torch.tensor(means[f][:k], dtype=torch.float64)
        level_std[f, :k] = torch.tensor(stds[f][:k], dtype=torch.float64)
        lo[f, :k] = torch.tensor(mins[f][:k], dtype=torch.float64)
        hi[f, :k] = torch.tensor(maxs[f][:k], dtype=torch.float64)
        freq[f, :k] = _frequencies(source, f, k, data, b)
    for f, v in distinct.items():
        values[f, : len(v)] = torch.from_numpy(v.astype(np.float64))
        freq[f, : len(v)] = torch.tensor([(data[:, f] == x).mean() for x in v], dtype=torch.float64)
    mean = torch.from_numpy(data.mean(0).astype(np.float64))
    std = torch.from_numpy(data.std(0).astype(np.float64))
    scale = torch.where(std > 0, std, torch.ones_like(std))
    is_cat = torch.zeros(d, dtype=torch.bool)
    is_cat[cats] = True
    levels = torch.tensor(n_levels, dtype=torch.long)
    return TabularStats(mean, scale, is_cat, boundaries, values, levels, freq, level_mean, level_std, lo, hi, name, n)


def _frequencies(source: object, f: int, k: int, data: NDArray[np.float64], bounds: Sequence[float]) -> torch.Tensor:
    """(k,) training frequency of every bin of column ``f``: the stats dict's, else counted on ``data``."""
    out = torch.zeros(k, dtype=torch.float64)
    if isinstance(source, Mapping):
        vals = [int(v) for v in source["feature_values"][f]]
        counts = np.asarray(source["feature_frequencies"][f], dtype=np.float64)
        out[vals] = torch.from_numpy(counts / counts.sum())
        return out
    level = np.searchsorted(np.asarray(bounds), data[:, f])  # lime's lambdas: searchsorted(qts, x)
    return torch.from_numpy(np.bincount(level, minlength=k)[:k] / len(level)).to(torch.float64)


#: the keys lime's ``validate_training_data_stats`` asks of a ``training_data_stats`` dict
_STATS_KEYS = ("means", "mins", "maxs", "stds", "feature_values", "feature_frequencies")


def check_stats_keys(stats: Mapping[str, object], binned: bool) -> None:
    """Refuse a ``training_data_stats`` dict that lacks keys, naming every one (lime's check, and "bins").

    Args:
        stats: the dict.
        binned: the columns are discretized from it (its "bins" are needed too).

    Raises:
        ValueError: keys missing.
    """
    wanted = _STATS_KEYS + (("bins",) if binned else ())
    missing = [k for k in wanted if k not in stats]
    if missing:
        raise ValueError(f"`training_data_stats` lacks the keys {missing} (it needs {list(wanted)})")
