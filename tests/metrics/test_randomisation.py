"""The model-parameter randomisation check (Adebayo et al. 2018): a method that ignores the model fails it
(similarity 1 at every layer), gradient x input and LIME on a fitted model pass it (the similarity drops); the
caller's model and random state are untouched; layers are re-initialised as documented; SSIM, Spearman and
Pearson against scipy / scikit-image."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

import torchlime
from torchlime.metrics import RandomisationResult, randomisation_check
from torchlime.metrics.randomisation import pearson, spearman, ssim

HAS = {name: importlib.util.find_spec(name) is not None for name in ("scipy", "skimage", "matplotlib")}
if HAS["scipy"] and HAS["skimage"]:  # imported once, with the module
    import scipy.stats
    import skimage.metrics
if HAS["matplotlib"]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


def fitted_model() -> tuple[torch.nn.Module, torch.Tensor]:
    """A small MLP whose head is fitted (least squares) to a planted linear task, and 6 of its inputs."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)
    )
    x = torch.randn(128, 16, generator=g)
    y = x @ torch.randn(16, 3, generator=g)
    with torch.no_grad():
        hidden = torch.cat((net[:4](x), torch.ones(128, 1)), 1)
        w = torch.linalg.lstsq(hidden, y).solution  # (17, 3): the fitted head
        net[4].weight.copy_(w[:16].T)
        net[4].bias.copy_(w[16])
    return net.eval(), x[:6]


def grad_x_input(model, x):
    x = x.clone().requires_grad_()
    return torch.autograd.grad(model(x)[:, 0].sum(), x)[0] * x.detach()


def lime(model, x):
    return torchlime.explain(model, x, torch.arange(16).view(1, 16), target=0, n_samples=128, generator=0).coef[:, 0]


@pytest.mark.parametrize("layers", ["cascading", "independent"])
@pytest.mark.parametrize("similarity", ["spearman", "pearson", "ssim"])
def test_a_method_that_ignores_the_model_fails_the_check(layers, similarity):
    net, x = fitted_model()
    result = randomisation_check(net, x, lambda m, v: v.clone(), layers=layers, similarity=similarity)
    assert result.layers == ["4", "2", "0"] and result.similarity.shape == (3, 6)
    assert torch.allclose(result.similarity, torch.ones(3, 6, dtype=torch.float64))


@pytest.mark.parametrize("method", [grad_x_input, lime])
def test_methods_that_read_the_model_pass_it(method):
    net, x = fitted_model()
    before = copy.deepcopy(net.state_dict())
    state = torch.get_rng_state()
    result = randomisation_check(net, x, method)
    assert torch.get_rng_state().equal(state)
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())  # the caller's model untouched
    mean = result.mean()
    assert float(mean[-1]) < 0.5 and float(mean.min()) < 0.5  # every layer random: little left in common
    assert "spearman mean" in result.table() and "4" in str(result)


def test_layers_are_reinitialised_from_seed_plus_one_on_copies():
    net, x = fitted_model()
    seen = []

    def record(model, v):
        seen.append({k: t.clone() for k, t in model.state_dict().items()})
        return v.clone()

    randomisation_check(net, x, record, layers="independent", from_output=False, seed=7)
    trained = net.state_dict()
    for i, name in enumerate(["0", "2", "4"]):
        state = seen[i + 1]
        layer = copy.deepcopy(net.get_submodule(name))
        torch.manual_seed(8)
        layer.reset_parameters()
        assert torch.equal(state[f"{name}.weight"], layer.weight) and torch.equal(state[f"{name}.bias"], layer.bias)
        others = [k for k in trained if not k.startswith(f"{name}.")]
        assert all(torch.equal(state[k], trained[k]) for k in others)  # independent: the others trained
    cascade = []
    randomisation_check(net, x, lambda m, v: cascade.append(m.state_dict()["4.weight"].clone()) or v.clone())
    assert not torch.equal(cascade[1], trained["4.weight"]) and torch.equal(cascade[1], cascade[3])  # kept random


@pytest.mark.skipif(not (HAS["scipy"] and HAS["skimage"]), reason="needs scipy and scikit-image")
def test_similarities_against_scipy_and_scikit_image():
    stats, metrics = scipy.stats, skimage.metrics
    g = torch.Generator().manual_seed(1)
    a = torch.rand(3, 40, generator=g).double()
    r = a + 0.3 * torch.rand(3, 40, generator=g).double()
    a[0, :6] = a[0, 0]  # ties
    maps = torch.rand(2, 2, 9, 11, generator=g).double()
    for b in range(3):
        assert float(spearman(a, r)[b]) == pytest.approx(stats.spearmanr(a[b], r[b])[0], abs=1e-12)
        assert float(pearson(a, r)[b]) == pytest.approx(stats.pearsonr(a[b], r[b])[0], abs=1e-12)
        span = float(torch.cat((a[b], r[b])).max() - torch.cat((a[b], r[b])).min())
        want = metrics.structural_similarity(a[b].numpy(), r[b].numpy(), data_range=span)
        assert float(ssim(a, r)[b]) == pytest.approx(want, abs=1e-12)
    other = maps**2
    for b in range(2):
        span = float(torch.cat((maps[b], other[b])).max() - torch.cat((maps[b], other[b])).min())
        planes = [
            metrics.structural_similarity(maps[b, c].numpy(), other[b, c].numpy(), data_range=span) for c in range(2)
        ]
        assert float(ssim(maps, other)[b]) == pytest.approx(sum(planes) / 2, abs=1e-12)


@pytest.mark.skipif(not HAS["matplotlib"], reason="needs matplotlib")
def test_plot_and_errors():
    net, x = fitted_model()
    result = randomisation_check(net, x, grad_x_input, similarity=lambda a, r: (a - r).abs().flatten(1).mean(1))
    assert isinstance(result, RandomisationResult) and result.measure == "<lambda>"
    fig = result.plot()
    assert isinstance(fig, matplotlib.figure.Figure) and fig.axes[0].get_ylabel() == "similarity (<lambda>)"
    _, ax = plt.subplots()
    assert result.plot(ax=ax) is ax.figure
    plt.close("all")
    with pytest.raises(TypeError, match="`explain_fn` must be a callable explain_fn"):
        randomisation_check(net, x, grad_x_input(net, x))
    with pytest.raises(ValueError, match="`layers` must be one of"):
        randomisation_check(net, x, grad_x_input, layers="top_down")
    with pytest.raises(ValueError, match="`similarity` must be one of"):
        randomisation_check(net, x, grad_x_input, similarity="kendall")
    with pytest.raises(TypeError, match="`model` must be an nn.Module"):
        randomisation_check(lambda v: v, x, grad_x_input)
    with pytest.raises(ValueError, match="no layer with a reset_parameters"):
        randomisation_check(torch.nn.Tanh(), x, grad_x_input)
    with pytest.raises(ValueError, match=r"must return attributions of one shape \(6, 16\)"):
        randomisation_check(net, x, lambda m, v: v if m is net else v[:, :3])
