"""Tests of torchlime.image.segments (CPU; CUDA variants skip cleanly without a GPU)."""

from __future__ import annotations

import sys
from typing import Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from torchlime.image import segments
from torchlime.image.segments import boundaries, grid, resolve_segments, skimage_segments, slic

skimage = pytest.importorskip("skimage")
from skimage import data as skdata  # noqa: E402
from skimage import measure, segmentation  # noqa: E402

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True, scope="module")
def one_thread() -> Iterator[None]:
    """One intra-op thread: on a busy 2-core machine, OpenMP threads waiting for a core
    slow every op down by milliseconds. ``test_slic_same_with_two_threads`` covers 2."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, CUDA])])
def device(request: pytest.FixtureRequest) -> str:
    return request.param


def _resize(img: np.ndarray, size: int = 224) -> torch.Tensor:
    t = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255.0
    return F.interpolate(t, size=(size, size), mode="bilinear", antialias=True, align_corners=False).clamp(0, 1)


@pytest.fixture(scope="module")
def astronaut() -> torch.Tensor:
    """skimage's bundled astronaut, resized to (1, 3, 224, 224) RGB in [0, 1]."""
    return _resize(skdata.astronaut())


@pytest.fixture(scope="module")
def pair(astronaut: torch.Tensor) -> torch.Tensor:
    """Two different natural images (2, 3, 224, 224)."""
    return torch.cat((astronaut, _resize(skdata.coffee())))


def n_components(labels: np.ndarray) -> int:
    """Number of 4-connected regions of equal label."""
    return int(measure.label(labels + 1, connectivity=1, background=0).max())


def assert_valid(labels: torch.Tensor, shape: tuple[int, ...]) -> None:
    """Long (B, H, W), contiguous 0..F_b-1 per image, every label one 4-connected region."""
    assert labels.dtype == torch.long and tuple(labels.shape) == shape
    for lab in labels.cpu().numpy():
        f = int(lab.max()) + 1
        assert lab.min() == 0 and np.array_equal(np.unique(lab), np.arange(f))
        assert n_components(lab) == f


# ----------------------------------------------------------------------------- slic


def test_slic_contiguous_connected_and_sized(pair: torch.Tensor, device: str) -> None:
    labels = slic(pair.to(device))
    assert labels.device.type == device
    assert_valid(labels, (2, 224, 224))
    min_size = int(0.25 * 224 * 224 / 100)
    for lab in labels.cpu().numpy():
        assert np.bincount(lab.ravel()).min() >= min_size


@pytest.mark.parametrize("n_segments", [25, 100, 300])
def test_slic_roughly_n_segments(astronaut: torch.Tensor, n_segments: int) -> None:
    f = int(slic(astronaut, n_segments=n_segments).max()) + 1
    assert 0.5 * n_segments <= f <= 1.5 * n_segments


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((2, 3, 37, 53), {}),  # sizes not divisible by the grid
        ((1, 1, 40, 30), {"compactness": 0.1}),  # grayscale
        ((2, 5, 32, 32), {"n_segments": 20, "compactness": 0.1}),  # more channels
        ((1, 3, 32, 48), {"lab": False, "compactness": 0.1, "max_size_factor": 0.5, "min_size_factor": 0.0}),
        ((1, 3, 5, 4), {"n_segments": 1000}),  # more segments than pixels
        ((1, 3, 1, 1), {}),
    ],
)
def test_slic_valid_on_noise(shape: tuple[int, ...], kwargs: dict, device: str) -> None:
    """Random noise is the hardest case for connectivity: many fragments."""
    images = torch.rand(shape, generator=torch.Generator().manual_seed(0)).to(device)
    labels = slic(images, **kwargs)
    assert_valid(labels, (shape[0],) + shape[2:])


