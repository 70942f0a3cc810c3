"""lime's feature selection, batched: the chosen features equal ``LimeBase.feature_selection`` on the
explanation's own samples, weights and outputs; the refit equals lime's Ridge(alpha=1) on them."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import torchlime
from torchlime.selection import METHODS, Select, select_features
from torchlime.surrogate import Lasso, Ridge, normal_equations

LimeBase = pytest.importorskip("lime.lime_base").LimeBase  # optional packages: skip, not a collection error
sk_linear = pytest.importorskip("sklearn.linear_model")
SkRidge, lars_path = sk_linear.Ridge, sk_linear.lars_path

LIME = LimeBase(kernel_fn=None)


def lime_select(data, labels, weights, k, method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's LARS convergence warnings
        return sorted(np.asarray(LIME.feature_selection(data, labels, weights, k, method)).tolist())


def small_problem(device, batch=16, seed=0):
    """A nonlinear model of 6 x 6 inputs; random feature maps of 9 to 14 features per input."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(36, 16), torch.nn.Tanh(),
                              torch.nn.Linear(16, 4)).to(device)
    x = torch.rand(batch, 1, 6, 6, device=device)
    feats = torch.randint(0, 14, (batch, 1, 6, 6), generator=torch.Generator().manual_seed(seed + 1))
    feats[: batch // 4] %= 9  # inputs with fewer features (padded up to F)
    return net, x, feats.to(device)


def explain_select(device, surrogate, n_samples=400, batch=16):
    net, x, feats = small_problem(device, batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.quality.UnreliableExplanationWarning)
        return torchlime.explain(net, x, feats, target="top2", n_samples=n_samples, softmax=True,
                                 return_samples=True, surrogate=surrogate, generator=3)


def lime_data(exp, b, t):
    fb = int(exp.n_features[b])
    return (exp.samples[b, :, :fb].double().cpu().numpy(), exp.outputs[b, :, t].double().cpu().numpy(),
            exp.weights[b].double().cpu().numpy())


@pytest.mark.parametrize("method,ks", [("forward_selection", (2, 5)), ("highest_weights", (2, 5, 10)),
                                       ("lasso_path", (1, 4, 8, 13)), ("auto", (6, 7))])
def test_selection_equals_lime(method, ks, device):
    compared = 0
    for k in ks:
        surrogate = Select(num_features=k, method=method, n_samples=400 if method == "lasso_path" else None)
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
    exp = explain_select("cpu", Select(num_features=4, method="forward_selection"))
    for b in range(6):
        for t in range(2):
            data, labels, weights = lime_data(exp, b, t)
            used = exp.coef[b, t].nonzero().flatten().numpy()
            reg = SkRidge(alpha=1.0).fit(data[:, used], labels, sample_weight=weights)
            np.testing.assert_allclose(exp.coef[b, t, used].double().numpy(), reg.coef_, rtol=1e-4, atol=1e-6)
            assert float(exp.intercept[b, t]) == pytest.approx(reg.intercept_, abs=1e-5)
            assert float(exp.score[b, t]) == pytest.approx(reg.score(data[:, used], labels, weights), abs=1e-5)
            assert float(exp.local_pred[b, t]) == pytest.approx(reg.predict(data[0:1, used])[0], abs=1e-5)


def test_lasso_path_equals_lime_on_many_paths():
    """Paths with drops and early stops (outputs exactly linear in a few features), float64 statistics."""
    rng = np.random.default_rng(0)
    drops = stops = compared = 0
    for trial in range(90):
        f = int(rng.integers(3, 20))
        s = int(rng.integers(30, 200)) if trial % 3 == 0 else int(rng.integers(f + 5, 3 * f + 10))
        density = 0.5 if trial % 3 == 0 else rng.random((s, 1))  # correlated columns: paths with drops
        x = (rng.random((s, f)) < density).astype(float)
        x[0] = 1
        w = np.exp(-3 * rng.random(s))
        beta = rng.normal(size=f)
        if trial % 3 == 0:
            beta[rng.random(f) < 0.6] = 0.0  # exactly sparse: sklearn stops once the correlations vanish
            y = x @ beta
        else:
            y = (x @ beta) * (trial % 3 == 2) + rng.normal(size=s)
        xw = (x - np.average(x, 0, w)) * np.sqrt(w)[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, _, coefs = lars_path(xw, (y - np.average(y, weights=w)) * np.sqrt(w), method="lasso")
        nnz = (coefs != 0).sum(0)
        drops += int((np.diff(nnz) < 0).sum())
        stops += int(nnz[-1] < f)
        ne = normal_equations(torch.tensor(x)[None], torch.tensor(y)[None, :, None], torch.tensor(w)[None],
                              torch.float64)
        valid = torch.ones(1, f, dtype=torch.bool)
        for k in (1, 2, 4, 7, 12):
            got = select_features(ne, valid, k, "lasso_path", count=s)[0, 0].nonzero().flatten().tolist()
            assert got == lime_select(x, y, w, k, "lasso_path"), (trial, k)
            compared += 1
    assert drops >= 5 and stops >= 10 and compared == 450


def test_few_features_keep_all_and_sparse_everywhere():
    exp = explain_select("cpu", Select(num_features=12, method="highest_weights"))
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
                one = select_features(normal_equations(x[b:b + 1], y[b:b + 1, :, t:t + 1], w[b:b + 1]),
                                      valid[b:b + 1], 4, method, count=200)
                assert torch.equal(whole[b, t], one[0, 0])


def test_other_refits_and_modalities():
    from torchlime.text import explain_tokens
    from torchlime.text.data import CLS, MASK, SEP, make_text_dataset
    from torchlime.text.models import load_text_model

    model, _ = load_text_model()
    data = make_text_dataset(3, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.quality.UnreliableExplanationWarning)
        exp = explain_tokens(model, data.input_ids, attention_mask=data.attention_mask, special_ids=[CLS, SEP],
                             mask_id=MASK, n_samples=200, surrogate=Select(num_features=3, method="auto"))
        assert torch.equal((exp.coef != 0).sum(-1), torch.full((3, 1), 3))
        lasso = explain_select("cpu", Select(num_features=5, method="lasso_path", refit=Lasso(alpha=1e-4)))
    assert bool(((lasso.coef != 0).sum(-1) <= 5).all())


def test_errors():
    with pytest.raises(ValueError, match="`num_features` must be >= 1, got 0"):
        Select(num_features=0)
    with pytest.raises(TypeError, match="`num_features` must be an int >= 1, got float 2.0"):
        Select(num_features=2.0)
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
