"""BayLIME (``torchlime.methods.baylime.BayesianRidge``, ``surrogate="bayes"``) against scikit-learn's
``BayesianRidge`` with sample weights, the coverage of its 95 % intervals, and its picture.

scikit-learn has no switch that freezes the hyperparameters, so the fixed-hyperparameter parity goes
through its own Gamma hyperpriors: Gamma(shape a*K, rate K) has mean a and variance a / K, so with
``alpha_init=a, alpha_1=a*K, alpha_2=K`` (and the same for lambda) and K = 1e12 its MacKay update
returns a to about 1e-10 relative, and its loop runs with the hyperparameters fixed. A second route
reads back the ``alpha_`` and ``lambda_`` of a ``max_iter=1`` fit (its final ``coef_`` and ``sigma_`` are
computed with those). Informative priors are matched by the change of variables beta = mu_0 + D beta'
(D = p^-1/2): scikit-learn fits beta' on the columns X D and the targets y - X mu_0 with lambda = 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime import explain
from torchlime.engine.explanation import Explanation
from torchlime.engine.registry import resolve_surrogate
from torchlime.methods.baylime import BayesianRidge

SkBayesianRidge = pytest.importorskip("sklearn.linear_model").BayesianRidge  # optional: skip, not a collection error

F64 = torch.float64
K = 1e12


def problem(b=3, s=150, f=7, t=2, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(b, s, f, generator=g) < 0.5
    x[:, 0] = True
    beta = torch.randn(b, f, t, generator=g, dtype=F64)
    y = x.double() @ beta + 0.5 * torch.randn(b, s, t, generator=g, dtype=F64) + 1.5
    w = torch.rand(b, s, generator=g, dtype=F64) + 0.05
    valid = torch.arange(f) < torch.tensor([f, f - 2, f - 3][:b]).unsqueeze(1)  # padded features
    return x.to(device), y.to(device), w.to(device), valid.to(device)


def check(fit, sk, i, j, n, tol, shift=None, scale=None):
    shift = np.zeros(n) if shift is None else shift
    scale = np.ones(n) if scale is None else scale
    np.testing.assert_allclose(fit.coef[i, j, :n].cpu().double().numpy(), shift + scale * sk.coef_, atol=tol, rtol=0)
    np.testing.assert_allclose(
        fit.coef_std[i, j, :n].cpu().double().numpy(), scale * np.sqrt(np.diag(sk.sigma_)), atol=tol, rtol=0
    )
    assert (fit.coef[i, j, n:] == 0).all() and (fit.coef_std[i, j, n:] == 0).all()


@pytest.mark.parametrize("dtype,tol", [(F64, 1e-9), (torch.float32, 1e-4)], ids=["float64", "float32"])
def test_non_informative_prior_matches_sklearn(device, dtype, tol):
    """Evidence maximisation: scikit-learn's defaults (max_iter=300, tol=1e-3, Gamma(1e-6, 1e-6) hyperpriors)."""
    x, y, w, valid = problem(device=device)
    fit = BayesianRidge(dtype=dtype).fit(x, y, w, valid)
    assert fit.coef.device.type == device.type and fit.coef_std.dtype == dtype
    for i in range(x.shape[0]):
        n = int(valid[i].sum())
        for j in range(y.shape[2]):
            X, Y, W = x[i, :, :n].double().cpu().numpy(), y[i, :, j].cpu().numpy(), w[i].cpu().numpy()
            sk = SkBayesianRidge().fit(X, Y, sample_weight=W)
            check(fit, sk, i, j, n, tol)
            assert fit.intercept[i, j].item() == pytest.approx(sk.intercept_, abs=tol)
            assert fit.score[i, j].item() == pytest.approx(sk.score(X, Y, sample_weight=W), abs=tol)


def test_sklearn_settings_are_honoured():
    x, y, w, valid = problem(seed=4, s=40)
    settings = dict(
        max_iter=3, tol=1e-8, alpha_1=0.3, alpha_2=2.0, lambda_1=1e-3, lambda_2=0.5, alpha_init=2.0, lambda_init=0.1
    )
    fit = BayesianRidge(dtype=F64, **settings).fit(x, y, w, valid)
    for i in range(3):
        n = int(valid[i].sum())
        sk = SkBayesianRidge(**settings).fit(x[i, :, :n].double().numpy(), y[i, :, 0].numpy(), sample_weight=w[i])
        check(fit, sk, i, 0, n, 1e-9)