def test_slic_batched_equals_one_by_one(pair: torch.Tensor, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    images = torch.cat((pair, pair.flip(-1)[:1])).to(device)
    batched = slic(images)
    for i in range(images.shape[0]):
        assert torch.equal(batched[i], slic(images[i : i + 1])[0])
    monkeypatch.setattr(segments, "_CPU_CHUNK", 2 * 224 * 224)  # CPU: chunks of 2 images + 1
    assert torch.equal(slic(images), batched)


def test_slic_deterministic_and_input_unchanged(pair: torch.Tensor, device: str) -> None:
    images = pair.to(device)
    before = images.clone()
    assert torch.equal(slic(images), slic(images))
    assert torch.equal(images, before)


def test_slic_same_with_two_threads(astronaut: torch.Tensor) -> None:
    one = slic(astronaut)
    torch.set_num_threads(2)
    try:
        assert torch.equal(slic(astronaut), one)
    finally:
        torch.set_num_threads(1)


def test_slic_dtypes(astronaut: torch.Tensor) -> None:
    x = astronaut[:, :, :64, :64]
    assert_valid(slic(x.double(), n_segments=16), (1, 64, 64))
    assert_valid(slic(x.half(), n_segments=16), (1, 64, 64))
    assert torch.equal(slic(x.clone().requires_grad_(), n_segments=16), slic(x, n_segments=16))


def test_slic_respects_a_sharp_edge(device: str) -> None:
    """Two flat colour halves: no segment may straddle the edge (not on a cell border)."""
    images = torch.zeros(2, 3, 64, 80)
    images[:, 0, :, :37] = 0.9  # red left
    images[:, 2, :, 37:] = 0.8  # blue right
    images[1] = images[0].flip(-1)  # the edge at x = 43
    labels = slic(images.to(device), n_segments=30).cpu()
    left = images[:, 0] > 0.5
    for b in range(2):
        for k in labels[b].unique():
            side = left[b][labels[b] == k]
            assert side.all() or not side.any()


def test_slic_compactness_like_skimage(astronaut: torch.Tensor) -> None:
    """Same compactness, same parameters: similar numbers of boundary pixels as skimage's slic."""
    ours = boundaries(slic(astronaut))[0].float().mean().item()
    img = astronaut[0].permute(1, 2, 0).double().numpy()
    ref = segmentation.slic(img, n_segments=100, compactness=10.0, start_label=0)
    theirs = boundaries(torch.from_numpy(ref)[None])[0].float().mean().item()
    assert 0.5 * theirs <= ours <= 2.0 * theirs
    # higher compactness -> smoother, shorter boundaries
    assert boundaries(slic(astronaut, compactness=40.0)).float().mean().item() < ours


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda x: slic(x.numpy()), TypeError, r"`images` must be a torch.Tensor, got ndarray"),
        (lambda x: slic(x[0]), ValueError, r"`images` must have 4 dimensions \(B, C, H, W\), got 3 dimensions"),
        (lambda x: slic(x.long()), TypeError, r"`images` must have a floating dtype .*got torch.int64"),
        (lambda x: slic(x[:0]), ValueError, r"`images` must not be empty, got shape \(0, 3, 8, 8\)"),
        (lambda x: slic(x * float("nan")), ValueError, r"`images` must be finite"),
        (lambda x: slic(x, n_segments=0), ValueError, r"`n_segments` must be >= 1, got 0"),
        (lambda x: slic(x, n_segments=2.5), TypeError, r"`n_segments` must be an int >= 1, got float 2.5"),
        (lambda x: slic(x, compactness=-1), ValueError, r"`compactness` must be finite and > 0, got -1.0"),
        (lambda x: slic(x, n_iter=0), ValueError, r"`n_iter` must be >= 1, got 0"),
        (lambda x: slic(x, max_size_factor=0), ValueError, r"`max_size_factor` must be finite and > 0, got 0.0"),
        (lambda x: slic(x, min_size_factor=-0.5), ValueError, r"`min_size_factor` must be finite and >= 0, got -0.5"),
        (lambda x: slic(x, lab="yes"), TypeError, r"`lab` must be a bool, got str 'yes'"),
        (lambda x: grid([2, 8], 2, 2), TypeError, r"`images_or_shape` must be a tensor .*got list \[2, 8\]"),
        (lambda x: grid(x[0], 2, 2), ValueError, r"`images_or_shape` must have 4 dimensions \(B, C, H, W\), got 3"),
        (lambda x: grid(x, 0, 2), ValueError, r"`rows` must be >= 1, got 0"),
        (
            lambda x: grid(x, 2, 9),
            ValueError,
            r"`rows` x `cols` must be at most the image size H x W = 8 x 8, got 2 x 9",
        ),
        (lambda x: skimage_segments(x, "watershed"), ValueError, r"`method` must be one of .*got 'watershed'"),
        (
            lambda x: skimage_segments(x.repeat(1, 2, 1, 1)),
            ValueError,
            r"`images` must have 1 or 3 channels for quickshift, got 6",
        ),
        (lambda x: boundaries(x[:, 0]), TypeError, r"`labels` must have an integer dtype .*got torch.float32"),
        (lambda x: boundaries(x[0, 0].long()), ValueError, r"`labels` must have 3 dimensions \(B, H, W\), got 2"),
        (lambda x: boundaries([[0]]), TypeError, r"`labels` must be a torch.Tensor, got list"),
        (lambda x: resolve_segments(x, "watershed"), ValueError, r"`segments` must be one of .*got 'watershed'"),
        (
            lambda x: resolve_segments(x, [1, 2]),
            TypeError,
            r"`segments` must be None, a method name, a callable or an integer tensor, got list",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(8, 8)),
            TypeError,
            r"`segments` must have an integer dtype .*got torch.float32",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(8, dtype=torch.long)),
            ValueError,
            r"`segments` must have 2 or 3 or 4 dimensions \(H, W\), \(B, H, W\) or \(B, 1, H, W\), got 1",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(2, 2, 8, 8, dtype=torch.long)),
            ValueError,
            r"`segments` with 4 dimensions must be \(B, 1, H, W\), got shape \(2, 2, 8, 8\)",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(2, 8, 7, dtype=torch.long)),
            ValueError,
            r"`segments` must have the spatial size \(H, W\) = \(8, 8\) of `images` \(2, 3, 8, 8\), "
            r"got shape \(2, 8, 7\)",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(3, 8, 8, dtype=torch.long)),
            ValueError,
            r"`segments` must have batch size 1 or B = 2 like `images` \(2, 3, 8, 8\), got shape \(3, 8, 8\)",
        ),
        (
            lambda x: resolve_segments(x, torch.zeros(8, 8, dtype=torch.long, device="meta")),
            ValueError,
            r"`segments` must be on the same device as `images` \(cpu\), got meta",
        ),
        (
            lambda x: resolve_segments(x, lambda im: im[:, 0].numpy()),
            TypeError,
            r"`segments\(images\)` must return a torch.Tensor, got ndarray",
        ),
        (
            lambda x: resolve_segments(x, lambda im: im[:, 0]),
            TypeError,
            r"`segments\(images\)` must have an integer dtype .*got torch.float32",
        ),
        (lambda x: resolve_segments(x.long()), TypeError, r"`images` must have a floating dtype"),
    ],
)
def test_errors(call, error: type, match: str) -> None:
    x = torch.rand(2, 3, 8, 8)
    with pytest.raises(error, match=match):
        call(x)


