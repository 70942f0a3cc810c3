"""``torchlime show`` draws the explanations a result folder stores (with the data read again, the images
the run kept, or none: the heat map alone), refuses what it cannot draw in one line with exit code 2; and
``torchlime explain-dataset`` says when it resumes and what the folder holds at the end."""

from __future__ import annotations

import shutil

import pytest
import torch

from torchlime.cli import main
from torchlime.cli.main import build_parser

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli

PNG = b"\x89PNG\r\n\x1a\n"
RUN = ("--n-samples", 32, "--inputs-per-step", 2, "--shard-size", 4, "--segments", "grid", "--n-segments", 9)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("show")
    fx.image_model(d / "img.ts")
    fx.image_folder(d / "data", per_class=3)
    fx.image_folder(d / "other", per_class=3, classes=("ant", "bee"))
    (d / "other" / "ant" / "0.png").unlink()
    fx.png(d / "other" / "ant" / "0.png", seed=99)  # same layout and size, another first image
    return d


@pytest.fixture(scope="module")
def shards(files):
    """A result folder of explain-dataset (6 images in shards of 4) and one that kept its images."""
    for name, extra in (("shards", ()), ("kept", ("--keep-inputs",))):
        code = main(
            [str(a) for a in ("explain-dataset", files / "img.ts", files / "data", "--out", files / name, *RUN, *extra)]
        )
        assert code == 0
    return files


def test_show_with_the_data_writes_one_png_per_input(shards, tmp_path, capsys):
    code, out, err = cli(
        capsys, "show", shards / "shards", "--index", 0, 4, "--data", shards / "data", "--out", tmp_path
    )
    assert code == 0, err
    assert out.strip() == f"wrote 2 picture(s): {tmp_path / '0.png'} (cat/0.png), {tmp_path / '4.png'} (dog/1.png)"
    assert (tmp_path / "0.png").read_bytes()[:8] == PNG and (tmp_path / "4.png").read_bytes()[:8] == PNG
    assert "note" not in err


def test_show_with_kept_inputs_needs_no_data_and_defaults_to_dir_pictures(shards, capsys):
    code, out, err = cli(capsys, "show", shards / "kept", "--index", 5)
    assert code == 0 and "note" not in err, err
    assert (shards / "kept" / "pictures" / "5.png").read_bytes()[:8] == PNG


def test_show_without_images_draws_the_heat_map_alone_and_names_data(shards, tmp_path, capsys):
    code, out, err = cli(capsys, "show", shards / "shards", "--out", tmp_path / "first.png")
    assert code == 0, err
    assert out.strip() == f"wrote 1 picture(s): {tmp_path / 'first.png'} (cat/0.png)"
    assert "drew the heat map(s) alone; pass --data FOLDER" in err
    assert (tmp_path / "first.png").read_bytes()[:8] == PNG


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--index", 6),
            "--index must be the index of a stored explanation: {d}/shards holds 6 (inputs 0..3, 4..5), got 6",
        ),
        (("--index", "-1"), "argument --index: expected an integer >= 0, got -1"),
        (("--target-index", 1), "--target-index must be below the 1 target(s) explained per input, got 1"),
        (("--data", "{d}/other"), "--data {d}/other must be the image folder the run read: its first image"),
        (("--data", "{d}/nowhere"), "FOLDER {d}/nowhere: no such folder"),
        (("--index", 0, 1, "--out", "{d}/x.png"), "--out must be a folder when several inputs are drawn (2)"),
        (("--data", "{d}/data", "--out", "{d}/data/cat"), "--out {d}/data/cat lies inside --data {d}/data"),
    ],
)
def test_bad_options_are_one_line_exit_2(shards, capsys, args, message):
    code, out, err = cli(capsys, "show", shards / "shards", *(str(a).format(d=shards) for a in args))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("torchlime show: error: ") and message.format(d=shards) in err
    assert not (shards / "x.png").exists()


def test_a_folder_without_maps_or_results_is_refused(tmp_path, capsys):
    from torchlime import Call, Images
    from torchlime.dataset import explain_dataset

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2))
    explain_dataset(
        model,
        torch.rand(3, 3, 4, 4),
        tmp_path / "r",
        modality=Images(segments="grid", n_segments=4),
        call=Call(n_samples=16),
        keep=(),
        progress=False,
    )
    code, _, err = cli(capsys, "show", tmp_path / "r")
    assert code == 2 and err.count("\n") == 1 and "holds no segment maps" in err and "new folder" in err
    code, _, err = cli(capsys, "show", tmp_path)
    assert code == 2 and "must be a folder written by explain_dataset" in err
    code, _, err = cli(capsys, "show", tmp_path / "missing")
    assert code == 2 and f"DIR {tmp_path / 'missing'}: no such folder" in err


def test_explain_dataset_says_when_it_resumes_and_what_it_kept(shards, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(shards / "shards", out)
    (out / "shard-000001.safetensors").unlink()
    command = ("explain-dataset", shards / "img.ts", shards / "data", "--out", out, *RUN, "--no-progress")
    code, stdout, err = cli(capsys, *command)
    assert code == 0, err
    assert err == f"torchlime explain-dataset: resuming {out}: 1 of 2 shards already done (4 explanations kept)\n"
    assert f"into {out}: 6 explanation(s) kept in 2 shard(s) (1 computed now, 1 kept from before);" in stdout
    assert f"torchlime show {out} --index 0 --data {shards / 'data'}" in stdout
    code, stdout, err = cli(capsys, *command)
    assert err == f"torchlime explain-dataset: {out} is complete (2 of 2 shards, 6 explanations): nothing to compute\n"
    assert "(0 computed now, 2 kept from before)" in stdout


def test_show_is_a_command():
    assert "show" in build_parser().format_help()


def test_explain_dataset_refuses_an_out_inside_its_folder_and_a_locked_folder(shards, tmp_path, capsys):
    from torchlime.dataset._lock import FolderLockedError

    inside = ("explain-dataset", shards / "img.ts", shards / "data", "--out", shards / "data" / "explanations", *RUN)
    code, _, err = cli(capsys, *inside)
    assert code == 2 and "lies inside FOLDER" in err and not (shards / "data" / "explanations").exists()
    command = ("explain-dataset", shards / "img.ts", shards / "data", "--out", tmp_path / "r", *RUN, "--no-progress")
    with pytest.MonkeyPatch.context() as mp:  # another run holds the folder
        mp.setattr("torchlime.dataset.explain_dataset", _locked(FolderLockedError))
        code, _, err = cli(capsys, *command)
    assert code == 2 and err.count("\n") == 1 and "held by another run" in err


def _locked(error: type) -> object:
    def explain_dataset(*args: object, **kwargs: object) -> None:
        raise error("the folder is held by another run (pid 1)")

    return explain_dataset


def test_a_class_beyond_the_folder_s_classes_is_titled_by_its_number(shards, tmp_path, capsys):
    out = tmp_path / "r"
    command = (
        "explain-dataset",
        shards / "img.ts",
        shards / "data",
        "--out",
        out,
        *RUN,
        "--target",
        2,
        "--no-progress",
    )
    assert cli(capsys, *command)[0] == 0  # 2 class folders, a model of more outputs
    code, _, err = cli(capsys, "show", out, "--index", 0, "--data", shards / "data", "--out", tmp_path / "p")
    assert code == 0, err
