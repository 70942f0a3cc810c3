"""Tests of the synthetic demo data and the committed demo model."""

from __future__ import annotations

import hashlib
from importlib import resources

import pytest
import torch

from torchlime.demo.image_data import CLASS_NAMES, make_images, make_scenes
from torchlime.demo.image_models import METADATA_FILE, WEIGHTS_FILE, DemoNet, demo_model_metadata, load_demo_model

SIZE = 64


@pytest.fixture(scope="module")
def scenes():
    """A few hundred scenes, shared by the data tests."""
    return make_scenes(600, seed=5)


def test_make_images_is_deterministic() -> None:
    first = make_images(32, seed=3)
    second = make_images(32, seed=3)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    other = make_images(32, seed=4)
    assert not torch.equal(first[0], other[0])
    assert not torch.equal(first[2], other[2])


def test_make_images_matches_make_scenes() -> None:
    images, labels, evidence = make_images(40, seed=9)
    scenes = make_scenes(40, seed=9)
    assert torch.equal(images, scenes.images)
    assert torch.equal(labels, scenes.labels)
    assert torch.equal(evidence, scenes.evidence)


def test_make_images_does_not_touch_the_global_rng() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    make_images(8, seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_shapes_dtypes_and_ranges(scenes) -> None:
    n = len(scenes)
    assert scenes.images.shape == (n, 3, SIZE, SIZE) and scenes.images.dtype == torch.float32
    assert scenes.labels.shape == (n,) and scenes.labels.dtype == torch.long
    assert scenes.evidence.shape == (n, SIZE, SIZE) and scenes.evidence.dtype == torch.bool
    assert scenes.distractors.shape == (n, SIZE, SIZE) and scenes.distractors.dtype == torch.bool
    assert scenes.background is not None and scenes.background.shape == scenes.images.shape
    assert scenes.images.min() >= 0 and scenes.images.max() <= 1
    assert set(scenes.labels.unique().tolist()) <= set(range(len(CLASS_NAMES)))


def test_other_sizes_and_empty_batch() -> None:
    images, labels, evidence = make_images(4, seed=0, size=96)
    assert images.shape == (4, 3, 96, 96) and evidence.shape == (4, 96, 96)
    fraction = evidence.float().mean(dim=(1, 2))
    assert (fraction > 0.04).all() and (fraction < 0.12).all()
    images, labels, evidence = make_images(0, seed=0)
    assert images.shape == (0, 3, SIZE, SIZE) and labels.shape == (0,)


@pytest.mark.parametrize("bad", [{"n": -1}, {"size": 16}])
def test_invalid_arguments(bad: dict[str, int]) -> None:
    kwargs = {"n": 4, "seed": 0, **bad}
    with pytest.raises(ValueError):
        make_images(**kwargs)


def test_evidence_covers_four_to_twelve_percent(scenes) -> None:
    fraction = scenes.evidence.float().mean(dim=(1, 2))
    assert (fraction >= 0.04).all() and (fraction <= 0.12).all()
    # Size is not a cue: every class spans (almost) the whole range.
    for label in range(len(CLASS_NAMES)):
        of_class = fraction[scenes.labels == label]
        assert of_class.min() < 0.06 and of_class.max() > 0.09


def test_labels_are_balanced(scenes) -> None:
    counts = torch.bincount(scenes.labels, minlength=len(CLASS_NAMES))
    expected = len(scenes) / len(CLASS_NAMES)
    assert (counts > 0.75 * expected).all() and (counts < 1.25 * expected).all()


def test_distractors_keep_away_from_the_evidence(scenes) -> None:
    assert not (scenes.evidence & scenes.distractors).any()
    # Not even touching: grow the evidence by one pixel.
    grown = torch.nn.functional.max_pool2d(scenes.evidence[:, None].float(), 3, 1, 1)[:, 0] > 0
    assert not (grown & scenes.distractors).any()
    n_distractors = torch.stack([(scenes.distractor_ids == k).flatten(1).any(1) for k in range(6)]).sum(0)
    assert (n_distractors >= 1).all() and n_distractors.float().mean() > 3


def test_objects_differ_from_the_background(scenes) -> None:
    difference = (scenes.images - scenes.background).abs().amax(dim=1)
    objects = scenes.evidence | scenes.distractors
    assert torch.equal(difference > 0, objects)
    # Evidence is clearly visible: its mean colour is far from the background's.
    evidence = scenes.evidence[:, None]
    gap = ((scenes.images - scenes.background) * evidence).sum((2, 3)) / evidence.sum((2, 3))
    assert (gap.abs().amax(dim=1) > 0.15).float().mean() > 0.95


def test_demo_model_size_and_shapes() -> None:
    model = DemoNet()
    n_bytes = 4 * sum(p.numel() for p in model.parameters())
    assert n_bytes < 1_000_000
    assert model(torch.rand(2, 3, SIZE, SIZE)).shape == (2, len(CLASS_NAMES))


def test_committed_weights_match_metadata() -> None:
    metadata = demo_model_metadata()
    blob = resources.files("torchlime.demo").joinpath("weights", WEIGHTS_FILE).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == metadata["weights_sha256"]
    assert len(blob) == metadata["weights_bytes"] < 1_000_000
    assert metadata["class_names"] == list(CLASS_NAMES)
    assert metadata["image_size"] == SIZE
    assert metadata["test_accuracy"] >= 0.95
    assert resources.files("torchlime.demo").joinpath("weights", METADATA_FILE).is_file()


def test_committed_model_is_accurate_on_fresh_images() -> None:
    model = load_demo_model()
    assert not model.training
    images, labels, _ = make_images(256, seed=12345)
    with torch.no_grad():
        predicted = model(images).argmax(dim=1)
    assert (predicted == labels).float().mean() >= 0.90
