"""KernelSHAP's standard errors under its paired designs (``torchlime.methods.shap_error``): the library
against a slow reference from the kept samples, 95 % intervals calibrated against the exact Shapley values,
and the inputs that keep another estimate (enumerated: the rounding; a class of one pair: independent draws)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from torchlime import explain
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.shap_error import ROUNDING
from torchlime.stages.design_error import Z95, t_quantile

from tests.helpers.shap import kernel_shap


def _mlp(f: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(f, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)).eval()


def _rounding(exp):
    """(B, T, 1): the fit's rounding, ROUNDING eps ||φ||."""
    return ROUNDING * torch.finfo(exp.coef.dtype).eps * exp.coef.double().norm(dim=-1, keepdim=True)


def _reference(exp, n_samples):
    """NumPy, loops over inputs, pairs and classes: sqrt(Σ_t (1 - p/N) p/(p-1) Σ_q (h_q - h̄_t)²), as a t
    interval's (Satterthwaite's degrees of freedom), and the rounding."""
    out = np.zeros(tuple(exp.coef.shape))
    for b in range(exp.coef.shape[0]):
        nf = int(exp.valid[b].sum())
        if 2**nf <= n_samples:
            out[b, :, :nf] = _rounding(exp)[b].numpy()  # enumerated: no sampling error
            continue
        z = exp.samples[b, :, :nf].double().numpy()
        w, y = exp.weights[b].double().numpy(), exp.outputs[b].double().numpy()
        coef, icpt = exp.coef[b, :, :nf].double().numpy(), exp.intercept[b].double().numpy()
        u = z - 1
        q_proj = np.eye(nf) - 1.0 / nf
        m = np.linalg.pinv(q_proj @ (u.T * w) @ u @ q_proj, hermitian=True)
        resid = y - icpt - z @ coef.T  # (S, T)
        terms: dict[int, list] = {}
        for q in range((n_samples - 2) // 2):
            rows = (2 + 2 * q, 3 + 2 * q)
            h = sum(w[r] * np.outer(resid[r], m @ u[r]) for r in rows)  # (T, F_b)
            k = int(z[rows[0]].sum())
            terms.setdefault(min(k, nf - k), []).append(h)
        parts, dofs = [], []
        for t, hs in terms.items():
            p, size = len(hs), math.comb(nf - 1, t) if 2 * t == nf else math.comb(nf, t)
            hs = np.stack(hs)
            parts.append((1 - p / size) * p / (p - 1) * ((hs - hs.mean(0)) ** 2).sum(0))
            dofs.append(p - 1)
        var = sum(parts)
        dof = var**2 / sum(v**2 / d for v, d in zip(parts, dofs))  # Satterthwaite's
        quantile = t_quantile(torch.from_numpy(np.maximum(dof, 1.0)), 0.975).numpy()  # checked against scipy
        out[b, :, :nf] = np.sqrt(var * (quantile / Z95) ** 2 + _rounding(exp)[b].numpy() ** 2)
    return out


@pytest.mark.parametrize("design", ["leverage", "paired"])
def test_the_pairs_estimate_matches_a_slow_reference(design):
    """Inputs of 12, 9, 14 and 7 features (7: enumerated at S = 150: the fit's rounding only) in one batch,
    both targets."""
    feats = torch.stack([torch.arange(14) % m for m in (12, 9, 14, 7)])
    x = torch.randn(4, 14, generator=torch.Generator().manual_seed(0))
    exp = kernel_shap(_mlp(14, 1), x, feats, 150, design, return_samples=True, target="all")
    assert exp.coef.shape == (4, 2, 14)
    assert exp.se_method == "pairs"
    got = exp.coef_se.double().numpy()
    np.testing.assert_allclose(got, _reference(exp, 150), rtol=1e-9, atol=1e-12)
    assert (got[:3, :, :9] > 0).all() and (got[3, :, 7:] == 0).all()
    np.testing.assert_allclose(got[3, :, :7], _rounding(exp)[3].expand(-1, 7).numpy(), rtol=1e-12)


def test_intervals_hold_the_exact_shapley_values():
    """95 % intervals of the default design (Leverage SHAP, F = 12, S = 300) hold the exact Shapley values
    (every coalition, 2^12 <= 4096) 90-98 % of the time; the independent-draws ones (a refit of the kept
    samples keeps no design) held them every time, several times wider."""
    f, feats = 12, torch.arange(12).view(1, 12)
    net, x = _mlp(f, 2), torch.randn(16, f, generator=torch.Generator().manual_seed(3))
    exact = kernel_shap(net, x, feats, 1 << f).coef
    hits, held, ratio = [], [], []
    for seed in range(3):
        exp = kernel_shap(net, x, feats, 300, seed=seed, return_samples=True)
        independent = exp.refit()
        assert (exp.se_method, independent.se_method) == ("pairs", "kernel_shap")
        assert torch.equal(independent.coef, exp.coef)
        hits.append((exp.coef - exact).abs() <= 1.96 * exp.coef_se)
        held.append((exp.coef - exact).abs() <= 1.96 * independent.coef_se)
        ratio.append(exp.coef_se / independent.coef_se)
    coverage = float(torch.stack(hits).double().mean())
    assert 0.90 <= coverage <= 0.98, coverage
    assert float(torch.stack(held).double().mean()) >= 0.99
    assert float(torch.stack(ratio).median()) < 0.5


def test_enumerated_inputs_have_only_the_rounding_and_lone_pairs_keep_the_independent_estimate():
    """S = 2^F: every coalition, no sampling error: the standard errors are the fit's rounding, ``ROUNDING``
    eps ||φ|| (the default float32 fit), so ``top_features(by="t")`` ranks by |coef|; 20 features at S = 22:
    ten classes of one pair each, no spread to read: the independent-draws estimate."""
    net = _mlp(8, 0)
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(1))
    exact = explain(net, x, torch.arange(8).view(1, 8), preset="kernel_shap", n_samples=256)
    assert exact.se_method == "pairs" and exact.coef.dtype == torch.float32
    torch.testing.assert_close(exact.coef_se, _rounding(exact).expand_as(exact.coef).float())
    idx, _ = exact.top_features(8, by="t")
    assert torch.equal(idx, exact.top_features(8)[0])
    wide = torch.randn(2, 20, generator=torch.Generator().manual_seed(2))
    lone = kernel_shap(_mlp(20, 0), wide, torch.arange(20).view(1, 20), 22, return_samples=True)
    assert lone.se_method == "pairs"
    with warnings.catch_warnings():  # 22 samples of 20 features: the quality check says so, as it should
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        independent = lone.refit()
    torch.testing.assert_close(lone.coef_se, independent.coef_se, rtol=1e-12, atol=0)


