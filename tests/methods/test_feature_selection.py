"""lime's feature selection, batched: the chosen features equal ``LimeBase.feature_selection`` on the
explanation's own samples, weights and outputs; the refit equals lime's Ridge(alpha=1) on them."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

import torchlime
from torchlime.methods.feature_selection import METHODS, Select, select_features
from torchlime.stages import lars
from torchlime.stages.surrogate import Lasso, Ridge, normal_equations

from tests.methods.conftest import compare_lasso_path, lime_select

pytest.importorskip("lime.lime_base")  # optional packages: skip, not a collection error
sk_linear = pytest.importorskip("sklearn.linear_model")
SkRidge = sk_linear.Ridge


def small_problem(device, batch=16, seed=0):
    """A nonlinear model of 6 x 6 inputs; random feature maps of 9 to 14 features per input."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(36, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(
        device
    )
    x = torch.rand(batch, 1, 6, 6, device=device)
    feats = torch.randint(0, 14, (batch, 1, 6, 6), generator=torch.Generator().manual_seed(seed + 1))
    feats[: batch // 4] %= 9  # inputs with fewer features (padded up to F)
    return net, x, feats.to(device)


def explain_select(device, surrogate, n_samples=400, batch=16):
    net, x, feats = small_problem(device, batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.engine.quality.UnreliableExplanationWarning)
        return torchlime.explain(
            net,
            x,
            feats,
            target="top2",
            n_samples=n_samples,
            softmax=True,
            return_samples=True,
            surrogate=surrogate,
            generator=3,
        )


def lime_data(exp, b, t):
    fb = int(exp.n_features[b])
    return (
        exp.samples[b, :, :fb].double().cpu().numpy(),
        exp.outputs[b, :, t].double().cpu().numpy(),
        exp.weights[b].double().cpu().numpy(),
    )


@pytest.mark.parametrize(
    "method,ks",
    [("forward_selection", (2, 5)), ("highest_weights", (2, 5, 10)), ("lasso_path", (1, 4, 8, 13)), ("auto", (6, 7))],
)
def test_selection_equals_lime(method, ks, device):
    compared = 0
    for k in ks:
        surrogate = Select(k=k, method=method, n_samples=400 if method == "lasso_path" else None)
        exp = explain_select(device, surrogate)
        for b in range(exp.coef.shape[0]):
            for t in range(2):
                data, labels, weights = lime_data(exp, b, t)
                ours = exp.coef[b, t].nonzero().flatten().tolist()
                assert ours == lime_select(data, labels, weights, k, method), (method, k, b, t)
                assert len(ours) == min(k, data.shape[1]) or method == "lasso_path"
                compared += 1
    assert compared == 32 * len(ks)


def test_refit_is_limes_ridge_on_the_chosen_features():
    exp = explain_select("cpu", Select(k=4, method="forward_selection"))
    for b in range(6):
        for t in range(2):
            data, labels, weights = lime_data(exp, b, t)
            used = exp.coef[b, t].nonzero().flatten().numpy()
            reg = SkRidge(alpha=1.0).fit(data[:, used], labels, sample_weight=weights)
            np.testing.assert_allclose(exp.coef[b, t, used].double().numpy(), reg.coef_, rtol=1e-4, atol=1e-6)
            assert float(exp.intercept[b, t]) == pytest.approx(reg.intercept_, abs=1e-5)
            assert float(exp.score[b, t]) == pytest.approx(reg.score(data[:, used], labels, weights), abs=1e-5)
            assert float(exp.local_pred[b, t]) == pytest.approx(reg.predict(data[0:1, used])[0], abs=1e-5)


def test_lasso_path_equals_lime_on_many_paths(lars_kind):
    """Random paths (correlated columns, exactly sparse outputs, noise), float64 statistics."""
    rng = np.random.default_rng(0)
    compared = 0
    for trial in range(90):
        f = int(rng.integers(3, 20))
        s = int(rng.integers(30, 200)) if trial % 3 == 0 else int(rng.integers(f + 5, 3 * f + 10))
        density = 0.5 if trial % 3 == 0 else rng.random((s, 1))  # correlated columns
        x = (rng.random((s, f)) < density).astype(float)
        x[0] = 1
        w = np.exp(-3 * rng.random(s))
        beta = rng.normal(size=f)
        if trial % 3 == 0:
            beta[rng.random(f) < 0.6] = 0.0  # exactly sparse: the path stops once the correlations vanish
            y = x @ beta
        else:
            y = (x @ beta) * (trial % 3 == 2) + rng.normal(size=s)
        compared += compare_lasso_path(x, y, w, (1, 2, 4, 7, 12))
    assert compared == 450


#: small problems whose exact lasso path drops a feature (checked below by ``exact_lasso``, not by
#: counting what a scikit-learn release does): f, rows of the 0/1 data as bits, weights, outputs, and
#: two features whose exactly sparse outputs end the path with just them (no tie at alpha = 0)
DROPS = [
    (
        5,
        [31, 9, 19, 25, 27, 0, 0, 2, 29, 29, 27, 31],
        [0.077, 0.125, 0.147, 0.077, 0.071, 0.44, 0.077, 0.171, 0.999, 0.554, 0.096, 0.358],
        [1.551, 1.191, 1.496, 2.093, 2.534, 1.066, 1.038, -0.603, 0.775, 0.705, 1.84, 0.446],
        (1, 2),
    ),
    (
        4,
        [15, 15, 8, 15, 15, 5, 11, 7, 5],
        [0.887, 0.735, 0.152, 0.348, 0.425, 0.065, 0.146, 0.082, 0.779],
        [1.266, 1.936, 0.537, 1.654, 1.138, 2.827, 0.806, 1.167, 1.068],
        (0, 3),
    ),
    (
        5,
        [31, 31, 31, 10, 26, 0, 31, 6, 9, 12, 28, 0, 7],
        [0.097, 0.058, 0.913, 0.401, 0.497, 0.06, 0.27, 0.125, 0.8, 0.28, 0.854, 0.056, 0.389],
        [0.123, -0.011, -0.723, -3.364, 1.007, 0.216, -0.401, -1.627, -2.199, -1.335, 2.873, 0.363, -2.452],
        (0, 4),
    ),
    (
        5,
        [31, 31, 18, 2, 31, 31, 8, 0, 4],
        [0.808, 0.472, 0.206, 0.831, 0.171, 0.116, 0.127, 0.483, 0.526],
        [5.521, 4.877, 3.314, 2.003, 4.865, 4.718, 0.776, -0.975, -0.792],
        (1, 2),
    ),
    (
        4,
        [15, 4, 0, 11, 6, 0, 1, 15, 0, 15, 8, 10, 11, 6, 5],
        [0.503, 0.581, 0.08, 0.297, 0.982, 0.374, 0.342, 0.467, 0.129, 0.996, 0.589, 0.273, 0.252, 0.604, 0.087],
        [0.957, -1.983, -0.567, 0.957, 0.034, -0.276, 0.354, 0.569, -0.471, -0.02, -0.4, 0.58, 1.027, 0.091, -1.941],
        (0, 3),
    ),
    (
        5,
        [31, 4, 1, 14, 21, 9, 17, 17, 16, 8, 31, 6, 31, 8, 31],
        [0.709, 0.065, 0.072, 0.096, 0.138, 0.574, 0.272, 0.359, 0.597, 0.263, 0.374, 0.336, 0.09, 0.266, 0.265],
        [
            -0.856,
            -0.447,
            -0.458,
            -0.73,
            -1.453,
            0.925,
            -0.309,
            0.245,
            -0.567,
            1.946,
            -1.453,
            -2.682,
            -1.138,
            1.014,
            -1.159,
        ],
        (0, 4),
    ),
]


def bits(rows, f):
    return np.array([[(r >> (f - 1 - j)) & 1 for j in range(f)] for r in rows], dtype=float)


def drop_case(case):
    """(x, y, w, sparse y) of a planted case: its path drops a feature; with sparse outputs it stops early."""
    f, rows, w, y, planted = DROPS[case]
    sparse = np.zeros(f)
    sparse[list(planted)] = (1.5, -2.0)  # two of the f features
    x = bits(rows, f)
    return x, np.array(y), np.array(w), x @ sparse


@pytest.mark.parametrize("case", range(len(DROPS)))
def test_planted_paths_drop_and_stop(case):
    """The planted data hold what the comparison below needs, checked by the exact lasso."""
    x, y, w, y_sparse = drop_case(case)
    supports = lasso_supports(*centred_normal(x, y, w))
    assert any(a - b for a, b in zip(supports, supports[1:])), "the planted path must drop a feature"
    planted = set(DROPS[case][4])
    assert lasso_supports(*centred_normal(x, y_sparse, w))[-1] == planted, "the path must stop at the planted features"


@pytest.mark.parametrize("case", range(len(DROPS)))
def test_lasso_path_with_a_drop_and_with_a_stop_equals_lime(case, lars_kind):
    """A path that drops a feature, and on the same data with exactly sparse outputs a path that stops
    before every feature entered (both planted: the test above), compared with lime."""
    x, y, w, y_sparse = drop_case(case)
    f = x.shape[1]
    assert compare_lasso_path(x, y, w, range(1, f + 1)) == f
    assert compare_lasso_path(x, y_sparse, w, range(1, f + 1)) == f


def centred_normal(x, y, w):
    """The weighted centred normal equations (G, c) of one problem, in NumPy."""
    xc = (x - np.average(x, 0, w)) * np.sqrt(w)[:, None]
    yc = (y - np.average(y, weights=w)) * np.sqrt(w)
    return xc.T @ xc, xc.T @ yc


def exact_lasso(gram, rhs, lam):
    """argmin ½βᵀGβ - cᵀβ + λ‖β‖₁ by trying every sign pattern (small F, positive definite G): the
    pattern whose solution has its signs and satisfies the optimality conditions off its support."""
    f = len(rhs)
    for signs in itertools.product((-1, 0, 1), repeat=f):
        s = np.array(signs)
        on = s != 0
        beta = np.zeros(f)
        if on.any():
            beta[on] = np.linalg.solve(gram[np.ix_(on, on)], rhs[on] - lam * s[on])
            if not np.all(np.sign(beta[on]) == s[on]):
                continue
        if np.all(np.abs(rhs - gram @ beta)[~on] <= lam * (1 + 1e-9)):
            return beta
    raise AssertionError("no lasso solution found: is the Gram matrix positive definite?")


def lasso_supports(gram, rhs, n=60):
    """Supports of the exact lasso solutions along a decreasing grid of penalties."""
    lams = np.abs(rhs).max() * np.logspace(0, -6, n)[1:]
    return [set(np.flatnonzero(np.abs(exact_lasso(gram, rhs, lam)) > 1e-12).tolist()) for lam in lams]


def test_few_features_keep_all_and_sparse_everywhere():
    exp = explain_select("cpu", Select(k=12, method="highest_weights"))
    nz = (exp.coef != 0).sum(-1)
    assert torch.equal(nz, exp.n_features.clamp_max(12).unsqueeze(1).expand(-1, 2))
    assert bool((exp.coef[~exp.valid.unsqueeze(1).expand_as(exp.coef)] == 0).all())


def test_ties_go_to_the_lowest_index():
    x = torch.rand(1, 100, 6, generator=torch.Generator().manual_seed(0)) < 0.5
    y = torch.full((1, 100, 1), 0.7)  # constant outputs: every candidate scores the same
    ne = normal_equations(x, y, torch.ones(1, 100))
    valid = torch.ones(1, 6, dtype=torch.bool)
    for method in ("forward_selection", "highest_weights"):
        assert select_features(ne, valid, 3, method)[0, 0].nonzero().flatten().tolist() == [0, 1, 2]
    assert select_features(ne, valid, 3, "lasso_path", count=100)[0, 0].all()  # empty path: lime keeps all
    data = x[0].double().numpy()
    assert lime_select(data, np.full(100, 0.7), np.ones(100), 3, "lasso_path") == list(range(6))


def test_batch_and_targets_are_independent():
    g = torch.Generator().manual_seed(4)
    x = torch.rand(3, 200, 10, generator=g) < 0.5
    y = torch.randn(3, 200, 2, generator=g) + x[..., :2].float() * torch.tensor([2.0, -1.0])
    w = torch.rand(3, 200, generator=g)
    valid = torch.arange(10) < torch.tensor([10, 7, 9]).unsqueeze(1)
    for method in ("forward_selection", "highest_weights", "lasso_path"):
        whole = select_features(normal_equations(x, y, w), valid, 4, method, count=200)
        for b in range(3):
            for t in range(2):
                one = select_features(
                    normal_equations(x[b : b + 1], y[b : b + 1, :, t : t + 1], w[b : b + 1]),
                    valid[b : b + 1],
                    4,
                    method,
                    count=200,
                )
                assert torch.equal(whole[b, t], one[0, 0])


def test_other_refits_and_modalities():
    from torchlime.demo.text_data import CLS, MASK, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model
    from torchlime.text import explain_tokens

    model, _ = load_text_model()
    data = make_text_dataset(3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.engine.quality.UnreliableExplanationWarning)
        exp = explain_tokens(
            model,
            data.input_ids,
            attention_mask=data.attention_mask,
            special_ids=[CLS, SEP],
            mask_id=MASK,
            n_samples=200,
            surrogate=Select(k=3, method="auto"),
        )
        assert torch.equal((exp.coef != 0).sum(-1), torch.full((3, 1), 3))
        lasso = explain_select("cpu", Select(k=5, method="lasso_path", refit=Lasso(alpha=1e-4)))
    assert bool(((lasso.coef != 0).sum(-1) <= 5).all())


def test_errors():
    with pytest.raises(ValueError, match="`k` must be >= 1, got 0"):
        Select(k=0)
    with pytest.raises(TypeError, match="`k` must be an int >= 1, got float 2.0"):
        Select(k=2.0)
    with pytest.raises(ValueError, match=r"`method` must be one of \['forward_selection', .*got 'lars'"):
        Select(method="lars")
    with pytest.raises(TypeError, match="`refit` must be a Surrogate .*got str 'ridge'"):
        Select(refit="ridge")
    with pytest.raises(TypeError, match="`n_samples` must be an int >= 1, got bool True"):
        Select(n_samples=True)
    with pytest.raises(TypeError, match="`dtype` must be a floating torch.dtype, got dtype torch.int64"):
        Select(dtype=torch.long)
    assert set(METHODS) == {"forward_selection", "highest_weights", "lasso_path", "auto"}
    assert isinstance(Select().refit, Ridge) and Select().refit.alpha == 1.0


def test_sklearn_and_torch_paths_choose_the_same_features(monkeypatch):
    """Batches of fits with several targets and missing features: scikit-learn's path and torch's agree."""
    g = torch.Generator().manual_seed(1)
    for trial in range(40):
        b, t, f = 1 + trial % 3, 1 + trial % 2, int(torch.randint(3, 30, (1,), generator=g))
        s = int(torch.randint(f + 5, 300, (1,), generator=g))
        x = (torch.rand(b, s, f, generator=g) < 0.5).double()
        y = x[..., :3] @ torch.randn(3, t, generator=g).double() + 0.3 * torch.randn(b, s, t, generator=g).double()
        ne = normal_equations(x, y, torch.rand(b, s, generator=g).double(), torch.float64)
        valid = torch.ones(b, f, dtype=torch.bool)
        valid[0, f - 1 - trial % 2 :] = False
        count = torch.full((b,), float(s), dtype=torch.float64)
        for k in (1, 3, f):
            got = []
            for fits in (10**6, 0):
                monkeypatch.setattr(lars, "SKLEARN_FITS", fits)
                got.append(lars.lars_path(ne.gram, ne.rhs, valid, count, k=k))
            assert torch.equal(got[0], got[1]), (trial, k)
