"""``torchlime explain-dataset`` says when a folder's classes are probably not the model's: the share of images
whose label (their class sub-folder's position) is the model's top class, warned about below one half and kept in
``dataset.json`` and the closing line."""

from __future__ import annotations

import json

import torch
from torch import nn

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli


class Always(nn.Module):
    """Scores whose top class is ``top`` for every image (and that still depend on the pixels)."""

    def __init__(self, top: int, classes: int = 3) -> None:
        super().__init__()
        self.register_buffer("bias", torch.nn.functional.one_hot(torch.tensor(top), classes).float() * 100)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, : self.bias.shape[0]] + self.bias


def _run(capsys, tmp_path, top: int, *extra):
    root = fx.image_folder(tmp_path / "data", per_class=2, classes=("a", "b", "c"))  # labels 0 0 1 1 2 2
    model = fx.script(Always(top), tmp_path / f"always{top}.ts")
    out = tmp_path / "out"
    args = ("explain-dataset", model, root, "--out", out, "--n-samples", 16, "--segments", "grid", "--n-segments", 4)
    code, stdout, err = cli(capsys, *args, "--no-progress", *extra)
    assert code == 0, err
    return stdout, err, json.loads((out / "dataset.json").read_text())["label_agreement"]


def test_labels_that_are_not_the_models_classes_are_warned_about(capsys, tmp_path):
    stdout, err, agreement = _run(capsys, tmp_path, top=1)
    assert agreement == 2 / 6
    assert "labels are the model's top class for only 33% of the images" in err and "--target top" in err
    assert "labels agree with the model's top class for 33% of them" in stdout


def test_agreeing_labels_and_other_targets_are_quiet(capsys, tmp_path):
    root = fx.image_folder(tmp_path / "data", per_class=2, classes=("a", "b"))  # labels 0 0 1 1
    model = fx.script(Always(0, classes=2), tmp_path / "always0.ts")
    args = ("explain-dataset", model, root, "--n-samples", 16, "--segments", "grid", "--n-segments", 4, "--no-progress")
    code, _, err = cli(capsys, *args, "--out", tmp_path / "half")
    assert code == 0 and "warning" not in err, err  # one half agrees: not below it
    assert json.loads((tmp_path / "half" / "dataset.json").read_text())["label_agreement"] == 0.5
    code, _, err = cli(capsys, *args, "--out", tmp_path / "top", "--target", "top")
    assert code == 0 and "warning" not in err, err
    assert json.loads((tmp_path / "top" / "dataset.json").read_text())["label_agreement"] is None
