"""``FactorialSampler`` and ``methods.aberration``: the shipped columns are the construction's, alias no main
effect with a two-factor interaction and fewer with three-factor ones than Sobol's at every level, draw
balanced nested masks, and fit a nonlinear model closer than the Sobol masks at equal N."""

from __future__ import annotations

import math
import statistics
import warnings

import pytest
import torch

from torchlime import explain
from torchlime.methods.aberration import MAX_FEATURES, build_columns, columns, rank, word_lengths
from torchlime.methods.designs import FactorialSampler, SobolSampler, _directions, _factorial_bits


def _sobol_columns(f: int) -> list[int]:
    """Sobol's leading bits (``SobolSampler``'s columns) of F features, as 13-bit ints."""
    lead = (_directions(f)[:f, :13] >> 29) & 1
    return [int(v) for v in (lead << torch.arange(13)).sum(1)]


@pytest.mark.parametrize("f", [1, 2, 5, 8, 11, 12, 16])
def test_the_shipped_columns_are_the_construction(f):
    assert columns(f) == build_columns(f)


def test_word_lengths_beat_sobols_at_every_level():
    for f in range(2, MAX_FEATURES + 1):
        ours, sobol = columns(f), _sobol_columns(f)
        assert all(c % 2 == 1 for c in ours)  # the fold-over: no word of odd length at any level
        first = math.ceil(math.log2(f)) + 1  # the first level with room for F distinct columns
        for k in range(first, 14):
            a = word_lengths(ours, k)
            assert a[0] == a[1] == a[2] == a[4] == 0, (f, k, a)  # no zero, repeated or odd-length word
        assert sum(word_lengths(ours, k)[3] for k in range(8, 14)) <= sum(
            word_lengths(sobol, k)[3] for k in range(8, 14)
        ), f


def test_no_mask_repeats_before_all_are_drawn():
    """The first 2^k samples of F features hold 2^min(k, F) distinct masks, for every width and bit: no model call
    goes to a mask drawn already while others are missing, and a call reaches lime's answer over all 2^F masks.
    Before, 4 widths of the table (8, 11, 13, 14) and 10 more past its 13 bits repeated the first half's masks
    at some level (F = 11: only 2^10 distinct masks until 2^16 samples)."""
    weights = 2.0 ** torch.arange(30).view(1, -1, 1)
    table = (_factorial_bits(MAX_FEATURES, torch.device("cpu")).double() * weights).long()  # (F + 1, 30, F) bits
    for f in range(1, MAX_FEATURES + 1):
        rows = [int((table[f, b, :f] << torch.arange(f)).sum()) for b in range(30)]
        assert [rank(rows[:k]) for k in range(1, 31)] == [min(k, f) for k in range(1, 31)], f
    for f, k in ((8, 8), (11, 11)):  # the masks themselves: all 2^F (sample 0, the input itself, stands for one)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exp = explain(
                torch.nn.Linear(f, 1),
                torch.rand(2, f),
                torch.arange(f).view(1, f),
                n_samples=2**k,
                generator=0,
                sampler="factorial",
                return_samples=True,
            )
        assert [torch.unique(m[1:], dim=0).shape[0] for m in exp.samples] == [2**k - 1] * 2


def test_masks_are_balanced_nested_and_repeatable():
    x, f = torch.rand(3, 20), torch.arange(20).view(1, 20)
    model = torch.nn.Linear(20, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain(model, x, f, n_samples=1024, generator=4, sampler="factorial", return_samples=True)
        again = explain(model, x, f, n_samples=512, generator=4, sampler=FactorialSampler(), return_samples=True)
    masks = exp.samples
    assert bool(masks[:, 0].all())  # sample 0: the input itself
    assert torch.equal(masks[:, 256:512].sum(1), torch.full((3, 20), 128))  # every feature in half of a block
    assert torch.equal(masks[:, 512:1024].sum(1), torch.full((3, 20), 256))
    assert torch.equal(again.samples, masks[:, :512])  # a prefix is the smaller call's design
    assert not torch.equal(masks[0, 1:], masks[1, 1:])  # a digital shift per input


def test_wide_calls_draw_sobols_columns_and_p_must_be_a_half():
    x, f = torch.rand(2, 70), torch.arange(70).view(1, 70)
    model = torch.nn.Linear(70, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = explain(model, x, f, n_samples=300, generator=1, sampler=FactorialSampler(), return_samples=True)
        sobol = explain(model, x, f, n_samples=300, generator=1, sampler=SobolSampler(), return_samples=True)
    assert torch.equal(ours.samples, sobol.samples)
    with pytest.raises(ValueError, match=r"`p` must be 0.5 for FactorialSampler"):
        FactorialSampler(p=0.3)


def test_a_nonlinear_model_is_fitted_closer_than_with_sobol_masks():
    """A random tanh MLP of 12 features: the median error at N = 256 against the fit of every one of the 4096
    masks is at most half of the Sobol masks' (measured: about a quarter)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).requires_grad_(False)
    x, f = torch.rand(8, 12, generator=torch.Generator().manual_seed(0)) * 2, torch.arange(12).view(1, 12)
    every = torch.tensor([[(i >> j) & 1 for j in range(12)] for i in range(4096)], dtype=torch.bool)
    every = torch.cat((torch.ones(1, 12, dtype=torch.bool), every[:-1]), 0).expand(8, 4096, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth = explain(model, x, f, masks=every, n_samples=4096).coef[:, 0].double()
        errors = {}
        for sampler in ("sobol", "factorial"):
            errs = []
            for seed in (1, 2, 3):
                coef = explain(model, x, f, n_samples=256, generator=seed, sampler=sampler).coef[:, 0].double()
                errs += ((coef - truth).norm(dim=1) / truth.norm(dim=1)).tolist()
            errors[sampler] = statistics.median(errs)
    assert errors["factorial"] <= 0.5 * errors["sobol"], errors


def test_every_input_of_a_batch_draws_the_design_of_its_own_width():
    x = torch.rand(3, 10)
    f = torch.stack([torch.arange(10), torch.arange(10) // 2, torch.arange(10) % 7])  # 10, 5 and 7 features
    model = torch.nn.Linear(10, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batch = explain(model, x, f, n_samples=300, generator=5, sampler="factorial", return_samples=True)
        for i, width in enumerate((10, 5, 7)):
            alone = explain(
                model,
                x[i : i + 1],
                f[i : i + 1],
                n_samples=300,
                generator=5,
                sampler="factorial",
                return_samples=True,
                index=torch.tensor([i]),
            )
            assert torch.equal(batch.samples[i, :, :width], alone.samples[0, :, :width])
            s = torch.arange(1, 256).unsqueeze(1)  # the design's rows: parity(s & c_j), up to the shift's complement
            parity = torch.tensor(
                [[bin(int(v)).count("1") % 2 for v in row] for row in s & torch.tensor(columns(width))]
            )
            drawn = batch.samples[i, 1:256, :width].long()
            assert bool(((drawn == parity).all(0) | (drawn == 1 - parity).all(0)).all())  # per column
