"""lime's ``submodular_pick.SubmodularPick`` (SP-LIME) on torchlime's explainers and greedy pick.

``SubmodularPick(explainer, data, predict_fn, method="sample", sample_size=1000, num_exps_desired=5,
num_features=10, **kwargs)`` explains the rows lime would (a uniform sample drawn with NumPy's global
generator, as lime draws it, or every row with ``method="full"``), builds lime's explanation matrix from
each explanation's ``as_list`` (one column per feature name, summed over the available labels) and picks
with ``torchlime.methods.sp_lime.submodular_pick``, whose ties fall as lime's do. It keeps lime's
attributes: ``explanations``, ``sp_explanations`` and ``V``.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import torch

from torchlime._util.checks import check_positive_int, describe
from torchlime.methods.sp_lime import submodular_pick


class SubmodularPick:
    """A representative set of explanations, picked by SP-LIME (Ribeiro et al. 2016, Algorithm 2).

    Args:
        explainer: an explainer of this package (or lime's) with ``explain_instance``.
        data: (N, ...) the rows ``predict_fn`` takes, one instance each.
        predict_fn: the model over a batch of rows (lime's ``classifier_fn`` / ``predict_fn``).
        method: "sample" (``sample_size`` rows at random) or "full" (every row).
        sample_size: how many rows "sample" explains (all of them when there are fewer).
        num_exps_desired: how many explanations to pick.
        num_features: ``num_features`` of every explanation.
        **kwargs: passed to ``explain_instance`` (``top_labels`` defaults to 1, as in lime).

    Raises:
        ValueError: ``method`` other than "sample" or "full".

    Example:
        >>> import numpy as np
        >>> from torchlime.compat.lime import LimeTabularExplainer
        >>> rows = np.random.RandomState(0).rand(40, 3)
        >>> def model(r):  # P(class 1) rises with column 0
        ...     p = 1 / (1 + np.exp(-10 * (r[:, 0] - 0.5)))
        ...     return np.c_[1 - p, p]
        >>> np.random.seed(0)
        >>> sp = SubmodularPick(LimeTabularExplainer(rows, random_state=0), rows, model, sample_size=4,
        ...                     num_exps_desired=2, num_features=2, num_samples=500)
        >>> len(sp.explanations), len(sp.sp_explanations)
        (4, 2)
    """

    def __init__(
        self,
        explainer: Any,
        data: Any,
        predict_fn: Callable[[Any], Any],
        method: str = "sample",
        sample_size: int = 1000,
        num_exps_desired: int = 5,
        num_features: int = 10,
        **kwargs: Any,
    ) -> None:
        top_labels = kwargs.pop("top_labels", 1)
        n = len(data)
        if method == "sample":
            if sample_size > n:
                warnings.warn("`sample_size` is larger than the data: explaining every row", UserWarning, stacklevel=2)
                sample_size = n
            order = np.arange(n)
            np.random.shuffle(order)  # lime's draw, from NumPy's global generator
            rows = order[:sample_size]
        elif method == "full":
            rows = np.arange(n)
        else:
            raise ValueError(f"`method` must be 'sample' or 'full', got {describe(method)}")
        check_positive_int(num_exps_desired, "num_exps_desired", minimum=0)
        self.explanations = [
            explainer.explain_instance(data[i], predict_fn, num_features=num_features, top_labels=top_labels, **kwargs)
            for i in rows
        ]
        if num_exps_desired > len(self.explanations):
            warnings.warn("`num_exps_desired` is larger than the explanations: picking all", UserWarning, stacklevel=2)
        budget = min(int(num_exps_desired), len(self.explanations))
        picks = submodular_pick(_explanation_matrix(self.explanations), budget).tolist() if budget else []
        self.V: list[int] = [int(i) for i in picks]
        self.sp_explanations = [self.explanations[i] for i in self.V]


def _explanation_matrix(explanations: list[Any]) -> torch.Tensor:
    """Lime's W (n, d'): each explanation's ``as_list`` weights, summed over its labels, one column per name."""
    columns: dict[object, int] = {}
    entries: list[tuple[int, int, float]] = []
    for i, exp in enumerate(explanations):
        labels = exp.available_labels() if getattr(exp, "mode", "classification") == "classification" else [1]
        for label in labels:
            for name, value in exp.as_list(label=label):
                entries.append((i, columns.setdefault(name, len(columns)), float(value)))
    w = torch.zeros(len(explanations), len(columns), dtype=torch.float64)
    for i, j, value in entries:
        w[i, j] += value
    return w
