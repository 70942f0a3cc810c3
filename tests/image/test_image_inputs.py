"""Everyday image inputs at ``explain_image``'s door.

Images outside [0, 1] (0..255 pixels as floats, ImageNet-normalised) are segmented from a
rescaled copy while the model sees them as given; images in [0, 1] take the old path bit for bit;
integer, channels-last and unbatched images are refused before any model call, with the fix.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torchlime.image import explain_image
from torchlime.image._slic import finish, iterate_torch, seed_grid, to_lab
from torchlime.image.segments import UNIT_SLACK, resolve_segments, skimage_segments, slic, unit_range
from torchlime.stages.features import relabel

from tests.helpers.syncs import count_syncs

skimage = pytest.importorskip("skimage")
from skimage import data as skdata  # noqa: E402
from skimage import segmentation  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)  # ImageNet's normalisation
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
N_SEG = 50
#: the rescaled copies reproduce the picture within ~2e-7, which may move a tie at a segment
#: border: at most 0.5 % of the pixels may change label, the segment count may not
PIXEL_TOLERANCE = 0.005


@pytest.fixture(scope="module")
def picture() -> torch.Tensor:
    """Two natural images (2, 3, 96, 96), every channel spanning [0, 1] exactly."""
    out = []
    for img in (skdata.astronaut(), skdata.coffee()):
        t = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255.0
        t = F.interpolate(t, size=(96, 96), mode="bilinear", antialias=True, align_corners=False)
        lo, hi = t.amin((2, 3), keepdim=True), t.amax((2, 3), keepdim=True)
        out.append((t - lo) / (hi - lo))
    return torch.cat(out)


def counts(labels: torch.Tensor) -> list[int]:
    return [int(lab.max()) + 1 for lab in labels]


def test_unit_range_per_image_and_not_in_place(picture: torch.Tensor) -> None:
    x = picture[:1]
    over = x * (1 + 2 * UNIT_SLACK * 0.9) - UNIT_SLACK * 0.9  # a resize's overshoot: kept as it is
    batch = torch.cat((x, x * 255, (x - MEAN) / STD, over, torch.full_like(x, -3.0)))
    before = batch.clone()
    out = unit_range(batch)
    assert torch.equal(batch, before)  # a copy, never the caller's tensor
    assert torch.equal(out[0], x[0]) and torch.equal(out[3], over[0])  # bit for bit
    assert torch.allclose(out[1], x[0], atol=1e-6)  # 0..255 pixels: divided by 255
    assert torch.allclose(out[2], x[0], atol=1e-6)  # normalised: per-channel min-max undoes it
    assert torch.equal(out[4], torch.zeros_like(x[0]))  # a constant image: no division by zero


@pytest.mark.parametrize("method", ["slic", "quickshift", "felzenszwalb", "skimage_slic"])
def test_segments_are_the_same_at_any_range(picture: torch.Tensor, method: str) -> None:
    ref = resolve_segments(picture, method, n_segments=N_SEG)
    for images in (picture * 255, (picture - MEAN) / STD):
        labels = resolve_segments(images, method, n_segments=N_SEG)
        assert counts(labels) == counts(ref)
        assert (labels == ref).float().mean() >= 1 - PIXEL_TOLERANCE


def test_out_of_range_images_used_to_give_other_segments(picture: torch.Tensor, monkeypatch) -> None:
    """The test above fails without the rescaling (the segmenters saw 0..255 as [0, 1])."""
    from torchlime.image import segments

    monkeypatch.setattr(segments, "unit_range", lambda images: images)
    ref = slic(picture, n_segments=N_SEG)
    assert counts(slic(picture * 255, n_segments=N_SEG)) != counts(ref)


def test_unit_images_take_the_old_path(picture: torch.Tensor) -> None:
    """[0, 1] images give exactly what the segmenters gave before the rescaling existed."""
    h, w = picture.shape[-2:]
    grid = seed_grid(h, w, N_SEG)
    old = finish(iterate_torch(to_lab(picture, True), grid, 10.0, 10), grid, N_SEG, 3.0, 0.25)
    assert torch.equal(slic(picture, n_segments=N_SEG), old)
    arr = picture.double().permute(0, 2, 3, 1).numpy()
    old = relabel(torch.from_numpy(np.stack([segmentation.felzenszwalb(a, channel_axis=-1) for a in arr])))[0]
    assert torch.equal(skimage_segments(picture, "felzenszwalb"), old)


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
def test_model_sees_the_images_as_given(picture: torch.Tensor) -> None:
    images = picture * 255
    before = images.clone()
    rows = []

    def model(x: torch.Tensor) -> torch.Tensor:
        rows.append(x.clone())
        return x.mean((2, 3))

    exp = explain_image(model, images, n_segments=N_SEG, n_samples=20)
    unit = explain_image(model, picture, n_segments=N_SEG, n_samples=20)
    assert torch.equal(images, before)
    seen = torch.cat(rows)
    assert any(torch.equal(r, images[0]) for r in seen) and seen.max() > 200  # not rescaled
    assert (exp.features == unit.features).float().mean() >= 1 - PIXEL_TOLERANCE


def test_no_host_sync_added_for_rescaled_images(picture: torch.Tensor) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    images = (picture - MEAN) / STD
    explain_image(model, images, n_samples=200)  # measures the chunk size
    with count_syncs() as ops:
        explain_image(model, images, n_samples=200)
    assert len(ops) <= 6, ops


NET = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
U8 = (torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)


@pytest.mark.parametrize("segments", [None, "grid", torch.arange(256).view(16, 16) // 32])
@pytest.mark.parametrize(
    "images,error,match",
    [
        (U8, TypeError, r"`images` must have a floating dtype .*got torch.uint8; .*images.float\(\) / 255"),
        (U8 > 100, TypeError, r"`images` must have a floating dtype .*got torch.bool; convert with images.float\(\)"),
        (U8.long(), TypeError, r"`images` must have a floating dtype .*got torch.int64; convert with images.float\(\)"),
        (
            U8.permute(0, 2, 3, 1).float() / 255,
            ValueError,
            r"`images` must be \(B, C, H, W\) with channels on axis 1, got shape \(2, 16, 16, 3\), whose last "
            r"axis looks like channels \(B, H, W, C\); pass images.permute\(0, 3, 1, 2\)",
        ),
        (
            U8[0].float() / 255,
            ValueError,
            r"`images` must have 4 dimensions \(B, C, H, W\), got 3 dimensions with shape \(3, 16, 16\); "
            r"for one image \(C, H, W\), add the batch dimension: images.unsqueeze\(0\)",
        ),
        (
            U8[0].permute(1, 2, 0).float() / 255,
            ValueError,
            r"got 3 dimensions with shape \(16, 16, 3\); for one image \(H, W, C\) .*"
            r"images.permute\(2, 0, 1\).unsqueeze\(0\)",
        ),
        (U8[0, 0].float(), ValueError, r"got 2 dimensions with shape \(16, 16\); .*images\[None, None\]"),
    ],
    ids=["uint8", "bool", "int64", "channels_last", "one_image", "one_image_hwc", "one_gray_image"],
)
def test_bad_images_are_refused_before_any_model_call(images, error, match, segments) -> None:
    calls = []

    def model(x: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return NET(x)

    before = images.clone()
    with pytest.raises(error, match=match):
        explain_image(model, images, segments=segments, n_samples=20)
    assert calls == [] and torch.equal(images, before)


def test_pictures_show_images_as_the_segmenters_see_them(picture: torch.Tensor) -> None:
    from torchlime.image._pixels import to_hwc

    for images in (picture * 255, (picture - MEAN) / STD):
        assert np.allclose(to_hwc(images[0]), to_hwc(picture[0]), atol=1e-5)
