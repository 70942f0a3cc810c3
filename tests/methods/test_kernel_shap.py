"""KernelSHAP on the engine (``torchlime.methods.kernel_shap``, ``preset="kernel_shap"``): coalitions, Shapley kernel
weights and the exactly constrained fit, against a brute-force Shapley computation (plain loops over
subsets) and captum's ``KernelShap`` fed the same coalitions."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

from torchlime import explain
from torchlime.engine.presets import PRESETS, UNSET, resolve
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.kernel_shap import (
    KernelShapRegression,
    KernelShapSampler,
    ShapleyKernel,
    max_enumerated,
    shapley_kernel,
)
from torchlime.stages.surrogate import normal_equations

F64 = torch.float64
BASE = 0.5


class Interactions(torch.nn.Module):
    """Two outputs with products of up to three elements; on multiples of 1/4 every value is exact in float32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        a = x[:, 0] * x[:, 1] + 2 * x[:, 2] - x[:, 3] * x[:, 4] * x[:, 5] + 0.5 * x[:, 6]
        b = x.sum(1) * x[:, 7] + x[:, 1] * x[:, 6] - x[:, 2]
        return torch.stack((a, b), 1)


def inputs_and_features(device):
    """Three inputs of 8 elements with F_b = 6, 5 and 3 (padded up to F = 6); -1: never perturbed."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randint(-4, 5, (3, 1, 8), generator=g).float() / 4).to(device)
    feats = (
        torch.tensor([[0, 1, 2, 3, 4, 5, 0, 1], [0, 0, 1, 1, 2, 3, 4, -1], [2, 1, 0, 2, 1, 0, 2, 1]])
        .view(3, 1, 8)
        .to(device)
    )
    return x, feats


def brute_force(model, x, feats, b, t):
    """phi_i = sum over S without i of |S|! (F-|S|-1)! / F! (v(S + i) - v(S)), v(S) = f(x with the features
    outside S at the baseline): loops over every subset, the model in float64."""
    f = feats[b, 0].cpu()
    n = int(f.max()) + 1
    xb = x[b, 0].cpu().double()

    def v(subset):
        keep = (f < 0) | torch.isin(f, torch.tensor(list(subset), dtype=torch.long))
        return float(model(torch.where(keep, xb, BASE).unsqueeze(0))[0, t])

    phi = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        total = 0.0
        for size in range(n):
            for subset in itertools.combinations(others, size):
                weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
                total += weight * (v(subset + (i,)) - v(subset))
        phi.append(total)
    return torch.tensor(phi, dtype=F64), v(()), v(tuple(range(n)))


def quiet_explain(*args, **kwargs):
    with warnings.catch_warnings():  # interaction models fit a linear surrogate poorly (low R²): expected
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        return explain(*args, **kwargs)


def test_shapley_kernel_values():
    for n in range(2, 9):
        for k in range(n + 1):
            want = 0.0 if k in (0, n) else (n - 1) / (math.comb(n, k) * k * (n - k))
            assert shapley_kernel(torch.tensor(n), torch.tensor(k)).item() == pytest.approx(want, rel=1e-12)
    assert [max_enumerated(s) for s in (2, 3, 4, 63, 64, 2048)] == [1, 1, 2, 5, 6, 11]


def test_sampler_enumerates_every_coalition_once():
    nf, s, f = torch.tensor([3, 5, 7]), 40, 7  # 8 and 32 coalitions fit in 40 samples, 128 do not
    z = KernelShapSampler().bind(None, s)(nf, s, f, generator=1)
    assert z[:, 0].all() and not (z[:, 1] & (torch.arange(f) < nf.unsqueeze(1))).any()
    assert z[0, :, 3:].all() and z[1, :, 5:].all()  # padded features always kept
    for b, n in enumerate((3, 5)):
        codes = (z[b, :, :n].long() << torch.arange(n)).sum(1)
        assert sorted(codes[2 : 2**n].tolist()) == list(range(1, 2**n - 1))  # every non-trivial coalition once
        assert (codes[2**n :] == 2**n - 1).all()  # the rest: the grand coalition (weight 0)
    sizes = z[2, 2:].sum(1)
    assert sizes.min() >= 1 and sizes.max() <= 6


def test_sampled_sizes_follow_the_shapley_mass():
    n, s = 16, 20000  # 2^16 coalitions > S: sampled (captum's plain design)
    z = KernelShapSampler(design="plain").bind(None, s)(torch.tensor([n]), s, n, generator=0)
    counts = torch.bincount(z[0, 2:].sum(1), minlength=n + 1).double()
    mass = torch.tensor([0.0] + [(n - 1) / (k * (n - k)) for k in range(1, n)] + [0.0], dtype=F64)
    expected = mass / mass.sum() * (s - 2)
    assert counts[0] == 0 and counts[n] == 0
    assert ((counts - expected).abs() <= 5 * expected.sqrt() + 1).all(), (counts, expected)
    within = z[0, 2:][z[0, 2:].sum(1) == 3].double().mean(0)  # subsets of one size: uniform over features
    assert (within - 3 / n).abs().max() < 0.05


def test_kernel_weights():
    kernel = ShapleyKernel(design="plain").bind(None, 16)  # F = 4 enumerated, F = 5 sampled
    masks = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 1], [1, 1, 0, 0, 1], [1, 1, 1, 0, 0]]).bool()
    valid = torch.tensor([[True] * 4 + [False], [True] * 5])
    w = kernel.weigh_masks(masks.expand(2, 5, 5), valid)
    assert w.dtype == F64
    assert w[0].tolist() == pytest.approx([0.0, 0.0, 0.25, 0.125, 0.25], rel=1e-12)
    assert w[1].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("dtype,tol", [(F64, 1e-6), (torch.float32, 1e-4)], ids=["float64", "float32"])
def test_enumerated_equals_brute_force_shapley(device, dtype, tol):
    x, feats = inputs_and_features(device)
    model = Interactions()
    exp = quiet_explain(
        model,
        x,
        feats,
        preset="kernel_shap",
        n_samples=64,
        target="all",
        baseline=BASE,
        surrogate=KernelShapRegression(dtype=dtype),
    )
    assert exp.coef.device.type == device.type and exp.coef.dtype == dtype
    assert exp.n_features.tolist() == [6, 5, 3]
    for b in range(3):
        n = int(exp.n_features[b])
        assert (exp.coef[b, :, n:] == 0).all()
        for t in range(2):
            phi, v_empty, v_full = brute_force(model.double(), x, feats, b, t)
            torch.testing.assert_close(exp.coef[b, t, :n].cpu().double(), phi, atol=tol, rtol=0)
            assert exp.intercept[b, t].item() == pytest.approx(v_empty, abs=tol)  # phi_0 = f(baseline)
            assert exp.local_pred[b, t].item() == pytest.approx(v_full, abs=tol)  # phi_0 + sum(phi) = f(x)


def test_sampled_additive_model_is_exact(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 1, 24, generator=g).to(device)
    weights = torch.randn(24, 3, generator=g).to(device)
    model = lambda v: v.flatten(1) ** 2 @ weights + 1.0  # additive in the elements  # noqa: E731
    feats = (torch.arange(24) // 2).view(1, 1, 24).to(device)  # 12 features: 4096 coalitions > 300 samples
    exp = quiet_explain(model, x, feats, preset="kernel_shap", n_samples=300, target="all", baseline=BASE)
    per_element = (x.flatten(1) ** 2 - BASE**2).unsqueeze(-1) * weights  # (B, 24, T)
    phi = per_element.view(4, 12, 2, 3).sum(2).transpose(1, 2)  # (B, T, 12)
    torch.testing.assert_close(exp.coef, phi, atol=2e-4, rtol=1e-4)
    torch.testing.assert_close(exp.score, torch.ones_like(exp.score), atol=1e-4, rtol=0)


def test_captum_parity_on_the_same_coalitions():
    """Parity with captum's ``KernelShap`` (its plain design): captum draws its own coalitions, so it is
    fed ours through its perturbation hook (``perturb_func``, a generator of interpretable samples: ours
    in order, sample 0 all ones and sample 1 all zeros as captum's own generator starts). captum then
    weighs the two end points 1e6 and the others 1 and fits sklearn's ``LinearRegression`` in float32:
    the same problem with soft end-point constraints (measured difference about 3e-7). Its underlying
    linear model fitted in float64 on the identical data (``SkLearnLinearRegression``, captum's weights)
    differs only by the soft constraints' slack (about 2e-7 here)."""
    from captum._utils.models.linear_model import SkLearnLinearRegression
    from captum.attr import KernelShap
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 1, 10, generator=g)
    net = torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)
    ).eval()
    feats = torch.arange(10).view(1, 1, 10)  # 10 features: sampled with 120 samples
    exp = quiet_explain(
        net,
        x,
        feats,
        preset="kernel_shap_plain",  # captum's design: equal weights on the sampled coalitions
        n_samples=120,
        target="all",
        baseline=BASE,
        return_samples=True,
        surrogate=KernelShapRegression(dtype=F64),
    )
    for b in range(2):
        masks = exp.samples[b].long()

        def ours(original_inp, masks=masks, **kwargs):
            for row in masks:
                yield row.unsqueeze(0)

        ks = KernelShap(net)
        ks.perturb_func = ours
        for t in range(3):
            target = int(exp.target[b, t])
            got = ks.attribute(
                x[b : b + 1],
                baselines=BASE,
                target=target,
                feature_mask=feats,
                n_samples=120,
                perturbations_per_eval=40,
                return_input_shape=False,
            )
            torch.testing.assert_close(exp.coef[b, t], got[0].double(), atol=1e-5, rtol=0)
            # the same outputs, weights 1e6 at the end points, captum's linear model in float64
            y = exp.outputs[b, :, t].double()
            w = torch.ones(120, dtype=F64)
            w[:2] = ks.inf_weight
            lin = SkLearnLinearRegression()
            lin.fit(DataLoader(TensorDataset(masks.double(), y, w), batch_size=120))
            torch.testing.assert_close(exp.coef[b, t], lin.representation().double().flatten(), atol=1e-6, rtol=0)