def test_which_kernel_shap_calls_read_the_pairs():
    """The plain design (independent draws) and masks the user gives keep the independent-draws estimate."""
    f, feats = 10, torch.arange(10).view(1, 10)
    net, x = _mlp(f, 0), torch.randn(2, f, generator=torch.Generator().manual_seed(0))
    assert kernel_shap(net, x, feats, 100, "plain").se_method == "kernel_shap"
    assert kernel_shap(net, x, feats, 100, "paired").se_method == "pairs"
    drawn = kernel_shap(net, x, feats, 100, return_samples=True)
    given = kernel_shap(net, x, feats, 100, masks=drawn.samples)
    assert given.se_method == "kernel_shap" and torch.equal(given.coef, drawn.coef)


def test_the_pairs_estimate_on_every_device(device):
    """The same pairs drawn again on every device: the standard errors agree with the CPU's."""
    feats = torch.stack([torch.arange(14) % m for m in (12, 9, 14)])
    net, x = _mlp(14, 1), torch.randn(3, 14, generator=torch.Generator().manual_seed(0))
    cpu = kernel_shap(net, x, feats, 150)
    here = kernel_shap(net.to(device), x.to(device), feats.to(device), 150)
    assert here.se_method == "pairs" and here.coef_se.device.type == device.type
    torch.testing.assert_close(here.coef_se.cpu(), cpu.coef_se, rtol=1e-3, atol=1e-9)
