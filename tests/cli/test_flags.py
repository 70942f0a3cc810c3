"""One name, one meaning on the command line: ``--batch-size`` is rows per model call, ``--inputs-per-step``
inputs per explanation call, in every command; ``bench --batch`` (retired in 0.2.0) is a usage error."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
import torch

import torchlime
from torchlime.cli.main import build_parser
from torchlime.dataset import load_results
from torchlime.image import explain_image

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    fx.image_model(d / "img.ts")
    fx.image_folder(d / "data", per_class=2)
    return d


def test_explain_dataset_flags(files, tmp_path, capsys, monkeypatch):
    seen: list[dict[str, Any]] = []
    real = torchlime.dataset.explain_dataset

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torchlime.dataset, "explain_dataset", spy)
    common = (files / "img.ts", files / "data", "--n-samples", 16, "--segments", "grid", "--n-segments", 4)
    code, _, err = cli(capsys, "explain-dataset", *common, "--out", tmp_path / "old", "--model-batch-size", 8)
    assert code == 2 and "unrecognized arguments: --model-batch-size" in err  # retired in 0.2.0
    coefs = []
    for i, flags in enumerate((("--batch-size", 8), ("--inputs-per-step", 3, "--batch-size", 2), ())):
        out = tmp_path / str(i)
        code, _, err = cli(capsys, "explain-dataset", *common, "--out", out, "--no-progress", *flags)
        assert code == 0 and "note" not in err, err
        coefs.append(load_results(out).load().coef)
    assert [(k["explainer"].batch_size, k["inputs_per_step"]) for k in seen] == [(8, 32), (2, 3), (None, 32)]
    assert torch.equal(coefs[0], coefs[1]) and torch.equal(coefs[0], coefs[2])


def test_bench_takes_inputs_per_step_and_refuses_batch(files, tmp_path, capsys):
    common = ("bench", files / "img.ts", "--input-shape", 3, 16, 16, "--n-samples", 8, "--reps", 1)
    code, _, err = cli(capsys, *common, "--batch", 2, "--json", tmp_path / "old.json")
    assert code == 2 and "unrecognized arguments: --batch" in err
    code, _, err = cli(capsys, *common, "--inputs-per-step", 2, "--json", tmp_path / "new.json")
    assert code == 0 and "deprecated" not in err
    new = json.loads((tmp_path / "new.json").read_text())
    assert new["batch"] == 2 and new["rows"] == 16


def test_n_segments_default_is_explain_images_and_the_help_names_inputs_per_step():
    default = inspect.signature(explain_image).parameters["n_segments"].default
    parser = build_parser()
    for argv in (["explain", "m.ts", "a.png", "--out", "o"], ["explain-dataset", "m.ts", "d", "--out", "o"]):
        assert parser.parse_args(argv).n_segments == default
    helps = {
        cmd: parser.parse_args(
            [cmd, "m", "--input-shape", "1", "1", "1"] if cmd == "bench" else [cmd, "m", "d", "--out", "o"]
        ).parser.format_help()
        for cmd in ("explain-dataset", "bench")
    }
    assert "--inputs-per-step" in helps["explain-dataset"] and "--model-batch-size" not in helps["explain-dataset"]
    assert "--inputs-per-step" in helps["bench"] and "--batch " not in helps["bench"]
