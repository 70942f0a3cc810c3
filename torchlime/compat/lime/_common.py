"""What lime's three explainers share: seeds, surrogates, targets, and the ranked weights of a label."""

from __future__ import annotations

from typing import Any, Callable, Generic, Optional, Sequence, Sized, TypeVar, Union, cast

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime._util.checks import describe
from torchlime.compat._vocabulary import check_regressor_settings
from torchlime.compat.lime._checks import check_labels
from torchlime.methods.feature_selection import METHODS, Select
from torchlime.stages.forward.errors import as_raised
from torchlime.stages.surrogate import Lasso, Ridge, Surrogate
from torchlime.typing import DistanceName, SelectionMethod

#: lime's feature_selection names: torchlime's ``Select`` methods, and "none" (every feature)
SELECTIONS = (*METHODS, "none")
#: what lime's classifier takes: a batch of numpy rows or images, or a list of strings
Batch = TypeVar("Batch", bound=Sized)
#: where lime's seeds come from: numpy's global generator (None), or a generator of its own
RandomState = Optional[Union[np.random.RandomState, np.random.Generator]]
#: rows x values per row that a classifier gets in one call (lime's one call); more are sent in chunks
ONE_CALL_VALUES = 2**25


def one_call(kwargs: dict[str, Any], num_samples: int, row_values: int) -> dict[str, Any]:
    """Torchlime keywords that send all ``num_samples`` rows in one classifier call, as lime does.

    Args:
        kwargs: the torchlime keywords given (a ``batch_size`` given is kept).
        num_samples: N, the rows of the explanation.
        row_values: values per row (columns, or characters of a text).

    Returns:
        ``kwargs``, with ``batch_size=num_samples`` when the rows fit ``ONE_CALL_VALUES`` (a fixed size
        beyond the engine's default largest chunk is kept: lime's 5000 and 10000 rows are one call); else
        unchanged (the engine's chunks).
    """
    if "batch_size" in kwargs or num_samples * max(row_values, 1) > ONE_CALL_VALUES:
        return kwargs
    return {**kwargs, "batch_size": num_samples}


def mixed_seed(first: int, second: int) -> int:
    """One seed from two (the explainer's and a discretizer's), each changing it.

    Args:
        first: a seed.
        second: another.

    Returns:
        A seed in [0, 2**31 - 1).
    """
    return int(np.random.SeedSequence([first, second]).generate_state(1)[0]) % (2**31 - 1)


def random_state_from(random_state: object) -> RandomState:
    """Lime's ``random_state`` as lime keeps it: numpy's global generator, or a ``RandomState``.

    Args:
        random_state: None, an int or a ``numpy.random.RandomState`` / ``Generator``.

    Returns:
        None (the global generator), or the generator every call draws its seed from.
    """
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.RandomState(int(random_state))
    if random_state is not None and not isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        raise TypeError(f"`random_state` must be None, an int or a numpy RandomState, got {describe(random_state)}")
    return random_state


def seed_from(random_state: object) -> int:
    """An int seed from lime's ``random_state``.

    Args:
        random_state: None (drawn from numpy's global generator, so that ``np.random.seed``
            makes runs repeat, as in lime), an int, or a ``numpy.random.RandomState`` /
            ``numpy.random.Generator`` (one draw from it).

    Returns:
        The seed of torchlime's generator.

    Raises:
        TypeError: anything else.
    """
    if random_state is None:
        return int(np.random.randint(0, 2**31 - 1))
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**31 - 1))
    raise TypeError(f"`random_state` must be None, an int or a numpy RandomState, got {describe(random_state)}")


