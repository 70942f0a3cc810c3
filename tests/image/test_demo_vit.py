"""The committed demo vision transformer: its weights, its accuracy, and token dropping on it."""

from __future__ import annotations

import hashlib
import warnings
from importlib import resources

import pytest
import torch

pytest.importorskip("torchvision")

from torchlime.demo.image_data import make_images  # noqa: E402
from torchlime.demo.image_vit import VIT_WEIGHTS_FILE, demo_vit_metadata, load_demo_vit  # noqa: E402
from torchlime.image import explain_image  # noqa: E402
from torchlime.image.drop import vit_family  # noqa: E402


def test_weights_match_their_metadata():
    meta = demo_vit_metadata()
    blob = resources.files("torchlime.demo").joinpath("weights", VIT_WEIGHTS_FILE).read_bytes()
    assert hashlib.sha256(blob).hexdigest() == meta["weights_sha256"]
    assert len(blob) < 3_000_000  # a few MB at most


def test_held_out_accuracy_is_what_the_metadata_says():
    model = load_demo_vit()
    images, labels, _ = make_images(200, seed=11)
    with torch.inference_mode():
        acc = (model(images).argmax(1) == labels).float().mean().item()
    assert acc >= demo_vit_metadata()["test_accuracy"] - 0.08


def test_drop_runs_on_the_demo_vit():
    model = load_demo_vit()
    assert vit_family(model).grid == (4, 4)
    images, labels, _ = make_images(2, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain_image(model, images, baseline="drop", target=labels, n_samples=64, generator=0)
    assert exp.n_features.tolist() == [16, 16] and exp.run.baseline == "drop"
