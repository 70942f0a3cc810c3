"""The parts of the LIME paper's faithfulness protocol (sec. 5.2) that the tabular and the token
benchmarks share: the sparse classifiers whose gold features are known, and the summary of a
per-input recall.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

MAX_GOLD = 10  # the classifiers use at most this many features by construction


def sparse_logreg_fit(x: np.ndarray, y: np.ndarray, wrap: Callable[[Any], Any] = lambda clf: clf):
    """The L1 logistic regression (liblinear) with the largest C of ``logspace(-3, 1, 41)`` that uses
    at most ``MAX_GOLD`` columns of x (n, D). ``wrap`` builds the estimator around the classifier (a
    scaling pipeline, say); returns (fitted estimator, the classifier, the columns it uses, C).
    """
    from sklearn.linear_model import LogisticRegression

    # scikit-learn >= 1.8 spells the L1 penalty l1_ratio=1 (``penalty`` is deprecated there)
    l1 = dict(l1_ratio=1.0) if "deprecated" in str(inspect.signature(LogisticRegression)) else dict(penalty="l1")
    best = None
    for c in np.logspace(-3, 1, 41):
        lr = LogisticRegression(solver="liblinear", C=c, **l1)
        est = wrap(lr).fit(x, y)
        used = np.flatnonzero(lr.coef_[0])
        if 0 < len(used) <= MAX_GOLD:
            best = (est, lr, used, c)
    return best


def decision_tree_fit(x: np.ndarray, y: np.ndarray, seed: int):
    """A decision tree of depth <= ``MAX_GOLD``, and a function rows (n, D) -> bool (n, D): the
    distinct columns tested on each row's decision path.
    """
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(max_depth=MAX_GOLD, random_state=seed).fit(x, y)
    feature = clf.tree_.feature

    def tested(rows: np.ndarray) -> np.ndarray:
        path = clf.decision_path(rows).toarray().astype(bool)  # (n, nodes)
        out = np.zeros((len(rows), x.shape[1]), dtype=bool)
        for i, nodes in enumerate(path):
            f = feature[nodes]
            out[i, f[f >= 0]] = True
        return out

    return clf, tested


def summary(values: np.ndarray) -> dict:
    """Mean, its standard error and n of per-input values."""
    sem = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else 0.0
    return dict(mean=float(values.mean()), sem=sem, n=int(len(values)))
