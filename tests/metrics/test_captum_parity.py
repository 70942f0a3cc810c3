"""Parity with captum.metrics: ``infidelity`` (both normalisations, images with a fused normalisation) and
``max_sensitivity`` on identical, explicitly given perturbations; the default perturbations' law."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.image import explain_image
from torchlime.metrics import GaussianNoise, UniformNoise, infidelity, max_sensitivity

from tests.helpers import grid_labels

captum_metrics = pytest.importorskip("captum.metrics")


class Net(torch.nn.Module):
    def __init__(self, channels: int = 1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(channels * 16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.body(x)


def features() -> torch.Tensor:
    return grid_labels(4, 4, 2, 2).view(1, 1, 4, 4)


def captum_infidelity(forward, inputs, exp, noise, normalize):
    """captum's value for every target column, fed the same perturbations I (x - I is what the model sees)."""
    b, n = noise.shape[:2]
    flat = noise.reshape(b * n, *noise.shape[2:])

    def perturb(x):
        return flat, x - flat

    cols = [
        captum_metrics.infidelity(
            forward,
            perturb,
            inputs,
            exp.heatmap(t).contiguous(),
            target=exp.target[:, t],
            n_perturb_samples=n,
            normalize=normalize,
        )
        for t in range(exp.target.shape[1])
    ]
    return torch.stack(cols, 1)


@pytest.mark.parametrize("normalize", [False, True])
def test_infidelity_matches_captum(normalize):
    x = torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    model = Net()
    exp = explain(model, x, features(), target="top2", n_samples=128)
    noise = torch.randn(3, 6, 1, 4, 4, generator=torch.Generator().manual_seed(2)) * 0.1
    ours = infidelity(model, x, exp, perturbations=noise, normalize=normalize)
    theirs = captum_infidelity(model, x, exp, noise, normalize)
    assert ours.shape == (3, 2)
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-7)
    chunked = infidelity(model, x, exp, perturbations=noise, normalize=normalize, batch_size=4)
    torch.testing.assert_close(chunked, ours, rtol=1e-5, atol=1e-8)


def test_infidelity_with_a_fused_normalisation_matches_captum():
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.3, 0.25)
    x = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(3))
    model = Net(3)
    exp = explain_image(model, x, segments=grid_labels(4, 4, 2, 2), normalize=(mean, std), target="top2", n_samples=128)
    noise = torch.randn(2, 5, 3, 4, 4, generator=torch.Generator().manual_seed(4)) * 0.05
    m, s = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
    theirs = captum_infidelity(lambda v: model((v - m) / s), x, exp, noise, False)
    torch.testing.assert_close(infidelity(model, x, exp, perturbations=noise), theirs, rtol=1e-4, atol=1e-7)


def test_default_infidelity_perturbations_are_gaussian_and_seeded():
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(5))
    model = Net()
    exp = explain(model, x, features(), n_samples=64)
    seen = []
    recorder = lambda v: seen.append(v.clone()) or model(v)
    a = infidelity(recorder, x, exp, perturbations=GaussianNoise(0.2, n=400, generator=7))
    rows = torch.cat(seen)
    assert rows.shape[0] == 2 + 800 and torch.equal(rows[:2], x)
    noise = x.repeat_interleave(400, 0) - rows[2:]
    assert abs(float(noise.std()) - 0.2) < 0.01 and abs(float(noise.mean())) < 0.01
    assert torch.equal(infidelity(model, x, exp, perturbations=GaussianNoise(0.2, n=400, generator=7)), a)
    assert not torch.equal(infidelity(model, x, exp, perturbations=GaussianNoise(0.2, n=400, generator=8)), a)
    seen.clear()
    infidelity(recorder, x, exp, perturbations=UniformNoise(0.2, n=400, generator=7))  # either law, either metric
    noise = x.repeat_interleave(400, 0) - torch.cat(seen)[2:]
    assert float(noise.abs().max()) <= 0.2 and float(noise.std()) == pytest.approx(0.2 / 3**0.5, rel=0.05)


def lime_heatmaps(model, n_samples=64):
    """An explanation function: LIME's coefficients of target 0 painted on the inputs (deterministic)."""

    def explain_fn(x):
        if isinstance(x, tuple):  # captum hands the unperturbed inputs over as a tuple, and wants one back
            return (explain_fn(x[0]),)
        return explain(model, x, features(), target=0, n_samples=n_samples, generator=0).heatmap(0)

    return explain_fn


def test_max_sensitivity_matches_captum():
    x = torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(6))
    model = Net()
    delta = (torch.rand(3, 4, 1, 4, 4, generator=torch.Generator().manual_seed(7)) * 2 - 1) * 0.05
    flat = delta.reshape(12, 1, 4, 4)
    theirs = captum_metrics.sensitivity_max(
        lime_heatmaps(model), x, perturb_func=lambda v: v + flat, n_perturb_samples=4
    )
    heat = lime_heatmaps(model)
    ours = max_sensitivity(model, x, lambda m, v: heat(v), perturbations=delta)
    assert ours.shape == (3,)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-7)
    for p in (1, 3):
        theirs_p = captum_metrics.sensitivity_max(
            lime_heatmaps(model), x, perturb_func=lambda v: v + flat, n_perturb_samples=4, norm_ord=p
        )
        torch.testing.assert_close(
            max_sensitivity(model, x, lambda m, v: heat(v), perturbations=delta, norm_ord=p),
            theirs_p,
            rtol=1e-5,
            atol=1e-7,
        )


def test_max_sensitivity_of_explanations_per_target():
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(8))
    model = Net()
    explain_fn = lambda m, v: explain(m, v, features(), target="all", n_samples=64, generator=0)
    delta = (torch.rand(2, 3, 1, 4, 4, generator=torch.Generator().manual_seed(9)) * 2 - 1) * 0.05
    ours = max_sensitivity(model, x, explain_fn, perturbations=delta)
    assert ours.shape == (2, 3)
    base = explain_fn(model, x).coef
    pert = explain_fn(model, x.repeat_interleave(3, 0) + delta.reshape(6, 1, 4, 4)).coef.view(2, 3, 3, 4)
    for b in range(2):
        for t in range(3):
            ref = max(float((pert[b, k, t] - base[b, t]).norm() / base[b, t].norm()) for k in range(3))
            assert float(ours[b, t]) == pytest.approx(ref, rel=1e-5)
    # the default perturbations: uniform in [-r, r], seeded
    seen = []
    recorder = lambda m, v: seen.append(v.clone()) or explain_fn(m, v)
    law = UniformNoise(0.1, n=50, generator=1)
    a = max_sensitivity(model, x, recorder, perturbations=law, inputs_per_step=40)
    assert [r.shape[0] for r in seen] == [2, 40, 40, 20]
    d = torch.cat(seen[1:]) - x.repeat_interleave(50, 0)
    assert float(d.abs().max()) <= 0.1 and float(d.abs().max()) > 0.09
    assert torch.equal(max_sensitivity(model, x, explain_fn, perturbations=law, inputs_per_step=40), a)
