"""A designed call's ``coef_se`` (``torchlime.stages.design_error``, ``torchlime.engine.design_se``): the factor on
planted movements, the t quantile against scipy, the engine's lazy prefixes against slow refits of the kept
samples (fixed N and ``n_samples="auto"``), and which calls get it."""

from __future__ import annotations

import pytest
import torch

import torchlime
from torchlime.engine.fit import fit_samples
from torchlime.engine.presets import ENGINE
from torchlime.methods.designs import sobol_width
from torchlime.stages.design_error import DECAY, Z95, Level, design_factor, scaled_se, t_quantile
from torchlime.stages.standard_error import residual_ss, ridge_se
from torchlime.stages.surrogate import Ridge

F64 = torch.float64


def _mlp(f: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(f, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2)).eval()


def _chain(moves: list[float], var: float = 0.01, usable: tuple[bool, ...] = (True,) * 4) -> list[Level]:
    """Fits of 4 features whose every coefficient moves by sqrt(m / 4) per halving, i.i.d. variances var·2^k."""
    coef, levels = 0.0, []
    for k, ok in enumerate(usable):
        levels.append(
            Level(
                torch.full((1, 1, 4), coef, dtype=F64), torch.full((1, 1, 4), var * 2**k, dtype=F64), torch.tensor([ok])
            )
        )
        if k < len(moves):
            coef += (moves[k] / 4) ** 0.5
    return levels


def test_the_factor_on_planted_movements():
    valid = torch.ones(1, 4, dtype=torch.bool)
    t4 = float(t_quantile(torch.tensor(4.0, dtype=F64), 0.975))  # the increments: 4 equal terms
    for moves, r in (([0.01, 0.04, 0.08], 5 / 12), ([0.04, 0.04, 0.04], 0.5), ([0.001, 0.04, 0.5], DECAY[0])):
        expected = (moves[0] * r / (1 - r) / 0.04) ** 0.5 * t4 / Z95  # Σ v = 4 · 0.01
        assert float(design_factor(_chain(moves), valid)) == pytest.approx(expected, rel=1e-12)
    no_m3 = design_factor(_chain([0.02, 0.05, 0.08], usable=(True, True, True, False)), valid)  # r = m1 / m2
    assert float(no_m3) == pytest.approx((0.02 * 0.4 / 0.6 / 0.04) ** 0.5 * t4 / Z95, rel=1e-12)
    no_m2 = design_factor(_chain([0.01, 0.04, 0.08], usable=(True, True, False, False)), valid)
    assert float(no_m2) == pytest.approx((0.01 / 0.04) ** 0.5 * t4 / Z95, rel=1e-12)  # r = 1/2
    assert float(design_factor(_chain([0.01, 0.04, 0.08], usable=(True, False, False, False)), valid)) == 1.0
    assert float(design_factor(_chain([0.0, 0.0, 0.0]), valid)) == 0.0  # the prefixes agree: no error left
    padded = torch.tensor([[True, True, False, False]])  # movements and variances of 2 features only
    half = design_factor(_chain([0.04, 0.04, 0.04]), padded)
    t2 = float(t_quantile(torch.tensor(2.0, dtype=F64), 0.975))
    assert float(half) == pytest.approx(t2 / Z95, rel=1e-12)


def test_the_shrinkage_is_kept_and_the_variance_scaled():
    var, shrink = torch.tensor([[[4.0, 1.0, 0.0]]], dtype=F64), torch.tensor([[[0.0, 2.0, 3.0]]], dtype=F64)
    se = (var + shrink**2).sqrt()  # the sandwich: variance and shrinkage in quadrature
    got = scaled_se(se, var, torch.full((1, 1, 1), 0.5, dtype=F64))
    torch.testing.assert_close(got, (0.25 * var + shrink**2).sqrt(), rtol=1e-12, atol=0.0)


def test_ridges_shrinkage_is_not_read_as_movement():
    """The movements come from least-squares fits of the prefixes: lime's penalty (alpha = 1) shrinks a fit of N/2
    samples twice as much as one of N, and read as movement it made the standard errors of a linear or nearly
    additive model 3-7x the sandwich's. Now a linear model keeps the sandwich (its fit leaves no residual: factor 1)
    and a nearly additive one at most the sandwich (whose shrinkage term dominates there)."""
    f, lime_penalty = 12, Ridge(alpha=1.0)
    x, feats = torch.randn(4, f, generator=torch.Generator().manual_seed(0)), torch.arange(f).view(1, f)
    w = torch.linspace(-1, 1, f)
    for model in (
        lambda z: (z @ w).unsqueeze(1),
        lambda z: (z @ w + 0.05 * z[:, 0] * z[:, 1]).unsqueeze(1),
    ):
        exp = torchlime.explain(model, x, feats, n_samples=1000, surrogate=lime_penalty, target=0, return_samples=True)
        normal, fit, _ = fit_samples(exp.samples, exp.outputs, ENGINE["kernel"], lime_penalty, exp.valid)
        ratio = exp.coef_se.double() / lime_penalty.coef_se(normal, fit, exp.valid)
        assert exp.se_method == "design" and float(ratio.median()) <= 1.0 + 1e-6, float(ratio.median())  # 1.8 before
    one = [Level(torch.zeros(1, 1, 3, dtype=F64), torch.ones(1, 1, 3, dtype=F64), torch.tensor([True]))]
    assert torch.equal(design_factor(one, torch.ones(1, 3, dtype=torch.bool)), torch.ones(1, 1, 1, dtype=F64))
    inf = torch.tensor([[[float("inf"), 1.0]]], dtype=F64)
    assert torch.equal(
        scaled_se(inf, inf, torch.full((1, 1, 1), 0.5, dtype=F64)), torch.tensor([[[float("inf"), 0.5]]], dtype=F64)
    )


