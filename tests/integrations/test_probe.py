"""ProbeExplainer: training with probes is bit-identical to training without; state untouched."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch

from torchlime import Call, Explanation, Modality, Prepared
from torchlime.integrations.probe import ProbeExplainer, preserved_rng

from tests.helpers import grid_labels

FEATS = grid_labels(6, 6, 2, 3).view(1, 1, 6, 6)


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Dropout(0.3),
        torch.nn.Linear(4 * 36, 3),
    )


def train(steps: int, probe_every: int | None, modality=FEATS, **kwargs):
    """A tiny training loop; data and dropout draw from the global RNG."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    torch.manual_seed(123)
    probe = None
    if probe_every is not None:
        probe = ProbeExplainer(
            model,
            torch.rand(3, 1, 6, 6, generator=torch.Generator().manual_seed(1)),
            modality,
            every=probe_every,
            call=Call(n_samples=40),
            **kwargs,
        )
    for step in range(steps):
        x = torch.randn(8, 1, 6, 6)
        y = torch.randint(0, 3, (8,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        if probe is not None:  # between backward and step: the gradients must survive
            probe.maybe_explain(step)
        opt.step()
    return model, opt, probe


def state(model, opt):
    return (
        [t.clone() for t in model.state_dict().values()],
        [v.clone() for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)],
    )


def assert_same_training(a, b):
    (wa, oa), (wb, ob) = state(*a[:2]), state(*b[:2])
    assert len(wa) == len(wb) and len(oa) == len(ob) > 0
    assert all(torch.equal(x, y) for x, y in zip(wa, wb))
    assert all(torch.equal(x, y) for x, y in zip(oa, ob))


def test_training_with_probe_is_bit_identical():
    without = train(10, None)
    with_probe = train(10, 3)
    assert_same_training(without, with_probe)
    probe = with_probe[2]
    assert [s for s, _ in probe.history] == [0, 3, 6, 9]
    exp = probe.history[-1][1]
    assert isinstance(exp, Explanation) and exp.coef.shape == (3, 1, 6) and exp.coef.device.type == "cpu"
    assert not exp.coef.requires_grad


@dataclasses.dataclass(frozen=True)
class Noisy(Modality):
    """A modality of the caller's own that draws from every global RNG and flips modes, to test the restoration."""

    def prepare(self, model, inputs, how, call):
        torch.rand(10)
        np.random.rand(3)
        random.random()
        model.train()
        return Prepared(inputs, FEATS.to(inputs.device), how, call)


def test_rng_and_modes_restored_even_for_a_careless_modality():
    without = train(7, None)
    noisy = train(7, 2, modality=Noisy())
    assert_same_training(without, noisy)
    assert len(noisy[2].history) == 4


def test_grads_modes_and_global_rng_untouched_by_one_call():
    model = make_model().train()
    model[1].eval()  # a mixed-mode model: each submodule's own mode comes back
    x = torch.randn(4, 1, 6, 6)
    model(x).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    probe = ProbeExplainer(model, torch.rand(2, 1, 6, 6), Noisy(), every=5, call=Call(n_samples=30))
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    expected = (torch.rand(3), np.random.rand(2), random.random())
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    assert probe.maybe_explain(10) is not None
    got = (torch.rand(3), np.random.rand(2), random.random())
    assert torch.equal(expected[0], got[0]) and np.array_equal(expected[1], got[1]) and expected[2] == got[2]
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads))
    assert model.training and not model[1].training and model[0].training


def test_maybe_explain_schedule_and_history():
    model = make_model()
    probe = ProbeExplainer(model, torch.rand(2, 1, 6, 6), FEATS, every=4, call=Call(n_samples=30, target="all"))
    results = [probe.maybe_explain(s) for s in range(10)]
    assert [r is not None for r in results] == [s % 4 == 0 for s in range(10)]
    assert [s for s, _ in probe.history] == [0, 4, 8]
    assert probe.history[0][1].coef.shape == (2, 3, 6)
    # the same seeded masks on every call: an unchanged model gives the same explanation
    torch.testing.assert_close(probe.history[0][1].coef, probe.history[2][1].coef)
    explicit = probe.explain(11)
    assert probe.history[-1] == (11, explicit)


def test_probe_is_a_copy_of_the_inputs():
    model = make_model()
    x = torch.rand(2, 1, 6, 6)
    probe = ProbeExplainer(model, x, FEATS, every=1, call=Call(n_samples=30))
    first = probe.maybe_explain(0)
    x.add_(5.0)
    second = probe.maybe_explain(1)
    torch.testing.assert_close(first.coef, second.coef)


