"""The one LARS path (``stages.lars.lars_path``): scikit-learn's ``lars_path`` in both of its ways (scikit-learn's
``lars_path_gram`` fit by fit, batched torch), for both methods; batched equals fit by fit; without
scikit-learn the torch way runs. lime's parity: tests/methods/test_feature_selection.py and
test_lars_rounding_tail.py; shap's ``num_features(k)``: tests/compat/test_shap.py."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

from torchlime.stages import lars
from torchlime.stages.lars import lars_path

linear = pytest.importorskip("sklearn.linear_model")


@pytest.fixture(params=["sklearn", "torch"])
def way(request, monkeypatch):
    """Every fit through scikit-learn's ``lars_path_gram``, or every fit through the batched torch path."""
    monkeypatch.setattr(lars, "SKLEARN_FITS", 10**6 if request.param == "sklearn" else 0)
    return request.param


def problem(rs: np.random.RandomState) -> tuple[np.ndarray, np.ndarray]:
    """A random regression: 8-60 rows, 2-14 columns, some of them correlated, a sparse signal and noise."""
    n, f = rs.randint(8, 60), rs.randint(2, 15)
    x = rs.normal(size=(n, f))
    x[:, : f // 3] += rs.normal(size=(n, 1))  # correlated columns
    beta = rs.normal(size=f) * (rs.random_sample(f) < 0.6)
    return x, x @ beta + rs.normal(size=n) * 0.3


def sklearn_path(x: np.ndarray, y: np.ndarray, method: str, max_iter: int) -> tuple[list[int], np.ndarray]:
    """scikit-learn's ``lars_path`` on the data itself: its final active set and its path (F, points)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, active, coefs = linear.lars_path(x, y, method=method, max_iter=max_iter)
    return sorted(active), coefs


def normal(x: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """gram (1, F, F), rhs (1, F, 1), valid (1, F) and count (1,) of one problem."""
    gram, rhs = torch.from_numpy(x.T @ x)[None], torch.from_numpy(x.T @ y)[None, :, None]
    return gram, rhs, torch.ones(1, x.shape[1], dtype=torch.bool), torch.tensor([float(x.shape[0])])


@pytest.mark.parametrize("method", ["lasso", "lar"])
def test_final_active_set_equals_scikit_learns_lars_path(method, way):
    rs = np.random.RandomState(0)
    for _ in range(40):
        x, y = problem(rs)
        max_iter = rs.randint(1, x.shape[1] + 3)
        expected, _ = sklearn_path(x, y, method, max_iter)
        got = lars_path(*normal(x, y), method=method, max_iter=max_iter)
        assert got[0, 0].nonzero().flatten().tolist() == expected, (method, way)


def test_limes_rule_is_the_last_point_with_at_most_k_features(way):
    """``k``: the support of the last point of scikit-learn's lasso path with at most k nonzero coefficients."""
    rs = np.random.RandomState(1)
    for _ in range(30):
        x, y = problem(rs)
        _, coefs = sklearn_path(x, y, "lasso", 500)
        for k in range(1, x.shape[1] + 1):
            points = [np.flatnonzero(c).tolist() for c in coefs.T[:0:-1]]
            expected = next((p for p in points if len(p) <= k), list(range(x.shape[1])))
            assert lars_path(*normal(x, y), k=k)[0, 0].nonzero().flatten().tolist() == expected


@pytest.mark.parametrize("method", ["lasso", "lar"])
def test_batched_equals_fit_by_fit_and_missing_features_never_enter(method, way):
    g = torch.Generator().manual_seed(3)
    b, s, f, t = 5, 80, 12, 3
    x = torch.randn(b, s, f, generator=g, dtype=torch.float64)
    y = x[..., :4] @ torch.randn(4, t, generator=g, dtype=torch.float64) + torch.randn(b, s, t, generator=g).double()
    gram, rhs = x.transpose(1, 2) @ x, x.transpose(1, 2) @ y
    valid = torch.rand(b, f, generator=g) < 0.8
    count = torch.full((b,), float(s))
    for k in (None, 3):
        whole = lars_path(gram, rhs, valid, count, method=method, max_iter=6, k=k)
        assert not (whole & ~valid.unsqueeze(1)).any()
        for i in range(b):
            for j in range(t):
                cols = valid[i].nonzero().flatten()
                one = lars_path(gram[i, cols][:, cols][None], rhs[i, cols, j][None, :, None], valid[i, cols][None],
                                count[i : i + 1], method=method, max_iter=6, k=k)  # fmt: skip
                assert torch.equal(whole[i, j, cols], one[0, 0]), (i, j, k)


def test_without_scikit_learn_the_torch_path_runs(monkeypatch):
    x, y = problem(np.random.RandomState(4))
    args = normal(x, y)
    monkeypatch.setattr(lars, "SKLEARN_FITS", 0)
    expected = lars_path(*args, k=3)
    monkeypatch.setattr(lars, "SKLEARN_FITS", 10**6)
    monkeypatch.setitem(sys.modules, "sklearn", None)  # `import sklearn` now raises ImportError
    assert torch.equal(lars_path(*args, k=3), expected)


def test_a_few_cpu_fits_go_to_scikit_learn_and_many_to_torch(monkeypatch):
    calls = []
    monkeypatch.setattr(lars, "_torch_path", lambda *a: calls.append("torch") or torch.zeros(1, 1, 1, dtype=torch.bool))
    x, y = problem(np.random.RandomState(5))
    lars_path(*normal(x, y))
    assert calls == []
    gram, rhs, valid, count = normal(x, y)
    many = lars.SKLEARN_FITS + 1
    lars_path(gram.expand(many, -1, -1), rhs.expand(many, -1, -1), valid.expand(many, -1), count.expand(many))
    assert calls == ["torch"]


def test_refuses_an_unknown_method():
    x, y = problem(np.random.RandomState(6))
    with pytest.raises(ValueError, match="method"):
        lars_path(*normal(x, y), method="lasso_lars")
