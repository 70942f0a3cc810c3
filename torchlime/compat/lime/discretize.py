"""lime's discretizers (``lime.discretize``): bins of the continuous columns, on torchlime's statistics.

``QuartileDiscretizer``, ``DecileDiscretizer`` and ``EntropyDiscretizer`` take lime's arguments
``(data, categorical_features, feature_names, labels=None, random_state=None)`` and keep what lime's
keep (``names``, ``lambdas``, ``means``, ``stds``, ``mins``, ``maxs``, ``to_discretize``,
``random_state``); ``discretize`` maps values to bin indices and ``undiscretize`` draws a value in
each bin from a normal truncated to it, with the discretizer's own ``random_state``. Passed as
``LimeTabularExplainer(..., discretizer=obj)`` they set the bins and the bins' statistics the
explainer samples, and their ``random_state`` takes part in its seed, as it does in lime.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime._util.checks import describe
from torchlime.compat.lime._common import RandomState, random_state_from
from torchlime.tabular.stats import fit_stats

__all__ = ["BaseDiscretizer", "QuartileDiscretizer", "DecileDiscretizer", "EntropyDiscretizer", "StatsDiscretizer"]


def _searchsorted(qts: NDArray[np.float64]) -> Callable[[NDArray[np.float64]], NDArray[np.intp]]:
    """Lime's bin of a value: the number of boundaries below it (``searchsorted`` on the left)."""
    return lambda x: np.asarray(np.searchsorted(qts, x))


