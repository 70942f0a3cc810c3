"""The metrics on plain attribution tensors (``torchlime.metrics.attributions``): the same numbers as the
Explanation path for the same coefficients and feature map, per-element and per-feature attributions
against slow loops, Quantus-style ``explain_fn(model, x)`` for max-sensitivity and stability, and the
errors that name the argument."""

from __future__ import annotations

import math

import pytest
import torch

from torchlime import explain
from torchlime.metrics import (
    deletion,
    faithfulness_correlation,
    from_attributions,
    infidelity,
    insertion,
    jaccard_topk,
    kendall_w,
    max_sensitivity,
    region_perturbation,
)
from torchlime.metrics.attributions import AttributionError

from tests.helpers import grid_labels


class Net(torch.nn.Module):
    """A small non-linear model of (c, C, 4, 4) inputs: 3 scores."""

    def __init__(self, channels: int = 1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(16 * channels, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)
        )

    def forward(self, x):
        return self.body(x)


def features() -> torch.Tensor:
    """(2, 1, 4, 4): input 0 has 4 features (quadrants), input 1 has 3 and a never-perturbed row."""
    f0 = grid_labels(4, 4, 2, 2)
    f1 = grid_labels(4, 4, 1, 3).clone()
    f1[0] = -1
    return torch.stack((f0, f1)).view(2, 1, 4, 4)


def score(model, x: torch.Tensor, target: int) -> float:
    with torch.no_grad():
        return float(model(x.unsqueeze(0))[0, target])


def reference_curve(model, x, key, groups, target, steps, fill=0.0, reveal=False) -> list[float]:
    """Scores of one input after hiding (revealing) the top n features of ``key``: ``groups[f]`` is feature f's mask."""
    n = len(key)
    order = sorted(range(n), key=lambda f: (-key[f], f))
    counts = list(range(n + 1)) if steps is None else [math.floor(j * n / steps + 0.5) for j in range(steps + 1)]
    out = []
    for c in counts:
        hidden = torch.zeros_like(x, dtype=torch.bool)
        for f in order[:c]:
            hidden |= groups[f]
        if reveal:
            hidden = ~hidden
        out.append(score(model, torch.where(hidden, torch.full_like(x, fill), x), target))
    return out


@pytest.mark.parametrize("fill", [0.0, "mean"])
def test_plain_tensor_gives_the_explanation_path_bits(fill):
    model, feats = Net(), features()
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    exp = explain(model, x, feats, n_samples=200, baseline=fill)
    coef, target = exp.coef[:, 0], exp.target[:, 0]
    kw = dict(features=exp.features, target=target)
    base = None if fill == 0.0 else fill
    for metric in (deletion, insertion):
        a = metric(model, x, exp, return_curves=True)
        b = metric(model, x, coef, baseline=base, return_curves=True, **kw)
        assert torch.equal(a.curves, b.curves) and torch.equal(a.x, b.x) and torch.equal(a.score, b.score)
    a, b = (
        region_perturbation(model, x, exp, order="lerf"),
        region_perturbation(model, x, coef, order="lerf", baseline=base, **kw),
    )
    assert torch.equal(a.curves, b.curves) and torch.equal(a.score, b.score)
    assert torch.equal(
        faithfulness_correlation(model, x, exp, n_subsets=16),
        faithfulness_correlation(model, x, coef, n_subsets=16, baseline=base, **kw),
    )
    i = torch.randn(2, 4, 1, 4, 4, generator=torch.Generator().manual_seed(2)) * 0.1
    assert torch.equal(infidelity(model, x, exp, perturbations=i), infidelity(model, x, coef, perturbations=i, **kw))
    record = from_attributions(model, x, coef, exp.features, target=target, baseline=fill)
    assert torch.equal(deletion(model, x, record), deletion(model, x, exp))


@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (2, 1, 4, 4), (2, 4, 4)])
@pytest.mark.parametrize("steps", [None, 5])
def test_per_element_attributions_against_a_slow_loop(shape, steps):
    model = Net(channels=3)
    x = torch.rand(2, 3, 4, 4, generator=torch.Generator().manual_seed(3))
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(4))
    out = deletion(model, x, a, target=torch.tensor([2, 0]), steps=steps, return_curves=True)
    ins = insertion(model, x, a, target=1, baseline=0.5, steps=steps, return_curves=True)
    per_pixel = len(shape) < 4 or shape[1] == 1  # one feature per pixel: every channel hidden together
    cells = 16 if per_pixel else 48
    groups = []
    for f in range(cells):
        mask = torch.zeros(3, 4, 4, dtype=torch.bool)
        if per_pixel:
            mask[:, f // 4, f % 4] = True
        else:
            mask.view(-1)[f] = True
        groups.append(mask)
    for b, t in enumerate([2, 0]):
        key = a[b].reshape(-1).tolist()
        want = reference_curve(model, x[b], key, groups, t, steps)
        assert out.curves[b, 0].tolist() == pytest.approx(want, abs=1e-6)
        want = reference_curve(model, x[b], key, groups, 1, steps, fill=0.5, reveal=True)
        assert ins.curves[b, 0].tolist() == pytest.approx(want, abs=1e-6)
    n = cells if steps is None else steps
    assert out.x.shape == (2, n + 1) and float(out.x[0, -1]) == 1.0


def test_per_feature_attributions_with_a_sparse_feature_map():
    model = Net()
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(5))
    ids = torch.tensor([0, 0, 2, 2, 5, 5, 5, 5, 2, 2, 0, 0, -1, -1, -1, -1]).view(1, 1, 4, 4)  # ids 0, 2, 5 of F = 6
    a = torch.tensor([[0.3, 9.0, -1.0, 9.0, 9.0, 0.7], [0.1, 9.0, 0.5, 9.0, 9.0, -0.2]])
    curves = region_perturbation(model, x, a, features=ids, target=0).curves
    for b in range(2):
        groups = [(ids[0] == i).expand(1, 4, 4) for i in (0, 2, 5)]
        key = [a[b, i].item() for i in (0, 2, 5)]
        assert curves[b, 0].tolist() == pytest.approx(reference_curve(model, x[b], key, groups, 0, None), abs=1e-6)
    record = from_attributions(model, x, a, ids, target=0)
    assert record.n_features.tolist() == [3, 3] and torch.equal(record.coef[:, 0], a[:, [0, 2, 5]])


