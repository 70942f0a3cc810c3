"""``Explanation.coef_se`` (``torchlime.stages.standard_error``): the formula against a slow reference, 95 %
intervals calibrated against a large-N answer, each surrogate's estimator, and the record's life (pending
until read, sliced, moved, saved and loaded)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchlime
from torchlime.methods.kernel_shap import KernelShapRegression
from torchlime.stages.normal import normal_equations
from torchlime.stages.standard_error import kernel_shap_se, residual_ss, ridge_se
from torchlime.stages.surrogate import KLasso, Ridge


def _mlp(f: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(f, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)).eval()


def _reference_se(x, y, w, alpha):
    """NumPy: sqrt(σ² A⁻¹ G A⁻¹ + (α A⁻¹ β)²) of one weighted ridge fit, A = G + αI, from the samples."""
    x, y, w = (np.asarray(t, dtype=np.float64) for t in (x, y, w))
    xc = x - (w @ x) / w.sum()
    yc = y - (w @ y) / w.sum()
    gram = xc.T @ (w[:, None] * xc)
    a_inv = np.linalg.inv(gram + alpha * np.eye(x.shape[1]))
    beta = a_inv @ (xc.T @ (w * yc))
    resid = yc - xc @ beta
    n_eff = w.sum() ** 2 / (w**2).sum()
    sigma2 = (w * resid**2).sum() / (n_eff - x.shape[1] - 1)
    var = sigma2 * np.diag(a_inv @ gram @ a_inv) + (alpha * a_inv @ beta) ** 2
    return np.sqrt(var), beta


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_ridge_se_matches_a_slow_reference(alpha):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 60, 5, generator=g) < 0.5
    y = x.double() @ torch.randn(5, 1, generator=g, dtype=torch.float64) + 0.3 * torch.randn(
        2, 60, 1, generator=g, dtype=torch.float64
    )
    w = torch.rand(2, 60, generator=g, dtype=torch.float64) + 0.1
    valid = torch.ones(2, 5, dtype=torch.bool)
    fit = Ridge(alpha=alpha, dtype=torch.float64).fit(x, y, w, valid)
    ne = normal_equations(x, y, w)
    se = ridge_se(ne, residual_ss(ne, fit.coef), valid, alpha, fit.coef)
    for b in range(2):
        expected, beta = _reference_se(x[b].double(), y[b, :, 0], w[b], alpha)
        np.testing.assert_allclose(fit.coef[b, 0].numpy(), beta, rtol=1e-8)
        np.testing.assert_allclose(se[b, 0].numpy(), expected, rtol=1e-6)


def test_ridge_se_pads_with_zero_and_drops_unidentified_directions():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(1, 50, 4, generator=g) < 0.5
    x[..., 3] = x[..., 2]  # two identical features: least squares cannot split them
    y = x.double()[..., :1] + 0.1 * torch.randn(1, 50, 1, generator=g, dtype=torch.float64)
    valid = torch.tensor([[True, True, True, True]])
    fit = Ridge(alpha=0.0, dtype=torch.float64).fit(x, y, torch.ones(1, 50, dtype=torch.float64), valid)
    ne = normal_equations(x, y, torch.ones(1, 50))
    se = ridge_se(ne, residual_ss(ne, fit.coef), valid, 0.0)
    assert torch.isfinite(se).all() and (se > 0).all()  # the pseudo-inverse's: finite
    se = ridge_se(ne, residual_ss(ne, fit.coef), torch.tensor([[True, True, False, False]]), 0.0)
    assert se[0, 0, 2:].tolist() == [0.0, 0.0]


def test_default_ridge_intervals_cover_the_large_n_answer():
    """95 % intervals ``coef ± 1.96 coef_se`` of the default fit (Ridge(alpha=0.01), N = 1000) hold the N = 16384
    answer 90-98 % of the time: with independent masks, the formula's ("sandwich"); with the default factorial
    masks, whose error is far smaller, the formula's scaled to the design's own error ("design"), whose intervals
    are several times narrower."""
    f, batch = 12, 12
    net, x, feats = _mlp(f), torch.randn(batch, f, generator=torch.Generator().manual_seed(1)), torch.arange(f)
    coverage, width = {}, {}
    for sampler, method in (("bernoulli", "sandwich"), (None, "design")):
        how = {} if sampler is None else {"sampler": sampler}
        reference = torchlime.explain(net, x, feats.view(1, f), n_samples=16384, generator=123, **how).coef
        hits, ses = [], []
        for seed in range(4):
            exp = torchlime.explain(net, x, feats.view(1, f), generator=seed, **how)  # the default fit, N = 1000
            assert exp.se_method == method
            hits.append((exp.coef - reference).abs() <= 1.96 * exp.coef_se)
            ses.append(exp.coef_se)
        coverage[method] = float(torch.stack(hits).float().mean())
        width[method] = float(torch.stack(ses).median())
    assert 0.90 <= coverage["sandwich"] <= 0.98, coverage
    assert 0.90 <= coverage["design"] <= 0.98, coverage
    assert width["design"] < width["sandwich"] / 3, width


def test_kernel_shap_se_matches_the_spread_of_repeated_fits():
    """Each KernelSHAP design's estimate against the spread of 48 fits of one input: the independent-draws
    formula under the plain design (its assumption), the pairs' strata under the paired designs."""
    f = 10
    net = _mlp(f, seed=2)
    x = torch.randn(1, f, generator=torch.Generator().manual_seed(3)).expand(48, f)  # 48 fits of one input
    feats = torch.arange(f).view(1, f)

    def se_over_spread(preset: str, method: str) -> float:
        exp = torchlime.explain(net, x, feats, preset=preset, n_samples=300, generator=0)  # type: ignore[arg-type]
        assert exp.se_method == method
        spread = exp.coef.double().std(0)  # (T, F): the sampling error across the 48 fits
        return float((exp.coef_se.double().median(0).values / spread).median())

    assert 0.75 < se_over_spread("kernel_shap_plain", "kernel_shap") < 1.35
    assert 0.75 < se_over_spread("kernel_shap", "pairs") < 1.35
    ne = normal_equations(torch.ones(1, 3, f, dtype=torch.bool), torch.zeros(1, 3, 1), torch.ones(1, 3))
    assert kernel_shap_se(ne._replace(raw=None), torch.ones(1, 1), torch.ones(1, f, dtype=torch.bool)).isnan().all()
    assert KernelShapRegression.se_method == "kernel_shap"