def refit_for(model_regressor: object) -> Surrogate:
    """Torchlime's surrogate for lime's ``model_regressor`` (None: lime's ``Ridge(alpha=1)``).

    Args:
        model_regressor: None, a scikit-learn ``Ridge``, ``LinearRegression`` or ``Lasso``, or a
            torchlime surrogate.

    Returns:
        The batched surrogate fitted on the normal equations.

    Raises:
        TypeError: another regressor (names the torchlime surrogates to pass instead).
    """
    if model_regressor is None:
        return Ridge(alpha=1.0, dtype=torch.float64)
    if isinstance(model_regressor, Surrogate):
        return model_regressor
    name = type(model_regressor).__name__
    params = model_regressor.get_params() if hasattr(model_regressor, "get_params") else {}
    if name in ("Ridge", "LinearRegression", "Lasso"):
        check_regressor_settings(params, name, "model_regressor")
    if name == "Ridge":
        return Ridge(alpha=float(params.get("alpha", 1.0)), dtype=torch.float64)
    if name == "LinearRegression":
        return Ridge(alpha=0.0, dtype=torch.float64)
    if name == "Lasso":
        return Lasso(alpha=float(params.get("alpha", 1.0)), dtype=torch.float64)
    raise TypeError(
        f"`model_regressor` {name} has no batched equivalent here; pass scikit-learn's Ridge, "
        f"LinearRegression or Lasso, or a torchlime surrogate (torchlime.Ridge, torchlime.Lasso), "
        f"got {describe(model_regressor)}"
    )


def surrogate_for(model_regressor: object, feature_selection: str, num_features: int, num_samples: int) -> Surrogate:
    """Lime's feature selection then its regressor, as one batched surrogate.

    Args:
        model_regressor: see ``refit_for``.
        feature_selection: "auto", "forward_selection", "highest_weights", "lasso_path" or "none".
        num_features: K, features kept.
        num_samples: N (the lasso path's stopping rule).

    Returns:
        ``Select(K, method, refit)``, or the refit alone for "none".
    """
    refit = refit_for(model_regressor)
    if feature_selection == "none":
        return refit
    return Select(
        k=num_features,
        method=cast(SelectionMethod, feature_selection),
        refit=refit,
        n_samples=num_samples,
        dtype=torch.float64,
    )


def check_distance(distance_metric: object) -> DistanceName:
    """Lime's ``distance_metric`` on the masks: "cosine" or "euclidean".

    Args:
        distance_metric: the value given.

    Returns:
        It, checked.

    Raises:
        ValueError: another metric.
    """
    if distance_metric not in ("cosine", "euclidean"):
        raise ValueError(f"`distance_metric` must be 'cosine' or 'euclidean', got {distance_metric!r}")
    return distance_metric  # narrowed to DistanceName by the check above


def check_common(kernel: object, feature_selection: object, verbose: object) -> None:
    """Check the constructor arguments every lime explainer takes.

    Args:
        kernel: must be None (lime's exponential kernel; its width is ``kernel_width``).
        feature_selection: one of ``SELECTIONS``.
        verbose: a bool.

    Raises:
        TypeError / ValueError: naming the argument and what to pass.
    """
    if kernel is not None:
        raise TypeError(
            "`kernel` must be None: torchlime weighs samples with lime's exponential kernel, batched; "
            "set its width with `kernel_width`, or use torchlime.explain(kernel=...) for other kernels, "
            f"got {describe(kernel)}"
        )
    if feature_selection not in SELECTIONS:
        raise ValueError(f"`feature_selection` must be one of {list(SELECTIONS)}, got {feature_selection!r}")
    if not isinstance(verbose, bool):
        raise TypeError(f"`verbose` must be True or False, got {describe(verbose)}")


def target_for(labels: Sequence[int], top_labels: Optional[int]) -> Union[str, list[int]]:
    """Torchlime's ``target`` for lime's ``labels`` / ``top_labels``.

    Args:
        labels: the classes to explain when ``top_labels`` is None (or 0).
        top_labels: explain the K most probable classes.

    Returns:
        ``"topK"`` or a list of ints.

    Raises:
        TypeError / ValueError: labels that are not ints >= 0, or none (``check_labels``).
    """
    listed, top = check_labels(labels, top_labels)
    return f"top{top}" if top else listed


def one_row(target: Union[int, str, list[int]]) -> Union[int, str, list[list[int]]]:
    """Lime's classes of its one instance as torchlime's ``target``: a list becomes one row ``[[...]]``.

    Example:
        >>> one_row([3, 5]), one_row("top2")
        ([[3, 5]], 'top2')
    """
    return [target] if isinstance(target, list) else target


