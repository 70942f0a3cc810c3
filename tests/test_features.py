"""Relabelling of arbitrary integer feature ids and feature means."""
from __future__ import annotations

import pytest
import torch

from torchlime.baselines import feature_mean, resolve_baseline
from torchlime.features import relabel


def test_relabel_per_input_contiguous_keeps_order(device):
    f = torch.tensor([[[7, 7], [3, 100]], [[1, 2], [2, 1]]], device=device)
    labels, n = relabel(f)
    assert labels.tolist() == [[[1, 1], [0, 2]], [[0, 1], [1, 0]]]
    assert n.tolist() == [3, 2]


def test_relabel_slic_style_start_at_one_and_negatives():
    f = torch.tensor([[1, 1, 2, 3], [-1, 5, 5, -2]])
    labels, n = relabel(f)
    assert labels.tolist() == [[0, 0, 1, 2], [-1, 0, 0, -1]]
    assert n.tolist() == [3, 1]


def test_relabel_rejects_float():
    with pytest.raises(TypeError, match="`features` must have an integer dtype"):
        relabel(torch.zeros(2, 3))


def test_feature_mean_per_channel_like_lime():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 4, 4, generator=g)
    labels = (torch.arange(16).view(1, 1, 4, 4) % 3).expand(2, 1, 4, 4)
    out = feature_mean(x, labels, 3)
    for b in range(2):
        for c in range(3):
            for f in range(3):
                sel = labels[b, 0] == f
                assert torch.allclose(out[b, c][sel], x[b, c][sel].mean().expand(int(sel.sum())))


def test_baseline_specs():
    x = torch.rand(2, 3, 4, 4)
    lab = torch.zeros(2, 1, 4, 4, dtype=torch.long)
    assert torch.equal(resolve_baseline(0.5, x, lab, 1), torch.full_like(x, 0.5))
    assert resolve_baseline("blur", x, lab, 1).shape == x.shape
    t = torch.rand(3, 1, 1)
    assert torch.equal(resolve_baseline(t, x, lab, 1), t.expand_as(x))
    with pytest.raises(ValueError, match=r"`baseline` of shape \(5,\) does not broadcast"):
        resolve_baseline(torch.zeros(5), x, lab, 1)
    with pytest.raises(ValueError, match="`baseline` string must be 'mean', 'blur' or 'zero'"):
        resolve_baseline("median", x, lab, 1)
    with pytest.raises(TypeError, match="`baseline` must be a number, tensor"):
        resolve_baseline(True, x, lab, 1)
