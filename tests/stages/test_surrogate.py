"""Batched surrogates against sklearn's Ridge / Lasso / LinearRegression with sample weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.engine.registry import resolve_surrogate
from torchlime.stages.surrogate import KLasso, Lasso, Ridge

sk_linear = pytest.importorskip("sklearn.linear_model")  # optional: skip, not a collection error
SkLasso, LinearRegression, SkRidge = sk_linear.Lasso, sk_linear.LinearRegression, sk_linear.Ridge

F64 = torch.float64


def problem(b=3, s=300, f=8, t=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, s, f, generator=g) < 0.5
    x[:, 0] = True
    beta = torch.randn(b, f, t, generator=g, dtype=F64)
    y = x.double() @ beta + 0.3 * torch.randn(b, s, t, generator=g, dtype=F64) + 2.0
    w = torch.rand(b, s, generator=g, dtype=F64) + 0.05
    valid = torch.ones(b, f, dtype=torch.bool)
    return x.to(device), y.to(device), w.to(device), valid.to(device)


@pytest.mark.parametrize("alpha", [1.0, 0.01, 10.0])
def test_ridge_matches_sklearn(alpha, device):
    x, y, w, valid = problem(device=device)
    fit = Ridge(alpha=alpha, dtype=F64).fit(x, y, w, valid)
    for b in range(x.shape[0]):
        for t in range(y.shape[2]):
            X, Y, W = x[b].double().cpu().numpy(), y[b, :, t].cpu().numpy(), w[b].cpu().numpy()
            sk = SkRidge(alpha=alpha).fit(X, Y, sample_weight=W)
            np.testing.assert_allclose(fit.coef[b, t].cpu().numpy(), sk.coef_, atol=1e-10, rtol=1e-9)
            np.testing.assert_allclose(fit.intercept[b, t].item(), sk.intercept_, atol=1e-10)
            np.testing.assert_allclose(fit.score[b, t].item(), sk.score(X, Y, sample_weight=W), atol=1e-10)
            np.testing.assert_allclose(fit.local_pred[b, t].item(), sk.predict(np.ones((1, X.shape[1])))[0], atol=1e-10)


def test_ridge_float32_close_to_float64():
    x, y, w, valid = problem()
    f32 = Ridge().fit(x, y.float(), w.float(), valid)
    f64 = Ridge(dtype=F64).fit(x, y, w, valid)
    torch.testing.assert_close(f32.coef.double(), f64.coef, atol=2e-4, rtol=1e-4)


@pytest.mark.parametrize("alpha", [0.01, 0.05])
def test_lasso_matches_sklearn(alpha, device):
    x, y, w, valid = problem(seed=1, device=device)
    fit = Lasso(alpha=alpha, dtype=F64, tol=1e-12, max_iter=20000).fit(x, y, w, valid)
    for b in range(x.shape[0]):
        for t in range(y.shape[2]):
            X, Y, W = x[b].double().cpu().numpy(), y[b, :, t].cpu().numpy(), w[b].cpu().numpy()
            sk = SkLasso(alpha=alpha, tol=1e-12, max_iter=100000).fit(X, Y, sample_weight=W)
            np.testing.assert_allclose(fit.coef[b, t].cpu().numpy(), sk.coef_, atol=1e-7)
            np.testing.assert_allclose(fit.intercept[b, t].item(), sk.intercept_, atol=1e-7)


def test_lasso_zeroes_irrelevant_features():
    x, y, w, valid = problem(seed=2, f=10)
    # only the first two features matter
    y = 3 * x[..., :1].double() - 2 * x[..., 1:2].double() + 0.01 * y[..., :1]
    fit = Lasso(alpha=0.05, dtype=F64).fit(x, y, w, valid)
    nz = (fit.coef.abs() > 1e-9).squeeze(1)
    assert nz[:, :2].all() and not nz[:, 2:].any()


def test_ols_rank_deficient_matches_sklearn():
    """alpha=0 with a never-toggled feature: the min-norm solution, not garbage (lstsq pitfall)."""
    x, y, w, valid = problem(f=6)
    x = x.clone()
    x[..., 3] = True  # constant column: rank deficient after centring
    fit = Ridge(alpha=0.0, dtype=F64).fit(x, y, w, valid)
    for b in range(x.shape[0]):
        X, Y, W = x[b].double().numpy(), y[b, :, 0].numpy(), w[b].numpy()
        sk = LinearRegression().fit(X, Y, sample_weight=W)
        np.testing.assert_allclose(fit.coef[b, 0].numpy(), sk.coef_, atol=1e-8)
        assert np.isfinite(fit.coef.numpy()).all()


def test_padded_features_get_zero():
    x, y, w, valid = problem(f=8)
    valid = valid.clone()
    valid[1, 5:] = False
    x = x.clone()
    x[1, :, 5:] = True  # the sampler keeps padding on
    fit = Ridge(dtype=F64).fit(x, y, w, valid)
    assert (fit.coef[1, :, 5:] == 0).all()
    ref = Ridge(dtype=F64).fit(x[1:2, :, :5], y[1:2], w[1:2], valid[1:2, :5])
    torch.testing.assert_close(fit.coef[1:2, :, :5], ref.coef)
    torch.testing.assert_close(fit.score[1:2], ref.score)


def test_klasso_selects_true_support():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(2, 800, 12, generator=g) < 0.5
    y = (4 * x[..., 2] - 3 * x[..., 7] + 2 * x[..., 9]).double().unsqueeze(-1)
    y = y + 0.05 * torch.randn(y.shape, generator=g, dtype=F64)
    w = torch.ones(2, 800, dtype=F64)
    fit = KLasso(k=3, dtype=F64).fit(x, y, w, torch.ones(2, 12, dtype=torch.bool))
    support = fit.coef[:, 0] != 0
    assert support.sum(1).tolist() == [3, 3]
    assert support[:, [2, 7, 9]].all()
    # the refit is least squares on the support
    X = x[0][:, [2, 7, 9]].double().numpy()
    sk = LinearRegression().fit(X, y[0, :, 0].numpy())
    np.testing.assert_allclose(fit.coef[0, 0, [2, 7, 9]].numpy(), sk.coef_, atol=1e-8)


def test_constant_target_scores_like_sklearn():
    x, y, w, valid = problem()
    y = torch.full_like(y, 0.5)
    fit = Ridge(dtype=F64).fit(x, y, w, valid)
    assert torch.all(fit.coef.abs() < 1e-12)
    assert torch.all(fit.score == 1.0)


def test_surrogates_validate_and_resolve():
    with pytest.raises(ValueError, match="`alpha` must be finite and >= 0, got -1.0"):
        Ridge(alpha=-1.0)
    with pytest.raises(ValueError, match="`k` must be >= 1, got 0"):
        KLasso(k=0)
    with pytest.raises(ValueError, match="`surrogate` must be a Surrogate or one of"):
        resolve_surrogate("forest")
    assert isinstance(resolve_surrogate("lasso"), Lasso)


def test_fit_does_not_modify_inputs():
    x, y, w, valid = problem()
    copies = [t.clone() for t in (x, y, w, valid)]
    Ridge().fit(x, y, w, valid)
    Lasso().fit(x, y, w, valid)
    for a, b in zip(copies, (x, y, w, valid)):
        assert torch.equal(a, b)


def test_each_lasso_fit_stops_on_its_own_so_its_neighbours_change_nothing():
    from torchlime.stages.surrogate import fista_lasso

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 40, 6, generator=g, dtype=torch.float64)
    gram = x.transpose(1, 2) @ x / 40
    rhs = x.transpose(1, 2) @ torch.randn(3, 40, 2, generator=g, dtype=torch.float64) / 40
    gram[2] *= 50  # an ill-conditioned neighbour that needs many more iterations than the others
    lam = torch.full((3, 1, 2), 0.01, dtype=torch.float64)
    together = fista_lasso(gram, rhs, lam, torch.zeros_like(rhs), 5000, 1e-6)
    for b in range(3):
        alone = fista_lasso(gram[b : b + 1], rhs[b : b + 1], lam[b : b + 1], torch.zeros_like(rhs[:1]), 5000, 1e-6)
        assert torch.equal(alone, together[b : b + 1])