def ranked(coef: torch.Tensor, n_features: int, keep: int, chosen_only: bool = False) -> list[tuple[int, float]]:
    """Lime's ``local_exp`` of one label: (feature, weight) of the chosen features, largest |weight| first.

    Args:
        coef: (F,) coefficients (zero outside the chosen features).
        n_features: F_b, the input's own features.
        keep: how many lime lists (its ``num_features``, or every feature for "none").
        chosen_only: list only the features with a weight (lime's "lasso_path", whose path may stop at
            fewer than ``keep``); the others always choose ``keep``.

    Returns:
        ``keep`` pairs (at most F_b), sorted by |weight| descending, then by feature.
    """
    values = coef[:n_features].double().cpu().tolist()
    order = sorted(range(n_features), key=lambda f: (-abs(values[f]), f))
    return [(f, values[f]) for f in order[: min(keep, n_features)] if values[f] != 0.0 or not chosen_only]


class Recording(Generic[Batch]):
    """lime's ``classifier_fn`` as the engine's model: converts each chunk, calls it, checks and keeps its output.

    The first row the engine sends is the unperturbed instance, so the first output row is lime's
    ``predict_proba`` (or ``predicted_value``); the range of every output is a regression's
    ``min_value`` / ``max_value``. Every output is checked in lime's words: numbers, one row per row
    sent ((c, K) for a classifier), finite, and wide enough for the ``labels`` asked.

    Args:
        fn: the user's function over a batch (numpy array or list of strings).
        convert: turns the engine's chunk into what ``fn`` takes (None: as it comes).
        name: the function's name in lime ("classifier_fn", "predict_fn").
        classifier: it returns (c, K) class probabilities (False: a regression's (c,) predictions).
        labels: the classes asked (checked against K on the first output).
    """

    def __init__(
        self,
        fn: Callable[[Batch], object],
        convert: Optional[Callable[[torch.Tensor], Batch]] = None,
        name: str = "classifier_fn",
        classifier: bool = True,
        labels: Sequence[int] = (),
    ) -> None:
        self.fn, self.convert = fn, convert
        self.name, self.classifier, self.labels = name, classifier, list(labels)
        self.first: Optional[NDArray[np.float64]] = None
        self.low, self.high = np.inf, -np.inf

    @property
    def cache_identity(self) -> Callable[[Batch], object]:
        """The wrapped function (keys any cached chunk size)."""
        return self.fn

    def __call__(self, chunk: Any) -> torch.Tensor:
        """The scores of one chunk, (c, K) or (c,).

        Args:
            chunk: the engine's chunk: (c, ...) tensor, or a list of c strings.

        Returns:
            ``fn``'s output as a float64 tensor.

        Raises:
            TypeError: an output that is not numbers.
            ValueError: the wrong shape, NaN/inf, or fewer classes than ``labels`` asks for.
        """
        given = chunk if self.convert is None else self.convert(chunk)
        try:
            raw = self.fn(given)
        except Exception as err:  # lime's caller sees its own function's error, as lime passes it on
            as_raised(err)
            raise
        try:
            out = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"`{self.name}` must return numbers (a numpy array), got {describe(raw)}") from err
        self._check(out, len(given))
        if out.size:
            if self.first is None:
                self.first = out[0].copy()
            self.low, self.high = min(self.low, float(out.min())), max(self.high, float(out.max()))
        return torch.from_numpy(np.ascontiguousarray(out))

    def _check(self, out: NDArray[np.float64], rows: int) -> None:
        shape = "(c, K) class probabilities" if self.classifier else "(c,) predictions"
        if out.ndim not in (1, 2) or out.shape[0] != rows or (self.classifier and out.ndim != 2):
            raise ValueError(f"`{self.name}` must return {shape} for a batch of c={rows} rows, got shape {out.shape}")
        bad = int((~np.isfinite(out)).any(axis=-1).sum()) if out.ndim == 2 else int((~np.isfinite(out)).sum())
        if bad:
            raise ValueError(f"`{self.name}` returned NaN/inf scores for {bad} of {rows} rows; lime needs finite ones")
        k = out.shape[1] if out.ndim == 2 else 1
        if self.classifier and self.labels and max(self.labels) >= k:
            raise ValueError(
                f"`labels` must be in [0, {k}) ({self.name} returns {k} class scores per row), got {self.labels}"
            )