def test_t_quantile_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    for v in [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 30.0, 1000.0]:
        got = float(t_quantile(torch.tensor(v, dtype=F64), 0.975))
        exact = stats.t.ppf(0.975, v)
        if v in (1.0, 2.0) or v >= 4:
            assert got == pytest.approx(exact, rel=1e-3), v
        elif v >= 3:
            assert got == pytest.approx(exact, rel=2e-3), v
        else:
            assert exact <= got <= 1.13 * exact, v


def _slow_factor(exp: torchlime.Explanation) -> tuple[torch.Tensor, torch.Tensor]:
    """The factor (from least-squares refits of every input's kept prefixes, a pseudo-inverse each, one input at a
    time) and the ridge fit's i.i.d. variances, of the kept samples (``fit_samples``)."""
    kernel, surrogate = ENGINE["kernel"], ENGINE["surrogate"]
    out, first = [], []
    for b in range(exp.coef.shape[0]):
        n, valid = exp.run.samples_used[b], exp.valid[b : b + 1]
        chain = []
        for level in range(4):
            m = max(2, n >> level)
            x, y = exp.samples[b : b + 1, :m], exp.outputs[b : b + 1, :m]
            normal, _, _ = fit_samples(x, y, kernel, surrogate, valid)
            coef = (torch.linalg.pinv(normal.gram) @ normal.rhs).transpose(1, 2)
            var = ridge_se(normal, residual_ss(normal, coef), valid, 0.0) ** 2
            chain.append(Level(coef, var, torch.tensor([sobol_width(m) >= int(valid.sum())])))
            if level == 0:
                ridge = surrogate.solve(normal, valid).transpose(1, 2)
                first.append(ridge_se(normal, residual_ss(normal, ridge), valid, surrogate.alpha) ** 2)
        out.append(design_factor(chain, valid))
    return torch.cat(out), torch.cat(first)


def _net_and_inputs(f: int = 10) -> tuple:
    return _mlp(f), torch.randn(5, f, generator=torch.Generator().manual_seed(3)) * 2, torch.arange(f).view(1, f)


def test_the_engine_refits_the_prefixes_of_each_input():
    net, x, feats = _net_and_inputs()
    exp = torchlime.explain(net, x, feats, n_samples=1000, generator=0, return_samples=True)
    assert exp.coef_se_record.value is None and exp.se_method == "design"  # pending: the call computed nothing
    surrogate = ENGINE["surrogate"]
    normal, fit, _ = fit_samples(exp.samples, exp.outputs, ENGINE["kernel"], surrogate, exp.valid)
    factor, var = _slow_factor(exp)
    expected = scaled_se(surrogate.coef_se(normal, fit, exp.valid), var, factor)
    torch.testing.assert_close(exp.coef_se.double(), expected.float().double(), rtol=1e-4, atol=1e-9)
    assert ((factor > 0) & (factor < 1)).all()  # the design errs less than independent masks would


def test_an_adaptive_call_reads_each_inputs_own_prefixes():
    """Each input of ``n_samples="auto"`` gets the standard errors of a fixed call at its own number of samples
    (the same masks: any prefix of the design is the design of a call at that N)."""
    net, x, feats = _net_and_inputs()
    auto = torchlime.explain(net, x, feats, n_samples="auto", generator=0)
    used = auto.run.samples_used
    assert auto.se_method == "design" and len(set(used)) > 1  # inputs stopped at different rounds
    for n in set(used):
        fixed = torchlime.explain(net, x, feats, n_samples=n, generator=0)
        rows = [b for b, u in enumerate(used) if u == n]
        torch.testing.assert_close(auto.coef_se[rows], fixed.coef_se[rows], rtol=1e-4, atol=1e-9)


def test_which_calls_read_the_design():
    f = 6
    net, feats = _mlp(f), torch.arange(f).view(1, f)
    x = torch.randn(3, f, generator=torch.Generator().manual_seed(0))
    assert torchlime.explain(net, x, feats, n_samples=200).se_method == "design"
    assert torchlime.explain(net, x, feats, n_samples=200, surrogate=Ridge(alpha=0.0)).se_method == "design"
    assert torchlime.explain(net, x, feats, n_samples=200, surrogate="bayes").se_method == "posterior"
    for how in (dict(sampler="bernoulli"), dict(sampler="sobol")):
        assert torchlime.explain(net, x, feats, n_samples=200, **how).se_method == "sandwich"
    kept = torchlime.explain(net, x, feats, n_samples=200, return_samples=True)
    given = torchlime.explain(net, x, feats, n_samples=200, masks=kept.samples)  # masks given: no design known
    assert given.se_method == "sandwich" and kept.refit().se_method == "sandwich"
    wide = 80  # beyond the factorial table: Sobol's columns
    many = torchlime.explain(
        torch.nn.Linear(wide, 1), torch.randn(1, wide), torch.arange(wide).view(1, wide), n_samples=300
    )
    assert many.se_method == "sandwich"


def test_the_design_estimate_on_every_device(device):
    """The same masks and prefixes on every device: the standard errors agree with the CPU's."""
    net, x, feats = _net_and_inputs()
    cpu = torchlime.explain(net, x, feats, n_samples=500, generator=0)
    here = torchlime.explain(_mlp(10).to(device), x.to(device), feats.to(device), n_samples=500, generator=0)
    assert here.se_method == "design" and here.coef_se.device.type == device.type
    torch.testing.assert_close(here.coef_se.cpu(), cpu.coef_se, rtol=1e-2, atol=1e-7)