def test_infidelity_of_a_per_element_map_against_a_loop():
    model = Net()
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(6))
    a = torch.randn(2, 1, 4, 4, generator=torch.Generator().manual_seed(7))
    i = torch.randn(2, 3, 1, 4, 4, generator=torch.Generator().manual_seed(8)) * 0.1
    ours = infidelity(model, x, a, target=1, perturbations=i)
    for b in range(2):
        terms = [
            (float((a[b] * i[b, k]).sum()) - (score(model, x[b], 1) - score(model, x[b] - i[b, k], 1))) ** 2
            for k in range(3)
        ]
        assert float(ours[b, 0]) == pytest.approx(sum(terms) / 3, rel=1e-4)


def grad_x_input(model, x, target=None):
    x = x.clone().requires_grad_()
    out = model(x)
    picked = out[:, 0] if target is None else out.gather(1, target.view(-1, 1))[:, 0]
    return torch.autograd.grad(picked.sum(), x)[0] * x.detach()


def test_max_sensitivity_takes_a_quantus_style_explain_fn():
    model = Net()
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(9))
    delta = (torch.rand(2, 3, 1, 4, 4, generator=torch.Generator().manual_seed(10)) - 0.5) * 0.2
    ours = max_sensitivity(model, x, grad_x_input, perturbations=delta)
    t = torch.tensor([2, 1])
    targeted = max_sensitivity(model, x, grad_x_input, target=t, perturbations=delta)
    given = max_sensitivity(
        model, x, grad_x_input, target=t, perturbations=delta, attributions=grad_x_input(model, x, t)
    )
    for b in range(2):
        for out, tt in ((ours, None), (targeted, t[b : b + 1])):
            e0 = grad_x_input(model, x[b : b + 1], tt).flatten()
            want = max(
                float((grad_x_input(model, x[b : b + 1] + delta[b, k : k + 1], tt).flatten() - e0).norm() / e0.norm())
                for k in range(3)
            )
            assert float(out[b]) == pytest.approx(want, rel=1e-5)
    assert torch.allclose(given, targeted)
    with pytest.raises(TypeError, match="it must take 2 arguments"):
        max_sensitivity(model, x, lambda v: v)


def test_stability_of_tensors_and_of_an_explain_fn():
    a = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    b = torch.tensor([[3.0, 1.0, 2.0, 0.0]])
    assert jaccard_topk([a, b], 2).tolist() == [[pytest.approx(1 / 3)]]
    assert kendall_w([a, a.clone()]).tolist() == [[1.0]]
    x = torch.ones(2, 6)
    state = torch.get_rng_state()

    def noisy(model, inputs):
        return model(inputs) + 4 * torch.rand(inputs.shape)

    runs = kendall_w(noisy, model=lambda v: v * torch.arange(6.0), inputs=x, runs=4)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's random state is kept
    assert runs.shape == (2, 1) and 0.5 < float(runs.min()) < 1.0
    again = kendall_w(noisy, model=lambda v: v * torch.arange(6.0), inputs=x, runs=4)
    assert torch.equal(runs, again)  # run i after torch.manual_seed(i)


def test_errors_name_the_argument():
    model = Net()
    x = torch.rand(2, 1, 4, 4)
    with pytest.raises(
        AttributionError, match=r"`explanation` must be a torchlime.Explanation, got a tensor of shape \(2, 5\)"
    ):
        deletion(model, x, torch.rand(2, 5))
    with pytest.raises(ValueError, match=r"shaped like `inputs` \(2, 1, 4, 4\) or broadcastable to them"):
        insertion(model, x, torch.rand(2, 2, 4, 4))
    with pytest.raises(TypeError, match=r"`attributions` must be a real floating tensor"):
        from_attributions(model, x, torch.ones(2, 1, 4, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`features` must be an integer feature map \(B or 1, \.\.\.\) broadcastable"):
        deletion(model, x, torch.rand(2, 4), features=torch.zeros(1, 4, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`features` ids must index the columns of `explanation` \(2, 4\).*got id 5"):
        deletion(model, x, torch.rand(2, 4), features=torch.full((1, 1, 4, 4), 5))
    with pytest.raises(ValueError, match="must be finite"):
        deletion(model, x, torch.full((2, 1, 4, 4), math.nan))
    with pytest.raises(TypeError, match="`target` must be None"):
        deletion(model, x, torch.rand(2, 1, 4, 4), target=1.5)
    exp = explain(model, x, features(), n_samples=32)
    with pytest.raises(TypeError, match="`features` is for a plain attribution tensor"):
        deletion(model, x, exp, features=features())
    with pytest.raises(TypeError, match="pass the attributions themselves as attributions="):
        max_sensitivity(model, x, torch.rand(2, 1, 4, 4))
    with pytest.raises(ValueError, match="a single attribution has no stability"):
        jaccard_topk(torch.rand(2, 16), 3)
    with pytest.raises(TypeError, match="`model` must be the model"):
        kendall_w(lambda m, v: v, inputs=x)
