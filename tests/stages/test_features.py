"""Stage 1 (``torchlime.stages.features``): relabelling arbitrary integer ids, grids, per-feature means."""

from __future__ import annotations

import pytest
import torch

from torchlime.stages.features import cell_ids, even_bands, prepare_features, relabel
from torchlime.stages.perturb.fills import feature_mean


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


def test_relabel_matches_unique_on_random_ids(device):
    g = torch.Generator().manual_seed(3)
    f = torch.randint(-3, 50, (5, 7, 9), generator=g).to(device)
    labels, n = relabel(f)
    for b in range(5):
        ids = f[b][f[b] >= 0].unique()  # sorted
        expected = torch.full_like(f[b], -1)
        for rank, v in enumerate(ids.tolist()):
            expected[f[b] == v] = rank
        assert torch.equal(labels[b], expected) and int(n[b]) == ids.numel()


def test_even_bands_and_grid():
    assert even_bands(10, 3).tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    g = cell_ids((4, 6), (2, 3))
    assert g.tolist() == [[0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2], [3, 3, 4, 4, 5, 5], [3, 3, 4, 4, 5, 5]]
    bands = torch.tensor([0, 1, 1, 1])
    assert cell_ids((4, 2), (2, 1), bands=(bands, None)).tolist() == [[0, 0], [1, 1], [1, 1], [1, 1]]
    assert cell_ids((5,), (5,)).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"`counts` must be at most the size of each dim \(4, 6\), got \(5, 1\)"):
        cell_ids((4, 6), (5, 1))
    with pytest.raises(ValueError, match="`counts` must be >= 1, got 0"):
        cell_ids((4, 6), (0, 1))


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


def test_singletons_when_every_feature_is_one_element(device):
    x = torch.rand(2, 3, 4, 4, device=device)
    pixels = torch.arange(16, device=device).view(1, 1, 4, 4)
    assert prepare_features(x, pixels).singletons  # broadcast over the channels: still one element of the map
    assert not prepare_features(x, pixels // 2).singletons
    per_input = torch.stack((pixels[0], pixels[0].flip(-1)))  # (2, 1, 4, 4): distinct ids in both inputs
    assert prepare_features(x, per_input).singletons
    one_pair = per_input.clone()
    one_pair[1, 0, 0, 0] = one_pair[1, 0, 0, 1]  # input 1 has a two-element feature
    assert not prepare_features(x, one_pair).singletons
    special = pixels.clone()
    special[..., 0, 0] = -1  # an element of no feature: not counted as singletons (the flag stays conservative)
    assert not prepare_features(x, special).singletons
