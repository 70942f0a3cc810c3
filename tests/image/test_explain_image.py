"""explain_image: segment sources, the lime preset, normalisation, planted object, errors."""

from __future__ import annotations

import pytest
import torch

from torchlime.image import LIME_QUICKSHIFT, explain_image
from torchlime.image.segments import slic

from tests.helpers import grid_labels


class SquareDetector(torch.nn.Module):
    """Class 1 score = mean of channel 0 inside a planted square; class 0 = its negative."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask.float() / mask.sum())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = (x[:, 0] * self.mask).sum((1, 2))
        return torch.stack([-s, s], 1)


def planted(device):
    mask = torch.zeros(32, 32, dtype=torch.bool)
    mask[8:16, 16:24] = True  # exactly one cell of the 4 x 4 grid
    x = torch.full((2, 3, 32, 32), 0.2)
    x[:, 0, mask] = 0.9
    return SquareDetector(mask).to(device), x.to(device), mask.to(device)


def test_planted_square_is_the_top_segment(device):
    model, x, mask = planted(device)
    # a uniform planted square: only a fill other than its own mean colour can hide it
    labels = grid_labels(32, 32, 4, 4).to(device)
    exp = explain_image(model, x, segments=labels, target=1, n_samples=200, baseline=0.0)
    top = exp.top_features(1)[0][:, 0, 0]
    for b in range(2):
        seg = exp.features[b, 0] == top[b]
        assert torch.equal(seg, mask)
    assert exp.heatmap(0).shape == x.shape


def test_default_slic_segments_on_device(device):
    model, x, _ = planted(device)
    x = x + 0.05 * torch.rand(x.shape, generator=torch.Generator().manual_seed(0)).to(device)
    exp = explain_image(model, x, n_segments=16, n_samples=50)
    assert exp.features.shape == (2, 1, 32, 32) and exp.features.device.type == device.type
    torch.testing.assert_close(exp.features[:, 0], slic(x, n_segments=16).to(device))


def test_segment_forms_are_equivalent():
    model, x, _ = planted("cpu")
    g = grid_labels(32, 32, 4, 4)
    a = explain_image(model, x, segments=g, n_samples=40)
    b = explain_image(model, x, segments=g.expand(2, 32, 32) + 5, n_samples=40)
    c = explain_image(model, x, segments=lambda im: g.expand(im.shape[0], 32, 32), n_samples=40)
    torch.testing.assert_close(a.coef, b.coef)
    torch.testing.assert_close(a.coef, c.coef)


def test_lime_preset_uses_quickshift_and_top5():
    pytest.importorskip("skimage")
    from torchlime.image.segments import skimage_segments

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    exp = explain_image(model, x, preset="lime", n_samples=30)
    assert exp.target.shape == (1, 5)
    expected = skimage_segments(x, "quickshift", **LIME_QUICKSHIFT)
    assert int(exp.n_features[0]) == int(expected.max()) + 1


def test_normalize_equals_normalising_inside_the_model():
    model, x, _ = planted("cpu")
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.2, 0.2)
    m, s = torch.tensor(mean).view(1, 3, 1, 1), torch.tensor(std).view(1, 3, 1, 1)
    g = grid_labels(32, 32, 4, 4)
    a = explain_image(model, x, segments=g, normalize=(mean, std), n_samples=40, target=1)
    b = explain_image(lambda im: model((im - m) / s), x, segments=g, n_samples=40, target=1)
    torch.testing.assert_close(a.coef, b.coef)


def test_image_errors():
    model, x, _ = planted("cpu")
    with pytest.raises(ValueError, match=r"`images` must have 4 dimensions \(B, C, H, W\), got 3"):
        explain_image(model, x[0])
    with pytest.raises(TypeError, match="`images` must have a floating dtype"):
        explain_image(model, (x * 255).to(torch.uint8))
    with pytest.raises(ValueError, match="32"):
        explain_image(model, x, segments=torch.zeros(16, 16, dtype=torch.long))


@pytest.mark.parametrize("fraction", [0.001, 0.05, 0.3])
def test_non_finite_images_are_named_before_slic_breaks(fraction):
    model, x, _ = planted("cpu")
    x = torch.where(torch.rand(x.shape, generator=torch.Generator().manual_seed(0)) < fraction, float("nan"), x)
    with pytest.raises(ValueError, match=r"`images` must be finite, got \d+ NaN/inf values"):
        explain_image(model, x, n_samples=8, n_segments=10)


def test_normalize_is_checked():
    model, x, _ = planted("cpu")
    kw = dict(n_samples=8, segments="grid", n_segments=4)
    with pytest.raises(ValueError, match=r"`normalize` mean must have 3 values \(one per channel"):
        explain_image(model, x, normalize=((0.5, 0.5), (1, 1, 1)), **kw)
    with pytest.raises(ValueError, match=r"`normalize` std must be finite and > 0, got \(1, 0, 1\)"):
        explain_image(model, x, normalize=((0.5,) * 3, (1, 0, 1)), **kw)
    with pytest.raises(TypeError, match=r"`normalize` must be a pair \(mean, std\)"):
        explain_image(model, x, normalize=((0.5, 0.5, 0.5),), **kw)
    one = explain_image(model, x, normalize=(0.5, 0.25), **kw)  # one value for every channel
    import numpy as np

    arrays = explain_image(model, x, normalize=(np.full(3, 0.5), [np.float32(0.25)] * 3), **kw)
    assert torch.equal(one.coef, arrays.coef)
    three = explain_image(model, x, normalize=(torch.full((3,), 0.5), [0.25] * 3), **kw)
    assert torch.equal(one.coef, three.coef)


def test_grid_follows_n_segments_and_too_few_segments_say_so():
    model, x, _ = planted("cpu")
    assert explain_image(model, x, n_samples=8, segments="grid", n_segments=4).n_features.tolist() == [4] * len(x)
    assert explain_image(model, x, n_samples=8, segments="grid", n_segments=100).n_features.tolist() == [100] * len(x)
    # "auto" (the default): clamp(N // 40, 8, 100) = 8 for N = 8, so a 3 x 3 grid
    assert explain_image(model, x, n_samples=8, segments="grid").n_features.tolist() == [9] * len(x)
    with pytest.raises(ValueError, match="at least 2 features .*: split them finer .*n_segments"):
        explain_image(model, x, n_samples=8, segments="grid", n_segments=1)