def test_each_surrogates_record():
    f = 6
    net, feats = _mlp(f), torch.arange(f).view(1, f)
    x = torch.randn(3, f, generator=torch.Generator().manual_seed(0))
    bayes = torchlime.explain(net, x, feats, surrogate="bayes", n_samples=200)
    assert bayes.coef_se is bayes.coef_std and bayes.se_method == "posterior" and bayes.coef_se_record is None
    lasso = torchlime.explain(net, x, feats, surrogate="lasso", n_samples=200)
    assert lasso.coef_se is None and lasso.se_method == "bootstrap" and "return_samples=True" in repr(lasso)
    quick = KLasso(k=3, n_lambdas=5, iters_per_lambda=30)
    kept = torchlime.explain(net, x, feats, surrogate=quick, n_samples=200, return_samples=True)
    again = kept.refit()
    assert kept.coef_se.shape == (3, 1, f) and torch.equal(kept.coef_se, again.coef_se)  # seeded
    assert (kept.coef_se[kept.coef == 0] >= 0).all() and (kept.coef_se > 0).any()
    ridge = torchlime.explain(net, x, feats, n_samples=200)
    assert ridge.coef_se_record.value is None  # pending: the call computed nothing for it
    assert "coef_se (design)" in repr(ridge) and ridge.meta["coef_se_method"] == "design"
    assert ridge.coef_se_record.value is not None


def test_the_record_is_sliced_moved_saved_and_loaded(tmp_path):
    f = 6
    net, feats = _mlp(f), torch.arange(f).view(1, f)
    x = torch.randn(3, f, generator=torch.Generator().manual_seed(0))
    exp = torchlime.explain(net, x, feats, n_samples=200, target="all")
    part = exp[1:]  # sliced before the full one was read: still pending
    assert part.coef_se_record.value is None
    assert torch.equal(part.coef_se, exp.coef_se[1:]) and torch.equal(exp[0].coef_se, exp.coef_se[:1])
    assert torch.equal(exp.to("cpu").coef_se, exp.coef_se)
    exp.save(tmp_path / "e.pt")
    loaded = torchlime.Explanation.load(tmp_path / "e.pt")
    assert torch.equal(loaded.coef_se, exp.coef_se) and loaded.se_method == "design"
    idx, values = exp.top_features(3, by="t")
    t = exp.coef.abs() / exp.coef_se
    assert torch.equal(idx, t.topk(3, dim=-1).indices) and torch.equal(values, exp.coef.gather(-1, idx))
    lasso = torchlime.explain(net, x, feats, surrogate="lasso", n_samples=200)
    with pytest.raises(ValueError, match=r"`by` 't' ranks by \|coef\| / coef_se, but this explanation has no"):
        lasso.top_features(2, by="t")
