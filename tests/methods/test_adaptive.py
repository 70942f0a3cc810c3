"""``n_samples="auto"`` (``torchlime.methods.adaptive``): rounds stop where the top-k is stable, reuse
every sample, and record the samples each input got."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.methods.adaptive import Adaptive

from tests.helpers import SegmentLinear, grid_labels


def setup():
    labels = grid_labels(8, 8, 4, 4)
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return labels, x, labels.view(1, 1, 8, 8)


def test_clear_inputs_stop_early_noisy_ones_go_on():
    labels, x, f = setup()
    clear = SegmentLinear(labels, 16, n_out=1, seed=1)
    exp = explain(clear, x, f, n_samples="auto")
    assert exp.run.samples_used == [256, 256, 256] and exp.run.model_rows == 768

    def noisy(v):  # the same linear model plus noise that only a large N averages out
        return clear(v) + 0.5 * torch.sin(1e4 * v.flatten(1).sum(1, keepdim=True))

    exp = explain(noisy, x, f, n_samples=Adaptive(start=64, cap=2048))
    assert all(64 < n <= 2048 for n in exp.run.samples_used)


def test_rounds_reuse_the_samples_of_a_fixed_n():
    labels, x, f = setup()
    model = SegmentLinear(labels, 16, n_out=1, seed=1)
    seen = []

    def counting(v):
        seen.append(v.shape[0])
        return model(v)

    class Never(Adaptive):  # never settles: every round runs
        def stable(self, *args):
            return torch.zeros(3, dtype=torch.bool)

    auto = explain(counting, x, f, n_samples=Never(start=64, cap=256))
    assert auto.run.samples_used == [256] * 3 and sum(seen) == 768  # each row once, over 3 rounds
    fixed = explain(model, x, f, n_samples=256)
    torch.testing.assert_close(auto.coef, fixed.coef, rtol=1e-4, atol=1e-6)  # the same samples


@pytest.mark.parametrize(
    "value, error, match",
    [
        ("many", ValueError, r"`n_samples` must be an int >= 2, 'auto' or an Adaptive, got str 'many'"),
        (Adaptive, TypeError, r"`n_samples` must be an int >= 2"),
    ],
)
def test_errors(value, error, match):
    labels, x, f = setup()
    with pytest.raises(error, match=match):
        explain(SegmentLinear(labels, 16), x, f, n_samples=value)
    with pytest.raises(ValueError, match=r"`n_samples='auto'` draws its own samples in rounds"):
        explain(SegmentLinear(labels, 16), x, f, n_samples="auto", return_samples=True)
    with pytest.raises(ValueError, match=r"`cap` must be >= `start` \(512\), got 256"):
        Adaptive(start=512, cap=256)
