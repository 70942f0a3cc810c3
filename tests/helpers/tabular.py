"""Shared pieces of the tabular tests: data sets, scikit-learn models as torch callables, and lime
runs whose own samples are captured."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch

sklearn_datasets = pytest.importorskip("sklearn.datasets")


class SklearnModel:
    """A scikit-learn classifier as a torch callable: float rows (c, D) -> probabilities (c, K)."""

    def __init__(self, clf) -> None:
        self.clf = clf

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.clf.predict_proba(x.detach().cpu().double().numpy())).to(x.device)


def breast_cancer(n_train: int = 400):
    """(X_train, y_train, X_test) of scikit-learn's breast-cancer set in a fixed random split."""
    x, y = sklearn_datasets.load_breast_cancer(return_X_y=True)
    perm = np.random.RandomState(0).permutation(len(x))
    return x[perm[:n_train]], y[perm[:n_train]], x[perm[n_train:]]


def logistic(x: np.ndarray, y: np.ndarray):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x, y)


def lime_explain(explainer, rows: np.ndarray, predict, n_samples: int, label: int = 1):
    """lime's explanations of rows with every column kept (num_features = D), and the samples it
    drew: (coef (B, D), intercept (B,), score (B,), local_pred (B,), binary (B, S, D), inverse (B, S, D))."""
    captured = []
    draw = explainer._LimeTabularExplainer__data_inverse

    def spy(row, n):
        data, inverse = draw(row, n)
        captured.append((data.copy(), inverse.copy()))
        return data, inverse

    explainer._LimeTabularExplainer__data_inverse = spy
    d = rows.shape[1]
    coef, intercept, score, local = [], [], [], []
    try:
        for row in rows:
            exp = explainer.explain_instance(row, predict, labels=(label,), num_features=d, num_samples=n_samples)
            c = np.zeros(d)
            for f, w in exp.local_exp[label]:
                c[f] = w
            coef.append(c)
            intercept.append(exp.intercept[label])
            score.append(exp.score)
            local.append(exp.local_pred[0])
    finally:
        del explainer._LimeTabularExplainer__data_inverse
    binary = np.stack([c[0] for c in captured])
    inverse = np.stack([c[1] for c in captured])
    return np.array(coef), np.array(intercept), np.array(score), np.array(local), binary, inverse


def relative_max_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: max |a - b| / max |b| (the largest coefficient's scale)."""
    return np.abs(a - b).max(1) / np.abs(b).max(1)


@contextlib.contextmanager
def one_thread():
    """One torch thread (on a shared 2-core machine threaded integer hashing crawls); restored after."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)
