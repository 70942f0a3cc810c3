"""Samplers: row 0, padding, distributions, determinism, device."""

from __future__ import annotations

import pytest
import torch

from torchlime.engine.registry import resolve_sampler
from torchlime.methods.designs import SobolSampler
from torchlime.stages.sampling import BernoulliSampler, ShapleySampler, UniformCountSampler, valid_features

SAMPLERS = [BernoulliSampler(), UniformCountSampler(), ShapleySampler()]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
def test_row0_padding_shape_device(sampler, device):
    g = torch.Generator(device=device).manual_seed(0)
    nf = torch.tensor([5, 9, 3], device=device)
    z = sampler(nf, 200, 9, g)
    assert z.shape == (3, 200, 9) and z.dtype == torch.bool and z.device.type == device.type
    assert z[:, 0].all()
    assert (z | valid_features(nf, 9).unsqueeze(1)).all()  # padding always kept
    assert z[0, :, 5:].all() and z[2, :, 3:].all()


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: type(s).__name__)
def test_same_generator_state_same_masks(sampler):
    nf = torch.tensor([7, 7])
    a = sampler(nf, 50, 7, torch.Generator().manual_seed(3))
    b = sampler(nf, 50, 7, torch.Generator().manual_seed(3))
    c = sampler(nf, 50, 7, torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_bernoulli_is_half():
    z = BernoulliSampler()(torch.tensor([20]), 20000, 20, torch.Generator().manual_seed(0))
    assert abs(z[:, 1:].float().mean().item() - 0.5) < 0.01


def test_uniform_count_removes_1_to_F_uniformly():
    f = 6
    z = UniformCountSampler()(torch.tensor([f]), 30001, f, torch.Generator().manual_seed(0))
    removed = (~z[0, 1:]).sum(-1)
    assert removed.min() == 1 and removed.max() == f
    freq = torch.bincount(removed, minlength=f + 1)[1:].float() / removed.numel()
    assert torch.allclose(freq, torch.full((f,), 1 / f), atol=0.012)
    # each feature equally likely to be removed
    per_feature = (~z[0, 1:]).float().mean(0)
    assert per_feature.std() < 0.01


def test_shapley_count_distribution():
    f = 5
    z = ShapleySampler()(torch.tensor([f]), 40001, f, torch.Generator().manual_seed(0))
    kept = z[0, 1:].sum(-1)
    k = torch.arange(1, f)
    p = (f - 1) / (k * (f - k)).float()
    p = p / p.sum()
    freq = torch.bincount(kept, minlength=f + 1)[1:f].float() / kept.numel()
    assert torch.allclose(freq, p, atol=0.01)


def test_validation():
    with pytest.raises(ValueError, match=r"`p` must be in \(0, 1\), got 1.5"):
        BernoulliSampler(p=1.5)
    with pytest.raises(ValueError, match="`sampler` must be a Sampler or one of"):
        resolve_sampler("halton")
    assert isinstance(resolve_sampler("uniform_count"), UniformCountSampler)
    assert isinstance(resolve_sampler("sobol"), SobolSampler)


def test_mul32_is_the_product_mod_2_to_the_32():
    from torchlime.kernels.reference_hash import _mul32

    g = torch.Generator().manual_seed(0)
    edges = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 1])
    xs = torch.cat([edges, torch.randint(0, 2**32, (2000,), generator=g)])
    for c in (0, 1, 0x7FEB352D, 0x846CA68B, 2**31, 2**32 - 1):
        want = torch.tensor([(int(v) * c) % 2**32 for v in xs])
        assert torch.equal(_mul32(xs, c), want), hex(c)
