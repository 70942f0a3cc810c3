"""``LimeTabularExplainer``: lime's tabular explainer on ``torchlime.tabular.explain_tabular``."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence, Union, cast

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime._util.checks import check_positive_float, describe
from torchlime.compat._vocabulary import speaking
from torchlime.compat.lime._checks import (
    check_finite_array,
    check_function,
    check_labels,
    check_sizes,
    lime_advice,
    lime_words,
)
from torchlime.compat.lime._common import (
    Recording,
    check_common,
    mixed_seed,
    one_call,
    one_row,
    random_state_from,
    refit_for,
    seed_from,
    surrogate_for,
    target_for,
)
from torchlime.compat.lime._continuous import GaussianLime, lime_design
from torchlime.compat.lime._domain import TableDomainMapper
from torchlime.compat.lime._explanation import Explanation
from torchlime.compat.lime._stats import check_stats_keys, stats_from_lime
from torchlime.stages.weighting import ExponentialKernel
from torchlime.tabular import TabularInfo, bin_condition, explain_tabular
from torchlime.tabular.stats import DiscretizerName, TabularStats, fit_stats

_NAMES = {"QuartileDiscretizer": "quartile", "DecileDiscretizer": "decile", "EntropyDiscretizer": "entropy"}


def _dense(data: object, name: str) -> NDArray[np.float64]:
    """A float64 (N, D) / (D,) array from a dense array, a tensor or a scipy sparse matrix."""
    if hasattr(data, "toarray"):  # scipy sparse
        data = data.toarray()
    if isinstance(data, torch.Tensor):
        data = data.detach().cpu().numpy()
    arr = np.asarray(data)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"`{name}` must hold numbers (a numpy array or scipy sparse matrix), got {describe(data)}")
    return arr.astype(np.float64)


def _discretizer_name(discretizer: object) -> str:
    """Lime's discretizer name, from a name or one of lime's discretizer objects."""
    if isinstance(discretizer, str):
        if discretizer not in ("quartile", "decile", "entropy"):
            raise ValueError(
                "`discretizer` must be 'quartile', 'decile', 'entropy' or a lime discretizer object, "
                f"got {discretizer!r}"
            )
        return discretizer
    name = _NAMES.get(type(discretizer).__name__)
    if name is None and hasattr(discretizer, "mins") and hasattr(discretizer, "means"):
        name = "custom"
    if name is None:
        raise TypeError(f"`discretizer` must be a name or a lime BaseDiscretizer, got {describe(discretizer)}")
    return name


class LimeTabularExplainer:
    """lime's ``LimeTabularExplainer``: the same constructor and ``explain_instance``, batched underneath.

    Args:
        training_data: (N, D) numpy array or scipy sparse matrix (sparse data is densified, and,
            as in lime, not discretized).
        mode: "classification" or "regression".
        training_labels: (N,) labels (the entropy discretizer's).
        feature_names: D names (default "0".."D-1").
        categorical_features: the categorical columns.
        categorical_names: column -> names of its values.
        kernel_width: lime's kernel width (default 0.75 sqrt(D)).
        kernel: must be None (lime's exponential kernel).
        verbose: accepted for lime's signature (nothing is printed).
        class_names: names of the classes.
        feature_selection: "auto", "forward_selection", "highest_weights", "lasso_path" or "none".
        discretize_continuous: discretize the continuous columns (lime's default).
        discretizer: "quartile", "decile", "entropy", or a lime discretizer object.
        sample_around_instance: without discretization, sample the continuous columns around the
            instance (``N(0, 1) · scale + value``) instead of the training mean.
        random_state: None (numpy's global generator), an int or a ``numpy.random.RandomState``.
        training_data_stats: lime's dict of training statistics ("means", "mins", "maxs", "stds",
            "feature_values", "feature_frequencies", and "bins").
    """

    def __init__(  # noqa: PLR0913
        self,
        training_data: object,
        mode: str = "classification",
        training_labels: object = None,
        feature_names: Optional[Sequence[object]] = None,
        categorical_features: Optional[Sequence[int]] = None,
        categorical_names: Optional[Mapping[int, Sequence[str]]] = None,
        kernel_width: Optional[float] = None,
        kernel: object = None,
        verbose: bool = False,
        class_names: Optional[Sequence[object]] = None,
        feature_selection: str = "auto",
        discretize_continuous: bool = True,
        discretizer: object = "quartile",
        sample_around_instance: bool = False,
        random_state: object = None,
        training_data_stats: Optional[Mapping[str, object]] = None,
    ) -> None:
        check_common(kernel, feature_selection, verbose)
        if mode not in ("classification", "regression"):
            raise ValueError(f"`mode` must be 'classification' or 'regression', got {mode!r}")
        sparse = hasattr(training_data, "toarray")
        data = _dense(training_data, "training_data")
        if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 2:
            raise ValueError(
                f"`training_data` must have shape (N, D) with N >= 1 rows and D >= 2 columns (features to "
                f"explain), got shape {data.shape}"
            )
        check_finite_array(data, "training_data")
        d = data.shape[1]
        self.mode, self.class_names, self.feature_selection = mode, class_names, feature_selection
        self.feature_names = (
            [str(n) for n in feature_names] if feature_names is not None else [str(i) for i in range(d)]
        )
        if len(self.feature_names) != d:
            raise ValueError(f"`feature_names` must name the {d} columns, got {len(self.feature_names)} names")
        self.categorical_names = dict(categorical_names or {})
        self.kernel_width = check_positive_float(kernel_width, "kernel_width") if kernel_width is not None else None
        self.sample_around_instance = bool(sample_around_instance)
        self.random_state = random_state_from(random_state)
        self.sparse = sparse
        given = _columns(categorical_features, d)
        self.discretizer: object = None
        self.discretize = bool(discretize_continuous) and not sparse
        if training_data_stats is not None:  # lime checks the dict whether or not it discretizes
            check_stats_keys(training_data_stats, binned=self.discretize)
        if self.discretize:
            self.discretizer = discretizer
            name = _discretizer_name(discretizer) if training_data_stats is None else "stats"
            source = training_data_stats if training_data_stats is not None else discretizer
            if isinstance(source, str):
                self.stats = fit_stats(data, given, source, _labels(training_labels))
            else:
                self.stats = stats_from_lime(data, given, source, name)
            self.categorical_features = list(range(d))
        else:
            self.stats = fit_stats(data, given, "quartile")
            self.categorical_features = given
        self._names_source = None if isinstance(self.discretizer, str) else getattr(self.discretizer, "names", None)
        self.feature_values, self.feature_frequencies = _values(self.stats, self.categorical_features)

    def explain_instance(  # noqa: PLR0913
        self,
        data_row: object,
        predict_fn: Callable[[NDArray[np.float64]], object],
        labels: Sequence[int] = (1,),
        top_labels: Optional[int] = None,
        num_features: int = 10,
        num_samples: int = 5000,
        distance_metric: str = "euclidean",
        model_regressor: object = None,
        sampling_method: str = "gaussian",
        **kwargs: Any,
    ) -> Explanation:
        """Explain one row as lime does, returning lime's ``Explanation``.

        Args:
            data_row: (D,) the row (numpy, tensor or a sparse row).
            predict_fn: a function over (c, D) numpy rows returning (c, K) probabilities, or (c,)
                predictions in regression mode.
            labels: the classes to explain when ``top_labels`` is None.
            top_labels: explain the K most probable classes instead.
            num_features: columns per label in the explanation.
            num_samples: N, the row included.
            distance_metric: "euclidean" (lime's, on the scaled rows).
            model_regressor: None (``Ridge(alpha=1)``), or scikit-learn's Ridge / LinearRegression / Lasso.
            sampling_method: "gaussian" (lime's default; Latin hypercube sampling is not offered).
            **kwargs: torchlime keywords (``batch_size``, ``progress``).

        Returns:
            lime's ``Explanation``; ``as_list`` names bins and categories as lime does (without
            discretization, continuous columns by their plain name: lime's weights there are per
            unit of ``(x - mean) / scale``, fitted on the scaled samples, see ``_continuous``).

        Raises:
            TypeError / ValueError: naming lime's argument, before ``predict_fn`` runs (a ``data_row`` of
                the wrong length or with NaN/inf, ``num_samples`` < 2, negative ``labels``, ...), or once
                its output shows it (``labels`` beyond the classes, NaN/inf or misshapen scores).
        """
        if distance_metric != "euclidean":
            raise ValueError(
                f"`distance_metric` must be 'euclidean' (lime's tabular distance), got {distance_metric!r}"
            )
        if sampling_method != "gaussian":
            raise ValueError(f"`sampling_method` must be 'gaussian' (lhs is not offered), got {sampling_method!r}")
        row = _dense(data_row, "data_row").reshape(-1)
        d = self.stats.n_columns
        if row.shape[0] != d:
            raise ValueError(f"`data_row` must have {d} values (the training data's columns), got {row.shape[0]}")
        check_finite_array(row, "data_row")
        check_function(predict_fn, "predict_fn")
        num_samples, num_features, _ = check_sizes(num_samples, num_features)
        regression = self.mode == "regression"
        if not self.discretize:
            return self._explain_gaussian(
                row, predict_fn, labels, top_labels, num_features, num_samples, model_regressor, kwargs
            )
        named = None if regression else target_for(labels, top_labels)
        target: Union[int, str, list[int]] = 0 if named is None else named
        asked: list[int] = [] if named is None or isinstance(named, str) else list(named)
        rec = Recording(predict_fn, lambda chunk: chunk.cpu().numpy(), "predict_fn", not regression, asked)
        advice = lime_advice("predict_fn", "predictions" if regression else "probabilities")
        width = self.kernel_width  # lime's kernel_width is torchlime's ExponentialKernel(width) on the masks
        kernel = cast(
            dict[str, Any], {} if width is None else {"kernel": ExponentialKernel(width, distance="euclidean")}
        )
        with speaking(lime_words("data_row", "predict_fn", "columns"), advice):
            result = explain_tabular(
                rec,
                torch.from_numpy(row).view(1, d),
                training_data=self.stats,
                discretizer=cast(DiscretizerName, self.stats.discretizer),  # the stats' own bins
                discretize_continuous=self.discretize,
                sample_around_instance=self.sample_around_instance,
                feature_names=self.feature_names,
                target=one_row(target),
                n_samples=num_samples,
                surrogate=surrogate_for(model_regressor, self.feature_selection, num_features, num_samples),
                generator=self._seed(),
                **kernel,
                **one_call(kwargs, num_samples, d),
            )
        keep = d if self.feature_selection == "none" else num_features
        names = self._names(row, result.info if isinstance(result.info, TabularInfo) else None)
        exp = Explanation(
            result,
            names,
            mode=self.mode,
            class_names=self.class_names,
            keep=keep,
            chosen_only=self.feature_selection == "lasso_path",
            last=0 if top_labels else -1,
            reference=rec.first,
            score_range=(rec.low, rec.high),
            domain_mapper=self._mapper(row, names),
            random_state=self.random_state,
        )
        if top_labels and not regression:
            exp.top_labels = [int(t) for t in result.target[0].tolist()]
        return exp

    def _explain_gaussian(
        self,
        row: NDArray[np.float64],
        predict_fn: Callable[[NDArray[np.float64]], object],
        labels: Sequence[int],
        top_labels: Optional[int],
        num_features: int,
        num_samples: int,
        model_regressor: object,
        kwargs: dict[str, Any],
    ) -> Explanation:
        """Lime's undiscretised explanation: raw Gaussian samples, the fit on their scaled values."""
        regression = self.mode == "regression"
        listed, top = ([0], None) if regression else check_labels(labels, top_labels)
        batch_size = _batch_size(kwargs, num_samples)
        rec = Recording(predict_fn, None, "predict_fn", not regression, [] if top else listed)
        names = self._names(row, None)
        lime = GaussianLime(
            self.stats,
            self.feature_selection,
            num_features,
            refit_for(model_regressor),
            self.kernel_width,
            self.sample_around_instance,
            self.sparse,
            self.feature_names,
        )
        result, pairs = lime.explain(row, rec, listed, top, num_samples, self._seed(), batch_size)
        scaled = lime_design(self.stats, torch.from_numpy(row).view(1, 1, -1), self.sparse)[0, 0].numpy()
        exp = Explanation(
            result,
            names,
            mode=self.mode,
            class_names=self.class_names,
            keep=self.stats.n_columns,
            reference=rec.first,
            score_range=(rec.low, rec.high),
            domain_mapper=self._mapper(row, names, scaled),
            random_state=self.random_state,
        )
        if regression:  # lime's pair of labels: 1 the prediction, 0 its negation
            exp.local_exp = {0: [(f, -w) for f, w in pairs[0]], 1: pairs[0]}
        else:
            exp.local_exp = pairs
            if top:
                exp.top_labels = [int(t) for t in result.target[0].tolist()][::-1]
        return exp

    def _seed(self) -> int:
        """The engine's seed: the explainer's draw, mixed with a draw of a discretizer object's own generator.

        lime draws the values of the sampled bins with the discretizer's ``random_state``, so two
        discretizers seeded apart give different samples, and explanations, as they do here.
        """
        seed = seed_from(self.random_state)
        own = self.discretizer
        if own is None or isinstance(own, str) or not hasattr(own, "random_state"):
            return seed
        return mixed_seed(seed, seed_from(own.random_state))

    def _mapper(
        self, row: NDArray[np.float64], names: Sequence[str], scaled: Optional[NDArray[np.float64]] = None
    ) -> TableDomainMapper:
        """Lime's ``TableDomainMapper`` of this row: its shown values, scaled values and conditions."""
        shown: list[object] = []
        for f, value in enumerate(row.tolist()):
            labels = self.categorical_names.get(f) if f in self.categorical_features else None
            shown.append(str(labels[int(value)]) if labels is not None else f"{value:.2f}")
        if scaled is None:
            scaled = (row - self.stats.mean.numpy()) / self.stats.scale.numpy()
        return TableDomainMapper(self.feature_names, shown, scaled, self.categorical_features, list(names))

    def _names(self, row: NDArray[np.float64], tab: Optional[TabularInfo]) -> list[str]:
        """Lime's name of every column: its bin (``tab``: the record's levels, bins), ``name=value``, or its name."""
        names = []
        for f, name in enumerate(self.feature_names):
            if tab is not None and self.discretize and not bool(self.stats.categorical[f]):
                level = int(tab.levels[0, f])
                if self._names_source is not None:
                    names.append(str(self._names_source[f][level]))
                else:
                    names.append(bin_condition(name, tab.boundaries[f], level))
            elif f in self.categorical_features:
                value = row[f]
                shown = self.categorical_names.get(f, None)
                label = shown[int(value)] if shown is not None else (int(value) if value.is_integer() else value)
                names.append(f"{name}={label}")
            else:
                names.append(name)
        return names


def _columns(categorical_features: Optional[Sequence[int]], d: int) -> list[int]:
    """``categorical_features`` as column indices in [0, D)."""
    given = list(categorical_features) if categorical_features is not None else []
    if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in given):
        raise TypeError(f"`categorical_features` must be column indices (ints), got {describe(categorical_features)}")
    if any(not 0 <= int(c) < d for c in given):
        raise ValueError(f"`categorical_features` must be in [0, {d}) (the training data's columns), got {given}")
    return [int(c) for c in given]


def _batch_size(kwargs: Mapping[str, Any], num_samples: int) -> Optional[int]:
    """The rows per ``predict_fn`` call of an undiscretised explanation (None: all, as lime)."""
    unknown = sorted(set(kwargs) - {"batch_size", "progress"})
    if unknown:
        raise TypeError(
            f"explain_instance() takes lime's arguments and torchlime's `batch_size` and `progress`, got {unknown}"
        )
    if not isinstance(kwargs.get("progress", False), bool):
        raise TypeError(f"`progress` must be True or False, got {describe(kwargs['progress'])}")
    given = kwargs.get("batch_size")
    return None if given is None else min(check_sizes(2, 1, given)[2], num_samples)


def _labels(training_labels: object) -> Optional[NDArray[np.generic]]:
    return None if training_labels is None else np.asarray(training_labels)


def _values(
    stats: TabularStats, columns: Sequence[int]
) -> tuple[dict[int, list[Union[int, float]]], dict[int, NDArray[np.floating]]]:
    """Lime's ``feature_values`` and ``feature_frequencies`` of the categorical (or discretized) columns."""
    values: dict[int, list[Union[int, float]]] = {}
    freqs: dict[int, NDArray[np.floating]] = {}
    for f in columns:
        k = int(stats.n_levels[f])
        if bool(stats.categorical[f]):
            vals = stats.values[f, :k].tolist()
            values[f] = [int(v) if float(v).is_integer() else v for v in vals]
        else:
            values[f] = list(range(k))
        fr = stats.freq[f, :k].numpy()
        keep = fr > 0
        values[f] = [v for v, kept in zip(values[f], keep) if kept]
        freqs[f] = fr[keep] / fr[keep].sum()
    return values, freqs
