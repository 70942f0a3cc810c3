"""The torch blend (the CPU path) against the blend's definition, on every expansion it takes.

``blend_torch`` expands the masks to every element, or, for labels whose rows repeat in blocks
(grid cells, time-frequency rectangles), once per block with the rows broadcast: both must give the
definition's bits. No Triton needed.
"""

from __future__ import annotations

import pytest
import torch

from torchlime.kernels.reference import blend_torch
from torchlime.stages.features import block_rows, block_size, prepare_features, row_starts

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def definition(x, base, labels, masks):
    """``where(masks[i, labels[i]], x[i], base[i])``, element by element."""
    c = masks.shape[0]
    lab = labels.long().reshape(labels.shape[0], -1).expand(c, -1)
    keep = masks.gather(1, lab).reshape(c, *labels.shape[1:])
    return torch.where(keep, x, base)


def cells(h: int, w: int, cell_h: int, cell_w: int) -> torch.Tensor:
    """long (H, W) ids of a grid of cell_h x cell_w cells (the last ones cut short)."""
    rows, cols = torch.arange(h) // cell_h, torch.arange(w) // cell_w
    return rows.view(-1, 1) * (int(cols.max()) + 1) + cols.view(1, -1)


def brute_block_rows(maps: torch.Tensor) -> int:
    """The definition, size by size: the largest k dividing H with rows jk .. jk + k - 1 equal in every map."""
    h = maps.shape[-2]
    rows = maps.reshape(-1, h, maps.shape[-1])
    return max(k for k in range(1, h + 1) if h % k == 0 and bool((rows == rows[:, (torch.arange(h) // k) * k]).all()))


@pytest.mark.parametrize(
    "h, w, cell_h, cell_w, k",
    [(96, 96, 8, 8, 8), (20, 12, 8, 4, 4), (18, 7, 6, 7, 6), (9, 9, 3, 1, 3), (7, 5, 2, 2, 1), (16, 16, 16, 16, 16)],
)
def test_block_rows_of_grids(h, w, cell_h, cell_w, k):
    grid = cells(h, w, cell_h, cell_w).view(1, 1, h, w)
    assert int(block_rows(grid)) == k == brute_block_rows(grid)


@pytest.mark.parametrize(
    "h, w, cell_h, cell_w, k",
    [(96, 96, 8, 8, 8), (20, 12, 8, 4, 4), (18, 7, 6, 7, 6), (9, 9, 3, 1, 3), (7, 5, 2, 2, 1), (16, 16, 16, 16, 16)],
)
def test_host_block_size_and_prepare_features_agree_with_block_rows(h, w, cell_h, cell_w, k):
    """The host gcd of the read ``row_starts`` (what ``prepare_features`` uses) is ``block_rows``."""
    grid = cells(h, w, cell_h, cell_w).view(1, 1, h, w)
    starts = row_starts(grid)
    assert starts is not None and block_size(h, starts.long().tolist()) == k
    g = torch.Generator().manual_seed(h)
    maps = torch.stack((grid[0], torch.randint(0, 4, (1, h, w), generator=g)))  # a grid and a noisy map
    assert block_size(h, row_starts(maps).long().tolist()) == brute_block_rows(maps)
    if int(grid.max()) > 0:  # a map of one cell has too few features to explain
        assert prepare_features(torch.rand(2, 3, h, w), grid.expand(2, 1, h, w)).block_rows == k


def test_block_rows_of_several_maps_and_none():
    g = torch.Generator().manual_seed(0)
    assert int(block_rows(torch.randint(0, 9, (1, 1, 12, 12), generator=g))) == 1  # superpixel-like
    grid = cells(8, 8, 4, 4)
    assert int(block_rows(grid.expand(2, 1, 8, 8))) == 4  # the same map for every input
    assert int(block_rows(torch.stack((grid, cells(8, 8, 2, 4))).unsqueeze(1))) == 2  # blocks of both
    assert int(block_rows(grid.view(1, 1, 1, 64))) == 1  # a single row
    assert int(block_rows(grid.reshape(1, 64))) == 1  # 1-D features (tokens, columns)
    other = grid.clone().view(1, 1, 8, 8)
    other[0, 0, 1, 0] = 99  # one label breaks the first block
    assert int(block_rows(other)) == 1
    assert int(block_rows(torch.zeros(1, 1, 6, 5, dtype=torch.long))) == 6  # one block of every row


@pytest.mark.parametrize(
    "x_rows, base_rows, shape, fshape",
    [
        (1, 1, (3, 24, 20), (1, 24, 20)),  # an image, one map for its channels
        (5, 1, (3, 24, 20), (1, 24, 20)),  # per-row inputs (several explained images)
        (1, 5, (3, 24, 20), (1, 24, 20)),  # per-row fills
        (1, 1, (2, 24, 20), (2, 24, 20)),  # a map per channel
        (1, 1, (24, 20), (24, 20)),  # no channel dim
        (1, 1, (1, 24, 20), (1, 24, 1)),  # labels broadcast along the last dim
        (1, 1, (2, 3, 24, 20), (1, 3, 24, 20)),  # more leading dims
    ],
)
@pytest.mark.parametrize("cell", [(8, 5), (6, 4), (1, 3)])
def test_blend_torch_is_the_definition(x_rows, base_rows, shape, fshape, cell):
    g = torch.Generator().manual_seed(0)
    c = 5
    h, w = fshape[-2], fshape[-1]
    grid = cells(h, w, *cell)
    lead = fshape[:-2]
    n_lead = int(torch.tensor(lead).prod()) if lead else 1
    labels = (grid + 100 * torch.arange(n_lead).view(-1, 1, 1)).view(1, *fshape)  # own cells per leading index
    labels = torch.unique(labels, return_inverse=True)[1]  # ids 0..F-1
    f = int(labels.max()) + 1
    x = torch.randn(x_rows, *shape, generator=g)
    base = torch.randn(base_rows, *shape, generator=g)
    masks = torch.rand(c, f, generator=g) > 0.5
    masks[0], masks[-1] = True, False
    k = int(block_rows(labels))
    assert k == cell[0]
    out = blend_torch(x, base, labels, masks, block_rows=k)
    assert out.shape == (c, *shape) and out.is_contiguous()
    assert torch.equal(out, definition(x, base, labels, masks))


def test_blend_torch_blocks_with_a_map_per_row():
    g = torch.Generator().manual_seed(2)
    c = 4
    labels = torch.stack([cells(12, 10, 4, 5) if i % 2 else cells(12, 10, 2, 2) for i in range(c)]).unsqueeze(1)
    labels = labels % 6  # ids 0..5 in every row
    x, base = torch.randn(c, 3, 12, 10, generator=g), torch.randn(1, 3, 12, 10, generator=g)
    masks = torch.rand(c, 6, generator=g) > 0.5
    k = int(block_rows(labels))
    assert k == 2
    assert torch.equal(blend_torch(x, base, labels, masks, block_rows=k), definition(x, base, labels, masks))


@pytest.mark.parametrize("channels_last", [False, True])
def test_blend_torch_grid_with_normalisation_and_cast(channels_last):
    g = torch.Generator().manual_seed(1)
    labels = cells(32, 32, 8, 8).view(1, 1, 32, 32)
    x, base = torch.rand(1, 3, 32, 32, generator=g), torch.zeros(1, 3, 32, 32)
    masks = torch.rand(6, 16, generator=g) > 0.5
    out = blend_torch(
        x,
        base,
        labels,
        masks,
        out_dtype=torch.float16,
        mean=MEAN,
        std=STD,
        channels_last=channels_last,
        block_rows=int(block_rows(labels)),
    )
    m, s = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)
    assert torch.equal(out, ((definition(x, base, labels, masks) - m) / s).half())
    assert out.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)


def test_explain_gives_the_same_bits_with_and_without_blocks(monkeypatch):
    import torchlime
    import torchlime.stages.features as features

    g = torch.Generator().manual_seed(3)
    images = torch.rand(2, 3, 24, 24, generator=g)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(5))
    model(images)
    grid = cells(24, 24, 6, 4).view(1, 1, 24, 24)
    seen = []
    k = block_rows(grid)  # before block_size is replaced below
    original = features.block_size
    monkeypatch.setattr(features, "block_size", lambda h, starts: seen.append(1) or original(h, starts))
    blocked = torchlime.explain(model, images, grid, n_samples=300, generator=0, normalize=(MEAN, STD))
    monkeypatch.setattr(features, "block_size", lambda h, starts: 1)
    plain = torchlime.explain(model, images, grid, n_samples=300, generator=0, normalize=(MEAN, STD))
    assert seen and k == 6
    assert torch.equal(blocked.coef, plain.coef) and torch.equal(blocked.intercept, plain.intercept)
