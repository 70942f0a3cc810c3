"""Distances and kernels against sklearn's pairwise distances and lime's formula."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.engine.registry import resolve_kernel
from torchlime.stages.weighting import ExponentialKernel, UniformKernel, input_distance, mask_distance

pairwise_distances = pytest.importorskip("sklearn.metrics").pairwise_distances  # optional: skip, not a collection error


@pytest.mark.parametrize("metric", ["cosine", "hamming", "euclidean"])
def test_mask_distance_matches_sklearn(metric):
    g = torch.Generator().manual_seed(0)
    z = torch.rand(1, 300, 11, generator=g) < 0.5
    z[0, 0] = True
    z[0, 5] = False  # an empty row: sklearn's cosine distance is 1
    ours = mask_distance(z, torch.ones(1, 11, dtype=torch.bool), metric)[0].double().numpy()
    zn = z[0].double().numpy()
    ref = pairwise_distances(zn, zn[0:1], metric=metric).ravel()
    np.testing.assert_allclose(ours, ref, atol=1e-6)


def test_mask_distance_ignores_padding():
    z = torch.tensor([[[True, False, True, True]]])
    valid = torch.tensor([[True, True, False, False]])
    d = mask_distance(z, valid, "cosine")
    assert torch.allclose(d, torch.tensor([[1 - (1 / 2) ** 0.5]]))


def test_lime_kernel_formula():
    d = torch.linspace(0, 1, 11)
    w = ExponentialKernel(width=0.25).weigh(d)
    lime = np.sqrt(np.exp(-(d.numpy() ** 2) / 0.25**2))
    np.testing.assert_allclose(w.numpy(), lime, rtol=1e-6)
    text = ExponentialKernel(width=25, scale=100).weigh(d)
    np.testing.assert_allclose(text.numpy(), np.sqrt(np.exp(-((100 * d.numpy()) ** 2) / 25**2)), rtol=1e-5)


def test_input_distance_cosine_like_captum():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(4, 3, 5, 5, generator=g)
    o = torch.rand(1, 3, 5, 5, generator=g)
    d = input_distance(x, o, "cosine")
    ref = 1 - torch.nn.functional.cosine_similarity(x.flatten(1), o.flatten(1).expand(4, -1), dim=1)
    torch.testing.assert_close(d, ref)
    assert torch.allclose(input_distance(x, x, "euclidean"), torch.zeros(4))


def test_uniform_and_resolution():
    assert torch.equal(UniformKernel().weigh(torch.rand(2, 3)), torch.ones(2, 3))
    assert resolve_kernel(0.5).width == 0.5
    assert resolve_kernel("captum").space == "input"
    with pytest.raises(ValueError, match="`distance` must be one of"):
        ExponentialKernel(distance="manhattan")
    with pytest.raises(ValueError, match="`width` must be a finite number > 0 or .auto., got 0.0"):
        ExponentialKernel(width=0.0)
    with pytest.raises(ValueError, match="`kernel` must be a Kernel, a float width"):
        resolve_kernel("gaussian")