def test_fit_matches_a_kkt_reference():
    """The surrogate alone against numpy's solve of the KKT system of the constrained problem."""
    g = torch.Generator().manual_seed(2)
    b, s, f, t = 3, 60, 7, 2
    x = torch.rand(b, s, f, generator=g) < 0.5
    x[:, 0], x[:, 1] = True, False
    y = torch.randn(b, s, t, generator=g, dtype=F64)
    w = torch.rand(b, s, generator=g, dtype=F64)
    w[:, :2] = 0
    valid = torch.arange(f) < torch.tensor([7, 6, 4]).unsqueeze(1)
    x = x | ~valid.unsqueeze(1)
    fit = KernelShapRegression(dtype=F64).fit(x, y, w, valid)
    for i in range(b):
        n = int(valid[i].sum())
        u = x[i, :, :n].double().numpy() - 1.0
        for j in range(t):
            yt = y[i, :, j].numpy() - y[i, 0, j].item()
            kkt = np.zeros((n + 1, n + 1))
            kkt[:n, :n] = u.T @ (w[i].numpy()[:, None] * u)
            kkt[:n, n] = kkt[n, :n] = 1.0
            rhs = np.append(u.T @ (w[i].numpy() * yt), y[i, 0, j].item() - y[i, 1, j].item())
            phi = np.linalg.solve(kkt, rhs)[:n]
            np.testing.assert_allclose(fit.coef[i, j, :n].numpy(), phi, atol=1e-10)
            assert (fit.coef[i, j, n:] == 0).all()
            assert fit.intercept[i, j].item() == pytest.approx(y[i, 1, j].item())
            pred = y[i, 1, j].item() + x[i, :, :n].double().numpy() @ phi
            ybar = np.average(y[i, :, j].numpy(), weights=w[i].numpy())
            r2 = 1 - np.sum(w[i].numpy() * (y[i, :, j].numpy() - pred) ** 2) / np.sum(
                w[i].numpy() * (y[i, :, j].numpy() - ybar) ** 2
            )
            assert fit.score[i, j].item() == pytest.approx(r2, abs=1e-10)