@pytest.mark.parametrize("alpha,lam", [(4.0, 0.5), (0.2, 30.0)])
def test_fixed_hyperparameters_match_sklearn(alpha, lam):
    x, y, w, valid = problem(seed=1)
    fit = BayesianRidge(alpha=alpha, prior_precision=lam, dtype=F64).fit(x, y, w, valid)
    for i in range(3):
        n = int(valid[i].sum())
        X, Y, W = x[i, :, :n].double().numpy(), y[i, :, 1].numpy(), w[i].numpy()
        pinned = SkBayesianRidge(
            alpha_init=alpha, lambda_init=lam, alpha_1=alpha * K, alpha_2=K, lambda_1=lam * K, lambda_2=K
        ).fit(X, Y, sample_weight=W)
        assert pinned.alpha_ == pytest.approx(alpha, rel=1e-8) and pinned.lambda_ == pytest.approx(lam, rel=1e-8)
        check(fit, pinned, i, 1, n, 1e-6)
        once = SkBayesianRidge(max_iter=1, alpha_init=alpha, lambda_init=lam).fit(X, Y, sample_weight=W)
        read_back = BayesianRidge(alpha=float(once.alpha_), prior_precision=float(once.lambda_), dtype=F64)
        check(read_back.fit(x[i : i + 1], y[i : i + 1, :, 1:], w[i : i + 1], valid[i : i + 1]), once, 0, 0, n, 1e-9)


@pytest.mark.parametrize("alpha", [None, 2.5], ids=["partial", "full"])
def test_informative_prior_matches_sklearn(alpha, device):
    """Prior mean (B, T, F) and per-feature precision (F,): full (alpha fixed) and partial (alpha estimated)."""
    x, y, w, valid = problem(seed=2, device=device)
    g = torch.Generator().manual_seed(5)
    mu0 = torch.randn(3, 2, 7, generator=g, dtype=F64)
    prec = torch.rand(7, generator=g, dtype=F64) * 4 + 0.5
    fit = BayesianRidge(prior_mean=mu0.to(device), prior_precision=prec.to(device), alpha=alpha, dtype=F64).fit(
        x, y, w, valid
    )
    a_fix = {} if alpha is None else dict(alpha_init=alpha, alpha_1=alpha * K, alpha_2=K)
    for i in range(3):
        n = int(valid[i].sum())
        X = x[i, :, :n].double().cpu().numpy()
        scale = prec[:n].rsqrt().numpy()
        for j in range(2):
            m = mu0[i, j, :n].numpy()
            Y = y[i, :, j].cpu().numpy() - X @ m
            sk = SkBayesianRidge(lambda_init=1.0, lambda_1=K, lambda_2=K, **a_fix).fit(
                X * scale, Y, sample_weight=w[i].cpu().numpy()
            )
            check(fit, sk, i, j, n, 1e-6, shift=m, scale=scale)


def test_prior_shapes_and_strength():
    x, y, w, valid = problem(seed=3)
    free = BayesianRidge(dtype=F64).fit(x, y, w, valid)
    target = torch.linspace(-1, 1, 7, dtype=F64)
    strong = BayesianRidge(prior_mean=target, prior_precision=1e9, dtype=F64).fit(x, y, w, valid)
    torch.testing.assert_close(strong.coef, (target * valid.unsqueeze(1)).expand_as(strong.coef), atol=1e-6, rtol=0)
    assert (strong.coef_std <= 1e-4).all() and (free.coef_std[valid.unsqueeze(1).expand_as(free.coef)] > 1e-3).all()
    same = BayesianRidge(
        prior_mean=free.coef, prior_precision=torch.full((3, 2, 7), 2.0, dtype=F64), alpha=1.0, dtype=F64
    ).fit(x, y, w, valid)
    scalar = BayesianRidge(prior_mean=free.coef, prior_precision=2.0, alpha=1.0, dtype=F64).fit(x, y, w, valid)
    torch.testing.assert_close(same.coef, scalar.coef)
    torch.testing.assert_close(same.coef_std, scalar.coef_std)


