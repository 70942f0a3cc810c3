"""captum's ``Lime`` and ``KernelShap`` without a ``feature_mask``: the fits run in sample space.

With one feature per element (3,072 at 3x32x32, 150,528 at 3x224x224) and captum's 25 samples, the (F, F)
normal equations are never formed: KernelShap's least squares is scikit-learn's ``LinearRegression``
(minimum norm), Lime's Lasso is scikit-learn's ``Lasso`` with sample weights, both on the same samples.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pytest
import torch

pytest.importorskip("captum", reason="captum is a test extra: pip install -e '.[test]'")
sklearn_linear = pytest.importorskip("sklearn.linear_model")

from captum._utils.models.linear_model import SkLearnLasso  # noqa: E402
from captum.attr import KernelShap as CaptumKernelShap  # noqa: E402
from captum.attr import Lime as CaptumLime  # noqa: E402

from torchlime.compat.captum import KernelShap, Lime  # noqa: E402
from torchlime.engine.explainer import explain  # noqa: E402
from torchlime.engine.sizes import SizeError, check_sizes  # noqa: E402
from torchlime.stages import normal as normal_stage  # noqa: E402
from torchlime.stages.sample_space import SampleLasso, SampleRidge, design  # noqa: E402
from torchlime.stages.surrogate import Lasso, Ridge  # noqa: E402
from torchlime.stages.weighting import ExponentialKernel  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def convnet(seed: int = 0) -> torch.nn.Module:
    """A small CNN whose logits vary over the samples (any input size)."""
    torch.manual_seed(seed)
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)
    )
    nn.init.kaiming_normal_(net[0].weight, nonlinearity="relu")
    nn.init.normal_(net[4].weight)
    return net.eval()


@pytest.fixture
def no_normal_equations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every ``NormalAccumulator`` built (the (F, F) sums of the normal-equation path)."""
    built: list[int] = []
    init = normal_stage.NormalAccumulator.__init__

    def counting(self: object, batch: int, n_features: int, *args: object, **kwargs: object) -> None:
        built.append(n_features)
        init(self, batch, n_features, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(normal_stage.NormalAccumulator, "__init__", counting)
    return built


def samples(b: int, s: int, f: int, t: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Bernoulli(1/2) masks (B, S, F), noisy linear outputs (B, S, T), weights (B, S)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.bernoulli(torch.full((b, s, f), 0.5), generator=g).double()
    y = x @ (0.05 * torch.randn(b, f, t, generator=g, dtype=torch.float64)) + 0.01 * torch.randn(
        b, s, t, generator=g, dtype=torch.float64
    )
    return x, y, 0.5 + torch.rand(b, s, generator=g, dtype=torch.float64)


def every(b: int, f: int) -> torch.Tensor:
    return torch.ones(b, f, dtype=torch.bool)


def test_min_norm_least_squares_is_sklearns_linear_regression() -> None:
    x, y, w = samples(2, 20, 300, 2)
    w[:, :2] = 1e6  # KernelShap's end points
    fit = SampleRidge(dtype=torch.float64).fit(x, y, w, every(2, 300))
    for i in range(2):
        ref = sklearn_linear.LinearRegression().fit(x[i].numpy(), y[i].numpy(), sample_weight=w[i].numpy())
        np.testing.assert_allclose(fit.coef[i].numpy(), ref.coef_, atol=1e-9)
        np.testing.assert_allclose(fit.intercept[i].numpy(), ref.intercept_, atol=1e-8)
    ridge = SampleRidge(alpha=2.0, dtype=torch.float64).fit(x, y, w, every(2, 300))
    normal = Ridge(alpha=2.0, dtype=torch.float64).fit(x, y, w, every(2, 300))  # the same objective on (F, F)
    torch.testing.assert_close(ridge.coef, normal.coef, atol=1e-10, rtol=0)
    torch.testing.assert_close(ridge.score, normal.score, atol=1e-10, rtol=0)


def test_lasso_is_sklearns_lasso_with_sample_weights() -> None:
    x, y, w = samples(3, 30, 200, 2, seed=1)
    fit = SampleLasso(alpha=0.01, dtype=torch.float64).fit(x, y, w, every(3, 200))
    for i in range(3):
        for j in range(2):
            ref = sklearn_linear.Lasso(alpha=0.01, tol=1e-12, max_iter=100_000)
            ref.fit(x[i].numpy(), y[i, :, j].numpy(), sample_weight=w[i].numpy())
            np.testing.assert_allclose(fit.coef[i, j].numpy(), ref.coef_, atol=1e-8)
            assert abs(float(fit.intercept[i, j]) - ref.intercept_) < 1e-8


def test_lasso_gives_equal_columns_weight_as_coordinate_descent_does() -> None:
    x, y, w = samples(1, 30, 200, 1, seed=3)
    x[:, :, 1] = x[:, :, 0]  # two features always hidden together
    y = y + 0.5 * x[:, :, :1]
    beta = SampleLasso(alpha=0.01, dtype=torch.float64).fit(x, y, w, every(1, 200)).coef[0, 0]
    ref = sklearn_linear.Lasso(alpha=0.01, tol=1e-12, max_iter=100_000)
    ref.fit(x[0].numpy(), y[0, :, 0].numpy(), sample_weight=w[0].numpy())
    assert float(beta[0]) > 0.4 and float(beta[1]) == 0.0  # the lower index takes the weight
    np.testing.assert_allclose(beta.numpy(), ref.coef_, atol=1e-9)


def test_lasso_on_a_deep_degenerate_path_is_an_optimum() -> None:
    """25 binary samples of 3,000 features, a small penalty: the optimum is not unique (scikit-learn's has more
    features than the design's rank); this one has the same objective and at most rank features."""
    x, y, w = samples(1, 25, 3000, 1, seed=2)
    x[:, :, 1] = x[:, :, 0]
    y = y + 0.5 * x[:, :, :1]
    beta = SampleLasso(alpha=0.002, dtype=torch.float64).fit(x, y, w, every(1, 3000)).coef[0, 0]
    ref = sklearn_linear.Lasso(alpha=0.002, tol=1e-12, max_iter=100_000)
    ref.fit(x[0].numpy(), y[0, :, 0].numpy(), sample_weight=w[0].numpy())
    d = design(x, y, w, every(1, 3000))

    def objective(b: torch.Tensor) -> float:
        r = d.y[0, :, 0] - d.x[0] @ b
        return float(0.5 * (r @ r) + 0.002 * b.abs().sum())

    assert objective(beta) <= objective(torch.from_numpy(ref.coef_)) + 1e-12
    assert int((beta != 0).sum()) <= 24 < int((ref.coef_ != 0).sum())


def test_the_engine_fits_in_sample_space_as_on_normal_equations(no_normal_equations: list[int]) -> None:
    net = torch.nn.Sequential(torch.nn.Linear(400, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).eval()
    x, feats = torch.randn(2, 400, generator=torch.Generator().manual_seed(0)), torch.arange(400).expand(2, 400)
    call = dict(target=[[0, 1]], n_samples=100, generator=0, return_samples=True)
    ours = explain(net, x, feats, surrogate=SampleRidge(alpha=1.0, dtype=torch.float64), **call)
    assert no_normal_equations == [] and ours.samples is not None and ours.weights is not None
    theirs = explain(net, x, feats, surrogate=Ridge(alpha=1.0, dtype=torch.float64), **call)
    for name in ("coef", "intercept", "score", "local_pred"):
        torch.testing.assert_close(getattr(ours, name), getattr(theirs, name), atol=1e-10, rtol=0)
    lasso = explain(net, x, feats, surrogate=SampleLasso(alpha=0.01), **call)
    torch.testing.assert_close(
        lasso.coef, explain(net, x, feats, surrogate=Lasso(alpha=0.01), **call).coef, atol=1e-5, rtol=0
    )
    again = ours.refit(surrogate=SampleLasso(alpha=0.01))
    torch.testing.assert_close(again.coef, lasso.coef)
    with pytest.raises(ValueError, match="sample space.*not 'auto'"):
        explain(net, x, feats, surrogate=SampleRidge(), n_samples="auto")
    with pytest.raises(ValueError, match="width='auto'.*number width"):
        explain(net, x, feats, surrogate=SampleRidge(), kernel=ExponentialKernel(width="auto"), n_samples=50)


def test_the_size_check_counts_the_samples_not_f_squared() -> None:
    cpu = torch.device("cpu")
    with pytest.raises(SizeError, match=r"normal equations \(B, F, F\)"):
        check_sizes(1, 25, 10**6, device=cpu)  # (F, F) float64: 8 TB
    check_sizes(1, 25, 10**6, device=cpu, sample_space=True)  # (S, F) float64: 200 MB


@pytest.mark.parametrize("make", [lambda net: Lime(net, SkLearnLasso(alpha=1e-4)), KernelShap], ids=["lime", "kshap"])
def test_224_without_feature_mask_runs_in_sample_space(make: Callable, no_normal_equations: list[int]) -> None:
    net = convnet()
    x = torch.rand(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    attr = make(net).attribute(x, target=0, n_samples=10)  # 150,528 features: (F, F) would take 181 GB
    assert attr.shape == x.shape and bool(torch.isfinite(attr).all()) and bool((attr != 0).any())
    assert no_normal_equations == []


def test_kernel_shap_agrees_with_captum_without_feature_mask(no_normal_equations: list[int]) -> None:
    net, x = convnet(), torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    out = []
    for cls in (CaptumKernelShap, KernelShap):  # captum's default n_samples (25) for 192 features
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(cls(net).attribute(x, target=[0, 1]))
    torch.testing.assert_close(out[1], out[0], atol=1e-4, rtol=0)
    assert no_normal_equations == []


def test_lime_is_sklearns_lasso_on_captums_own_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """captum's SkLearnLasso stops at scikit-learn's tolerance in float32: the same data solved exactly."""
    net, x = convnet(), torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    fit = sklearn_linear.Lasso.fit

    def capture(self: object, xs: np.ndarray, ys: np.ndarray, sample_weight: np.ndarray) -> object:
        done = fit(self, xs, ys, sample_weight=sample_weight)
        seen.append((xs.copy(), ys.copy(), sample_weight.copy(), self.coef_.copy()))  # type: ignore[attr-defined]
        return done

    monkeypatch.setattr(sklearn_linear.Lasso, "fit", capture)
    torch.manual_seed(0)
    theirs = CaptumLime(net).attribute(x, target=0)
    torch.manual_seed(0)
    ours = Lime(net).attribute(x, target=0, return_input_shape=False)
    ((xs, ys, ws, _),) = seen
    exact = fit(sklearn_linear.Lasso(alpha=0.01, tol=1e-12, max_iter=100_000), xs.astype(np.float64),
                ys.astype(np.float64).ravel(), sample_weight=ws.astype(np.float64))  # fmt: skip
    np.testing.assert_allclose(ours[0].numpy(), exact.coef_, atol=1e-5)
    np.testing.assert_allclose(ours[0].numpy(), theirs.flatten().numpy(), atol=2e-2)  # captum's own tolerance