def test_rank_deficient_fit_keeps_the_constraints():
    """Fewer coalitions than features: the minimum-norm solution, still efficient and finite."""
    x = torch.tensor([[[1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]]).bool()
    y = torch.tensor([[[5.0], [1.0], [2.0], [3.0]]], dtype=F64)
    w = torch.tensor([[0.0, 0.0, 1.0, 1.0]], dtype=F64)
    fit = KernelShapRegression(dtype=F64).fit(x, y, w, torch.ones(1, 5, dtype=torch.bool))
    assert torch.isfinite(fit.coef).all()
    assert fit.coef.sum().item() == pytest.approx(4.0) and fit.local_pred.item() == pytest.approx(5.0)


def test_preset_and_meta():
    opts = resolve("kernel_shap", dict(sampler=UNSET, kernel=UNSET, surrogate=UNSET, baseline=UNSET))
    assert isinstance(opts["sampler"], KernelShapSampler) and isinstance(opts["kernel"], ShapleyKernel)
    assert isinstance(opts["surrogate"], KernelShapRegression) and opts["baseline"] == 0.0
    assert PRESETS["kernel_shap"]["any"]["n_samples"] == 2048
    x, feats = inputs_and_features("cpu")
    exp = quiet_explain(Interactions(), x, feats, preset="kernel_shap")
    assert exp.run.sampler == "KernelShapSampler()" and exp.run.kernel == "ShapleyKernel()"
    assert exp.run.preset == "kernel_shap"


def test_errors():
    x, y = torch.ones(1, 4, 3, dtype=torch.bool), torch.zeros(1, 4, 1)
    ne = normal_equations(x, y, torch.ones(1, 4))
    with pytest.raises(ValueError, match=r"`anchors` \(B, 2, T\).*samples 0 \(the input\) and 1.*got None"):
        KernelShapRegression().fit_normal(ne, torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"`anchors` \(B, 2, T\).*got shape \(1, 1, 1\)"):
        KernelShapRegression().fit_normal(ne, torch.ones(1, 3, dtype=torch.bool), anchors=y[:, :1])
    with pytest.raises(ValueError, match=r"`n_samples` must be an int >= 3 for KernelSHAP .*got 2"):
        explain(Interactions(), *inputs_and_features("cpu"), preset="kernel_shap", n_samples=2)
    with pytest.raises(RuntimeError, match=r"KernelShapSampler.bind\(features, n_samples\) must run first"):
        KernelShapSampler()(torch.tensor([3]), 4, 3)
    with pytest.raises(RuntimeError, match=r"ShapleyKernel.bind\(features, n_samples\) must run first"):
        ShapleyKernel().weigh_masks(x, torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="ShapleyKernel weighs coalitions, not distances"):
        ShapleyKernel().weigh(torch.zeros(3))


def test_kernel_shap_refuses_auto():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x, feats = torch.rand(2, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 2
    with pytest.raises(ValueError, match=r"plans all of its samples at once: it needs an int n_samples"):
        explain(model, x, feats, preset="kernel_shap", n_samples="auto")