def planted(seed, batch=64, n_targets=4, n_features=8, sigma=0.3):
    """A linear model of the masks plus Gaussian noise: input b's true coefficients are x[b] * beta."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(batch, 1, n_features, generator=g) + 0.5
    beta = torch.randn(n_features, n_targets, generator=g)
    noise = torch.Generator().manual_seed(seed + 100)

    def model(v):
        return v.flatten(1) @ beta + 0.7 + sigma * torch.randn(v.shape[0], n_targets, generator=noise)

    truth = x.flatten(1).unsqueeze(1) * beta.t().unsqueeze(0)  # (B, T, F)
    return model, x, torch.arange(n_features).view(1, 1, n_features), truth


def test_intervals_cover_the_planted_coefficients():
    """95 % intervals (coef +- 1.96 std) of a planted linear model with Gaussian noise (uniform kernel,
    the noise model BayLIME assumes) hold the true coefficient in 93-97 % of 4096 cases."""
    hits, total = 0, 0
    for seed in range(2):
        model, x, feats, truth = planted(seed)
        exp = explain(model, x, feats, target="all", n_samples=256, kernel="uniform", surrogate="bayes", generator=seed)
        inside = (exp.coef - truth).abs() <= 1.96 * exp.coef_std
        hits, total = hits + int(inside.sum()), total + inside.numel()
    assert total == 4096
    assert 0.93 <= hits / total <= 0.97, hits / total


def test_engine_carries_coef_std(tmp_path):
    model, x, feats, _ = planted(0, batch=3)
    feats = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7], [0, 0, 1, 1, 2, 2, 3, 3], [0, 1, 2, 3, 4, 5, 5, 5]]).view(3, 1, 8)
    exp = explain(model, x, feats, target="all", n_samples=200, surrogate="bayes")
    assert exp.coef_std.shape == exp.coef.shape == (3, 4, 8) and exp.coef_std.dtype == torch.float32
    assert (exp.coef_std[~exp.valid.unsqueeze(1).expand_as(exp.coef)] == 0).all()
    assert (exp.coef_std[exp.valid.unsqueeze(1).expand_as(exp.coef)] > 0).all()
    exp.save(tmp_path / "e.pt")
    torch.testing.assert_close(Explanation.load(tmp_path / "e.pt").coef_std, exp.coef_std)
    # an informative prior from that explanation (same targets), as BayLIME's full prior
    again = explain(
        model,
        x,
        feats,
        target=exp.target,
        n_samples=200,
        generator=1,
        surrogate=BayesianRidge(prior_mean=exp, prior_precision=1e8, alpha=1.0),
    )
    torch.testing.assert_close(again.coef, exp.coef, atol=1e-4, rtol=0)
    assert isinstance(resolve_surrogate("bayes"), BayesianRidge)
    assert "BayesianRidge(prior_mean=tensor(3, 4, 8), prior_precision=100000000.0" in again.run.surrogate


def test_plot_coefficients_with_uncertainty():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchlime.image.viz import plot_coefficients_with_uncertainty

    model, x, feats, _ = planted(0, batch=2)
    exp = explain(model, x, feats, target="all", n_samples=200, surrogate="bayes")
    fig = plot_coefficients_with_uncertainty(exp, index=1, target_index=2, feature_names=list("abcdefgh"))
    from matplotlib.container import BarContainer, ErrorbarContainer

    ax = fig.axes[0]
    bars = next(c for c in ax.containers if isinstance(c, BarContainer))
    whiskers = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
    assert len(bars) == 8
    heights = np.array([b.get_height() for b in bars])
    np.testing.assert_allclose(heights, exp.coef[1, 2].numpy(), rtol=1e-6)
    spans = whiskers.lines[2][0].get_segments()  # the error bars: coef -+ 1.96 std
    np.testing.assert_allclose([s[1][1] - s[0][1] for s in spans], 2 * 1.96 * exp.coef_std[1, 2].numpy(), rtol=1e-5)
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abcdefgh")
    plt.close(fig)
    ridge = explain(model, x, feats, n_samples=50)  # a ridge explanation draws its coef_se
    fig = plot_coefficients_with_uncertainty(ridge)
    spans = next(c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)).lines[2][0].get_segments()
    np.testing.assert_allclose([s[1][1] - s[0][1] for s in spans], 2 * 1.96 * ridge.coef_se[0, 0].numpy(), rtol=1e-5)
    plt.close(fig)
    with pytest.raises(ValueError, match=r"`explanation` must carry standard errors \(coef_se\), .*'bootstrap'"):
        plot_coefficients_with_uncertainty(explain(model, x, feats, n_samples=50, surrogate="lasso"))
    with pytest.raises(ValueError, match=r"`feature_names` must name the 8 features of input 0, got 2 names"):
        plot_coefficients_with_uncertainty(exp, feature_names=["a", "b"])
    with pytest.raises(ValueError, match=r"`index` must be in \[0, 2\) and `target_index` in \[0, 4\), got 5 and 0"):
        plot_coefficients_with_uncertainty(exp, index=5)


def test_errors():
    x, y, w, valid = problem()
    with pytest.raises(
        TypeError,
        match=r"`prior_mean` must be None, a number, a floating tensor .* or an "
        r"Explanation, got list",
    ):
        BayesianRidge(prior_mean=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"`prior_precision` must be finite and > 0, got a tensor of shape \(7,\)"):
        BayesianRidge(prior_precision=-torch.ones(7))
    with pytest.raises(ValueError, match=r"`prior_precision` must be finite and > 0, got -1.0"):
        BayesianRidge(prior_precision=-1.0)
    with pytest.raises(ValueError, match=r"`prior_mean` must have shape \(F,\) or \(B, T, F\), got \(2, 7\)"):
        BayesianRidge(prior_mean=torch.zeros(2, 7))
    with pytest.raises(
        ValueError,
        match=r"`prior_mean` must have shape \(F,\) = \(7,\) or \(B, T, F\) = "
        r"\(3, 2, 7\) for this fit, got \(5,\)",
    ):
        BayesianRidge(prior_mean=torch.zeros(5)).fit(x, y, w, valid)
    with pytest.raises(ValueError, match=r"`alpha` must be finite and > 0, got 0.0"):
        BayesianRidge(alpha=0.0)
    with pytest.raises(ValueError, match=r"`max_iter` must be >= 1, got 0"):
        BayesianRidge(max_iter=0)
    with pytest.raises(TypeError, match=r"`tol` must be a number, got str"):
        BayesianRidge(tol="small")