class BaseDiscretizer:
    """lime's ``BaseDiscretizer``: subclasses give ``bins``, the boundaries of every continuous column.

    Attributes:
        to_discretize: the continuous columns (those not in ``categorical_features``).
        names: column -> lime's name of each bin ("x <= 1.00", "1.00 < x <= 2.00", "x > 2.00").
        lambdas: column -> the function mapping values to bin indices.
        means, stds, mins, maxs: column -> per bin: the training mean, standard deviation (+1e-11),
            lower and upper edge (the training minimum and maximum at the ends).
        random_state: the generator ``undiscretize`` draws from (None: numpy's global one).

    Args:
        data: (N, D) training rows.
        categorical_features: the columns left as they are.
        feature_names: D names.
        labels: (N,) class labels (the entropy discretizer's).
        random_state: None, an int or a ``numpy.random.RandomState``.
        data_stats: lime's dict with "means", "stds", "mins" and "maxs" per column, used instead of
            statistics of ``data``.

    Raises:
        TypeError / ValueError: ``data`` that is not an (N, D) numeric array, names of the wrong length.
    """

    def __init__(
        self,
        data: object,
        categorical_features: Sequence[int],
        feature_names: Sequence[object],
        labels: object = None,
        random_state: object = None,
        data_stats: Optional[dict[str, dict[int, list[float]]]] = None,
    ) -> None:
        arr = np.asarray(data)
        if arr.ndim != 2 or arr.dtype.kind not in "biuf" or arr.shape[0] < 1:
            raise TypeError(f"`data` must be an (N, D) numeric array with N >= 1, got {describe(data)}")
        arr = arr.astype(np.float64)
        if len(feature_names) != arr.shape[1]:
            raise ValueError(f"`feature_names` must name the {arr.shape[1]} columns, got {len(feature_names)} names")
        cats = {int(c) for c in categorical_features}
        self.to_discretize = [f for f in range(arr.shape[1]) if f not in cats]
        self.data_stats = data_stats
        self.random_state: RandomState = random_state_from(random_state)
        self.names: dict[int, list[str]] = {}
        self.lambdas: dict[int, Callable[[NDArray[np.float64]], NDArray[np.intp]]] = {}
        self.means: dict[int, list[float]] = {}
        self.stds: dict[int, list[float]] = {}
        self.mins: dict[int, list[float]] = {}
        self.maxs: dict[int, list[float]] = {}
        bins = [np.unique(np.asarray(b, dtype=np.float64)) for b in self.bins(arr, labels)]
        if data_stats:
            for key in ("means", "stds", "mins", "maxs"):
                setattr(self, key, {int(k): list(v) for k, v in data_stats[key].items()})
        for f, qts in zip(self.to_discretize, bins):
            name = str(feature_names[f])
            self.names[f] = [f"{name} <= {qts[0]:.2f}"]
            self.names[f] += [f"{lo:.2f} < {name} <= {hi:.2f}" for lo, hi in zip(qts[:-1], qts[1:])]
            self.names[f].append(f"{name} > {qts[-1]:.2f}")
            self.lambdas[f] = _searchsorted(qts)
            if data_stats:
                continue
            column = arr[:, f]
            level = self.lambdas[f](column)
            chosen = [column[level == k] for k in range(len(qts) + 1)]
            self.means[f] = [float(c.mean()) if len(c) else 0.0 for c in chosen]
            self.stds[f] = [(float(c.std()) if len(c) else 0.0) + 1e-11 for c in chosen]
            self.mins[f] = [float(column.min()), *qts.tolist()]
            self.maxs[f] = [*qts.tolist(), float(column.max())]

    def bins(self, data: NDArray[np.float64], labels: object) -> list[NDArray[np.float64]]:
        """The boundaries of every column of ``to_discretize`` (to override).

        Args:
            data: (N, D) training rows.
            labels: (N,) class labels, or None.

        Returns:
            One array of boundaries per column of ``to_discretize``.
        """
        raise NotImplementedError("a discretizer must override bins(data, labels)")

    def discretize(self, data: NDArray[np.float64]) -> NDArray[np.float64]:
        """The bin index of every discretized value (the other columns as they are).

        Args:
            data: (N, D) rows or one (D,) row.

        Returns:
            A copy of ``data`` with bin indices in the discretized columns.
        """
        out = np.array(data, copy=True)
        for f, to_bin in self.lambdas.items():
            if out.ndim == 1:
                out[f] = int(to_bin(out[f]))
            else:
                out[:, f] = to_bin(out[:, f]).astype(int)
        return out

    def get_undiscretize_values(self, feature: int, values: NDArray[np.integer]) -> NDArray[np.float64]:
        """Values drawn in the bins ``values`` of column ``feature``: the bin's normal, truncated to the bin.

        Args:
            feature: the column.
            values: bin indices.

        Returns:
            One value per index (a bin of one value gives its standardised edge, as lime).
        """
        idx = np.asarray(values, dtype=np.intp)
        mins, maxs = np.asarray(self.mins[feature])[idx], np.asarray(self.maxs[feature])[idx]
        means, stds = np.asarray(self.means[feature])[idx], np.asarray(self.stds[feature])[idx]
        low, high = (mins - means) / stds, (maxs - means) / stds
        out = np.array(low, dtype=np.float64, copy=True)
        draw = low != high
        if draw.any():
            u = self._uniform(int(draw.sum()))
            cdf_lo = torch.special.ndtr(torch.from_numpy(low[draw]))
            cdf_hi = torch.special.ndtr(torch.from_numpy(high[draw]))
            z = torch.special.ndtri(cdf_lo + torch.from_numpy(u) * (cdf_hi - cdf_lo)).numpy()
            out[draw] = np.clip(z, low[draw], high[draw]) * stds[draw] + means[draw]
        return out

    def _uniform(self, n: int) -> NDArray[np.float64]:
        rs = self.random_state
        return np.asarray(np.random.uniform(size=n) if rs is None else rs.uniform(size=n), dtype=np.float64)

    def undiscretize(self, data: NDArray[np.float64]) -> NDArray[np.float64]:
        """Values in the bins of ``data`` (its discretized columns hold bin indices), drawn at random.

        Args:
            data: (N, D) or (D,) discretized rows.

        Returns:
            A copy with a value drawn in every bin.
        """
        out = np.array(data, dtype=np.float64, copy=True)
        for f in self.means:
            if out.ndim == 1:
                out[f] = self.get_undiscretize_values(f, np.asarray([out[f]], dtype=np.intp))[0]
            else:
                out[:, f] = self.get_undiscretize_values(f, out[:, f].astype(np.intp))
        return out


