"""Sample-efficient designs (``torchlime.methods.designs``): the right distributions and the pair and
prefix properties they promise (how many samples they save is measured in
benchmarks/bench_sample_efficiency.py, not asserted here)."""

from __future__ import annotations

import pytest
import torch

from torchlime.methods.designs import AntitheticSampler, SobolSampler, StratifiedSampler, van_der_corput
from torchlime.stages.sampling import BernoulliSampler


@pytest.mark.parametrize("sampler", [StratifiedSampler(), AntitheticSampler(), SobolSampler()])
def test_marginals_rules_and_prefixes(sampler, device):
    nf = torch.tensor([12, 7], device=device)
    m = sampler(nf, 2049, 12, 0)
    assert m.shape == (2, 2049, 12) and m[:, 0].all() and m[1, :, 7:].all()  # row 0, padding
    freq = m[0, 1:].float().mean(0)
    assert (freq - 0.5).abs().max() < 0.04  # every feature kept half of the time
    assert torch.equal(sampler(nf, 300, 12, 0), m[:, :300])  # any prefix: the same samples
    assert not torch.equal(sampler(nf, 300, 12, 1), m[:, :300])


def test_stratified_sizes_follow_the_binomial_with_less_spread():
    nf = torch.tensor([10])
    k = StratifiedSampler()(nf, 1025, 10, 0)[0, 1:].sum(1).double()
    binom = torch.distributions.Binomial(10, 0.5)
    expected = binom.log_prob(torch.arange(11.0)).exp() * 1024
    observed = torch.bincount(k.long(), minlength=11).double()
    assert (observed - expected).abs().max() < 3  # stratified: within rounding of the expected counts
    iid = BernoulliSampler()(nf, 1025, 10, 0)[0, 1:].sum(1).double()
    assert (torch.bincount(iid.long(), minlength=11).double() - expected).abs().max() > 3


def test_antithetic_pairs_are_complements():
    m = AntitheticSampler()(torch.tensor([9]), 11, 9, 3)[0]
    assert torch.equal(m[1], ~m[2]) and torch.equal(m[3], ~m[4]) and not torch.equal(m[1], m[3])


def test_van_der_corput():
    assert van_der_corput(torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])).tolist() == [
        0.0,
        0.5,
        0.25,
        0.75,
        0.125,
        0.625,
        0.375,
        0.875,
    ]