# ----------------------------------------------------------------------------- grid, boundaries


def test_grid_labels(device: str) -> None:
    expected = torch.tensor([[0, 0, 1, 1, 2, 2, 3, 3]] * 3 + [[4, 4, 5, 5, 6, 6, 7, 7]] * 3)
    images = torch.rand(2, 3, 6, 8, device=device)
    out = grid(images, 2, 4)
    assert out.dtype == torch.long and out.device.type == device
    assert torch.equal(out.cpu(), expected.expand(2, 6, 8))
    assert torch.equal(grid((2, 6, 8), 2, 4), expected.expand(2, 6, 8))
    assert torch.equal(grid(torch.Size([2, 3, 6, 8]), 2, 4, device=device).cpu(), expected.expand(2, 6, 8))
    uneven = grid((1, 7, 5), 3, 2)[0]  # every rectangle present, row-major, rectangles connected
    assert_valid(uneven[None], (1, 7, 5))
    assert uneven.unique().tolist() == list(range(6)) and uneven[0, 0] == 0 and uneven[-1, -1] == 5
    assert (uneven[:, 0].diff() >= 0).all() and (uneven[0].diff() >= 0).all()


def test_boundaries(device: str) -> None:
    labels = torch.tensor([[[0, 0, 1], [0, 0, 1], [2, 2, 2]]], device=device)
    expected = torch.tensor([[[0, 1, 0], [1, 1, 1], [0, 0, 0]]], dtype=torch.bool)
    before = labels.clone()
    out = boundaries(labels)
    assert out.dtype == torch.bool and out.device.type == device
    assert torch.equal(out.cpu(), expected) and torch.equal(labels, before)
    assert not boundaries(torch.zeros(2, 4, 5, dtype=torch.int32)).any()


