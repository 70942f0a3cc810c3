"""Plain attributions that broadcast over the inputs (``torchlime.metrics.attributions``): one map for every
input scores as its explicit ``expand`` over the batch, a (B, 1, H, W) map as one feature per pixel (all
channels together) and a (B, C, 1, 1) one as one feature per channel, bit for bit in every metric that takes
a plain tensor, the caller's tensor untouched; shapes that do not broadcast are refused by name."""

from __future__ import annotations

import pytest
import torch

from torchlime.metrics import (
    GaussianNoise,
    deletion,
    faithfulness_correlation,
    from_attributions,
    infidelity,
    insertion,
    label_flip,
    region_perturbation,
)

B, C, H, W = 2, 3, 4, 4


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    body = [torch.nn.Flatten(), torch.nn.Linear(C * H * W, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)]
    return torch.nn.Sequential(*body)


METRICS = {
    "deletion": lambda m, x, a, **kw: deletion(m, x, a, target=1, steps=5, **kw),
    "insertion": lambda m, x, a, **kw: insertion(m, x, a, target=torch.tensor([2, 0]), baseline=0.5, **kw),
    "region_perturbation": lambda m, x, a, **kw: region_perturbation(m, x, a, target=0, **kw).curves,
    "label_flip": lambda m, x, a, **kw: label_flip(m, x, a, k=2, **kw),
    "faithfulness_correlation": lambda m, x, a, **kw: faithfulness_correlation(m, x, a, target=1, n_subsets=16, **kw),
    "infidelity": lambda m, x, a, **kw: infidelity(m, x, a, target=1, perturbations=GaussianNoise(n=4), **kw),
}


def _same(a: object, b: object) -> bool:
    """Bit for bit, NaN where NaN (a constant map has no correlation)."""
    assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


@pytest.mark.parametrize("name", list(METRICS))
def test_attributions_that_broadcast_score_as_their_explicit_forms(name):
    metric, model = METRICS[name], _model()
    x = torch.rand(B, C, H, W, generator=torch.Generator().manual_seed(1))
    pixels = torch.randn(B, 1, H, W, generator=torch.Generator().manual_seed(2))
    shared, channels = pixels[:1].clone(), torch.randn(B, C, 1, 1, generator=torch.Generator().manual_seed(3))
    before = [t.clone() for t in (shared, pixels, channels)]
    # one map for every input: the same numbers as the map repeated over the batch
    assert _same(metric(model, x, shared), metric(model, x, shared.expand(B, 1, H, W)))
    # (B, 1, H, W): one feature per pixel, every channel hidden together
    pixel_ids = torch.arange(H * W).view(1, 1, H, W)
    assert _same(metric(model, x, pixels), metric(model, x, pixels.reshape(B, H * W), features=pixel_ids))
    # (B, C, 1, 1): one feature per channel
    channel_ids = torch.arange(C).view(1, C, 1, 1)
    assert _same(metric(model, x, channels), metric(model, x, channels.reshape(B, C), features=channel_ids))
    assert all(torch.equal(t, b) for t, b in zip((shared, pixels, channels), before))  # nothing written in place


def test_a_shared_map_is_expanded_not_copied_into_the_record():
    model, x = _model(), torch.rand(B, C, H, W)
    record = from_attributions(model, x, torch.rand(1, 1, H, W), target=0)
    assert record.coef.shape == (B, 1, H * W) and torch.equal(record.coef[0], record.coef[1])
    assert record.features.shape == (1, 1, H, W) and record.n_features.tolist() == [H * W] * B


@pytest.mark.parametrize(
    "shape", [(B, 2, H, W), (3, 1, H, W), (B, C, H, 2), (B, C * H * W + 1)], ids=["C=2", "B=3", "W=2", "flat"]
)
def test_attributions_that_do_not_broadcast_are_refused_by_name(shape):
    model, x = _model(), torch.rand(B, C, H, W)
    got = rf"got a tensor of shape {tuple(shape)}".replace("(", r"\(").replace(")", r"\)")
    expected = r"shaped like `inputs` \(2, 3, 4, 4\) or broadcastable to them, e\.g\. \(2, 1, 4, 4\)"
    with pytest.raises(ValueError, match=rf"`explanation` must be a torchlime\.Explanation, {got}.*{expected}"):
        deletion(model, x, torch.rand(shape), target=0)
    with pytest.raises(ValueError, match=rf"`attributions` must be a real floating tensor .*{expected}.*, {got}"):
        from_attributions(model, x, torch.rand(shape), target=0)