def test_images_modality_and_explainer_in_the_probe():
    from torchlime import Explainer
    from torchlime.image import Images, explain_image

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    images = torch.rand(2, 3, 16, 16)
    seg = grid_labels(16, 16, 2, 2)
    how = Explainer(kernel="lime", baseline="mean")
    probe = ProbeExplainer(net, images, Images(segments=seg), explainer=how, call=Call(n_samples=30), every=2)
    exp = probe.maybe_explain(2)
    assert exp.coef.shape == (2, 1, 4)
    direct = explain_image(net, images, segments=seg, kernel="lime", baseline="mean", n_samples=30, generator=0)
    assert torch.equal(exp.coef, direct.coef) and exp.call.generator == 0  # every probe: seed 0
    # the spellings of 0.1 are refused by name: explain_fn=, the engine's keywords beside the records
    for old in (dict(explain_fn=explain_image), dict(kernel="lime"), dict(n_samples=30)):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{next(iter(old))}'"):
            ProbeExplainer(net, images, Images(segments=seg), **old)


def test_preserved_rng_restores_on_error():
    torch.manual_seed(3)
    expected = torch.rand(2)
    torch.manual_seed(3)
    with pytest.raises(KeyError):
        with preserved_rng():
            torch.rand(100)
            raise KeyError("boom")
    assert torch.equal(torch.rand(2), expected)


def test_errors():
    model = make_model()
    x = torch.rand(2, 1, 6, 6)
    with pytest.raises(TypeError, match="`model` must be an nn.Module or a callable, got str"):
        ProbeExplainer("net", x, FEATS)
    with pytest.raises(TypeError, match="`probe_inputs` must be a torch.Tensor, got list"):
        ProbeExplainer(model, [1, 2], FEATS)
    with pytest.raises(ValueError, match=r"`probe_inputs` must be batched with shape \(B, ...\), got shape \(6,\)"):
        ProbeExplainer(model, torch.rand(6), FEATS)
    with pytest.raises(ValueError, match="`every` must be >= 1, got 0"):
        ProbeExplainer(model, x, FEATS, every=0)
    with pytest.raises(TypeError, match="`stream` must be a bool, got str"):
        ProbeExplainer(model, x, FEATS, stream="yes")
    with pytest.raises(ValueError, match="`stream=True` needs CUDA `probe_inputs`, got inputs on cpu"):
        ProbeExplainer(model, x, FEATS, stream=True)
    with pytest.raises(TypeError, match="`modality` must have an integer dtype"):
        ProbeExplainer(model, x, FEATS.float())
    with pytest.raises(TypeError, match="`modality` must be a Modality or an integer feature map, got str"):
        ProbeExplainer(model, x, "grid")
    with pytest.raises(TypeError, match="`explainer` must be None or a torchlime.Explainer, got str"):
        ProbeExplainer(model, x, FEATS, explainer="lime")
    with pytest.raises(TypeError, match=r"`call` must be None or a torchlime.Call \(target, n_samples"):
        ProbeExplainer(model, x, FEATS, call={"n_samples": 30})
    probe = ProbeExplainer(model, x, FEATS, every=2, call=Call(n_samples=30))
    with pytest.raises(TypeError, match="`step` must be an int >= 0, got float"):
        probe.maybe_explain(2.0)
    with pytest.raises(ValueError, match="`step` must be >= 0, got -2"):
        probe.maybe_explain(-2)
    bad = ProbeExplainer(model, x, torch.zeros(1, 1, 6, 6, dtype=torch.long), call=Call(n_samples=30))
    with pytest.raises(ValueError, match="feature"):  # one feature: refused by the engine
        bad.maybe_explain(0)
    assert model.training and not bad.history


# ---- CUDA variants (skipped without a GPU) -----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_cuda_no_memory_left_and_rng_unchanged(cuda, stream):
    model = make_model().to(cuda)
    probe = ProbeExplainer(
        model, torch.rand(3, 1, 6, 6, device=cuda), FEATS.to(cuda), every=1, stream=stream, call=Call(n_samples=64)
    )
    probe.maybe_explain(0)  # warm-up: cuBLAS/cuDNN workspaces may be created once
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    rng = torch.cuda.get_rng_state_all()
    exp = probe.maybe_explain(1)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before
    assert all(torch.equal(a, b) for a, b in zip(rng, torch.cuda.get_rng_state_all()))
    assert exp.coef.device.type == "cpu"
    torch.testing.assert_close(exp.coef, probe.history[0][1].coef)


def test_cuda_stream_matches_default_stream(cuda):
    model = make_model().to(cuda)
    x = torch.rand(3, 1, 6, 6, device=cuda)
    a = ProbeExplainer(model, x, FEATS.to(cuda), call=Call(n_samples=64)).explain(0)
    b = ProbeExplainer(model, x, FEATS.to(cuda), call=Call(n_samples=64), stream=True).explain(0)
    torch.testing.assert_close(a.coef, b.coef)