# ----------------------------------------------------------------------------- scikit-image adapters


@pytest.fixture(scope="module")
def small(astronaut: torch.Tensor) -> torch.Tensor:
    """(2, 3, 48, 48) crops: quickshift on 224x224 would take a second."""
    return torch.cat((astronaut[:, :, 40:88, 80:128], astronaut[:, :, 150:198, 20:68]))


def test_skimage_quickshift_uses_limes_defaults(small: torch.Tensor) -> None:
    before = small.clone()
    out = skimage_segments(small)
    for b in range(2):
        img = small[b].permute(1, 2, 0).double().numpy()
        ref = segmentation.quickshift(img, kernel_size=4, max_dist=200, ratio=0.2)
        assert torch.equal(out[b], torch.from_numpy(np.unique(ref, return_inverse=True)[1].reshape(ref.shape)))
    assert out.min() == 0 and torch.equal(small, before)
    assert skimage_segments(small, kernel_size=2).max() >= out.max()  # kwargs override


def test_skimage_slic_relabelled_from_zero(small: torch.Tensor) -> None:
    out = skimage_segments(small, "slic", n_segments=20)
    for b in range(2):
        ref = segmentation.slic(small[b].permute(1, 2, 0).double().numpy(), n_segments=20)
        assert ref.min() == 1 and torch.equal(out[b], torch.from_numpy(ref).long() - 1)


@pytest.mark.parametrize("method", ["quickshift", "felzenszwalb", "slic"])
@pytest.mark.parametrize("channels", [1, 3])
def test_skimage_adapters_contiguous(small: torch.Tensor, method: str, channels: int, device: str) -> None:
    images = (small[:, :1] if channels == 1 else small).to(device)
    out = skimage_segments(images, method)
    assert out.dtype == torch.long and out.shape == (2, 48, 48) and out.device.type == device
    for lab in out.cpu().numpy():
        assert np.array_equal(np.unique(lab), np.arange(lab.max() + 1))


def test_skimage_missing_says_how_to_install(small: torch.Tensor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "skimage.segmentation", None)
    with pytest.raises(
        ImportError,
        match=r"skimage_segments needs the optional package `skimage`: "
        r"pip install 'torchlime\[image\]'",
    ):
        skimage_segments(small)


# ----------------------------------------------------------------------------- resolve_segments


def test_resolve_segments_methods(small: torch.Tensor) -> None:
    before = small.clone()
    assert torch.equal(resolve_segments(small), slic(small))
    assert torch.equal(resolve_segments(small, "slic"), slic(small))
    assert torch.equal(resolve_segments(small, "grid"), grid(small, 10, 10))
    assert torch.equal(resolve_segments(small, "quickshift"), skimage_segments(small))
    assert torch.equal(resolve_segments(small, "felzenszwalb"), skimage_segments(small, "felzenszwalb"))
    assert torch.equal(resolve_segments(small, "skimage_slic"), skimage_segments(small, "slic"))
    assert torch.equal(resolve_segments(small, lambda im: grid(im, 3, 3).int()), grid(small, 3, 3))
    assert torch.equal(small, before)


@pytest.mark.parametrize("shape", [(8, 8), (1, 8, 8), (2, 8, 8), (2, 1, 8, 8), (1, 1, 8, 8)])
def test_resolve_segments_user_tensor(shape: tuple[int, ...], device: str) -> None:
    images = torch.rand(2, 3, 8, 8, device=device)
    user = torch.randint(5, 9, shape, dtype=torch.int16, device=device)
    before = user.clone()
    out = resolve_segments(images, user)
    assert out.dtype == torch.long and out.shape == (2, 8, 8) and out.device == images.device
    assert torch.equal(out, user.reshape(-1, 8, 8).long().expand(2, 8, 8))
    out += 1  # a new tensor: the user's one is untouched
    assert torch.equal(user, before)