class StatsDiscretizer(BaseDiscretizer):
    """lime's ``StatsDiscretizer``: the bins of a ``training_data_stats`` dict ("bins" per column).

    Args:
        data: (N, D) rows (their columns only; the statistics come from ``data_stats``).
        categorical_features: the columns left as they are.
        feature_names: D names.
        labels: unused.
        random_state: None, an int or a ``numpy.random.RandomState``.
        data_stats: lime's dict with "bins", "means", "stds", "mins" and "maxs" per column.

    Raises:
        ValueError: ``data_stats`` without "bins".
    """

    def bins(self, data: NDArray[np.float64], labels: object) -> list[NDArray[np.float64]]:
        """The given boundaries of every column of ``to_discretize`` (``data_stats["bins"]``).

        Args:
            data: (N, D) training data.
            labels: (N,) class labels, or None.

        Returns:
            One increasing array of boundaries per column of ``to_discretize``.

        Raises:
            ValueError: ``data_stats`` without "bins".
        """
        given = self.data_stats
        if not given or "bins" not in given:
            raise ValueError(f"`data_stats` must hold 'bins' per column, got {describe(given)}")
        return [np.asarray(given["bins"][f], dtype=np.float64) for f in self.to_discretize]


_FITTED_ARGS = """

    Args:
        data: (N, D) training data.
        categorical_features: the categorical columns (never binned).
        feature_names: D names.
        labels: {labels}
        random_state: None, an int or a ``numpy.random.RandomState`` (the draws of ``undiscretize``).
        data_stats: lime's dict of "means", "stds", "mins" and "maxs" per column, or None."""


class _FittedDiscretizer(BaseDiscretizer):
    """A discretizer whose bins are torchlime's ``fit_stats`` bins of one kind (``_how``).

    The quartile, decile and entropy discretizers differ only in that kind and in what ``labels``
    are to them (``_labels``); their arguments are ``BaseDiscretizer``'s, described once in
    ``_FITTED_ARGS`` and added to each one's docstring after its summary.
    """

    _how: str
    _labels = "(N,) class labels (the entropy discretizer's), or None."

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        summary, _, rest = (cls.__doc__ or "").partition("\n\n")
        cls.__doc__ = summary + _FITTED_ARGS.format(labels=cls._labels) + (f"\n\n{rest}" if rest else "\n")

    def bins(self, data: NDArray[np.float64], labels: object) -> list[NDArray[np.float64]]:
        """The bins of kind ``_how`` of every column of ``to_discretize``.

        Args:
            data: (N, D) training data.
            labels: (N,) class labels (used by the entropy kind only), or None.

        Returns:
            One increasing array of boundaries per column of ``to_discretize`` (a column with no
            boundary gets its median).

        Raises:
            ValueError: the entropy kind without ``labels``.
        """
        how = self._how
        if how == "entropy" and labels is None:
            raise ValueError(
                "`labels` must be given for EntropyDiscretizer (the class of every training row), got None"
            )
        stats = fit_stats(data, None, how, labels if how == "entropy" else None)
        out = []
        for f in self.to_discretize:
            b = stats.boundaries[f, : int(stats.n_levels[f]) - 1].numpy()
            out.append(b if len(b) else np.asarray([float(np.median(data[:, f]))]))
        return out


class QuartileDiscretizer(_FittedDiscretizer):
    """lime's ``QuartileDiscretizer``: bins at the 25th, 50th and 75th percentiles."""

    _how = "quartile"


class DecileDiscretizer(_FittedDiscretizer):
    """lime's ``DecileDiscretizer``: bins at the 10th, 20th, ..., 90th percentiles."""

    _how = "decile"


class EntropyDiscretizer(_FittedDiscretizer):
    """lime's ``EntropyDiscretizer``: bins at the splits of a depth-3 entropy tree on ``labels``.

    Raises:
        ValueError: no ``labels``.
    """

    _how = "entropy"
    _labels = "(N,) class labels (required: the tree splits on them)."
