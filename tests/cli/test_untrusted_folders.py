"""The commands' output folders are never written through a link, and a result folder from elsewhere is read
as untrusted input: ``DIR/summary``, ``DIR/pictures``, a ``summary.json`` or a picture that is a link is
refused in one line with exit code 2 (the link's target untouched); a damaged index is one line too, never an
internal error; ``DIR/dataset.json`` is never read through a link."""

from __future__ import annotations

import importlib
import json
import shutil

import pytest

from torchlime.dataset._integrity import index_digest

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli

worker = importlib.import_module("tests.helpers.dataset_worker")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("untrusted") / "out"
    worker.run(out)
    return out


@pytest.fixture
def copy(clean, tmp_path):
    shutil.copytree(clean, tmp_path / "dir")
    return tmp_path / "dir"


@pytest.fixture
def victim(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "victim.txt").write_text("precious")
    return tmp_path


def refused(capsys, *args) -> str:
    code, _, err = cli(capsys, *args)
    assert code == 2 and "internal error" not in err and len(err.strip().splitlines()) <= 2, err
    return err


@pytest.mark.parametrize("command, entry", [("summarize", "summary"), ("show", "pictures")])
def test_a_derived_output_folder_that_is_a_link_is_refused(copy, victim, capsys, command, entry):
    if command == "show":
        pytest.importorskip("matplotlib")
    (copy / entry).symlink_to(victim / "elsewhere", target_is_directory=True)
    err = refused(capsys, command, copy)
    assert f"{copy / entry} must be a folder, got a symbolic link" in err
    assert list((victim / "elsewhere").iterdir()) == []


@pytest.mark.parametrize(
    "command, entry, name", [("summarize", "summary", "summary.json"), ("show", "pictures", "0.png")]
)
def test_an_output_file_that_is_a_link_is_refused_and_its_target_kept(copy, victim, capsys, command, entry, name):
    if command == "show":
        pytest.importorskip("matplotlib")
    (copy / entry).mkdir()
    (copy / entry / name).symlink_to(victim / "victim.txt")
    err = refused(capsys, command, copy)
    assert f"{copy / entry / name} must not be a symbolic link" in err
    assert (victim / "victim.txt").read_text() == "precious"


def test_explain_never_writes_summary_json_through_a_link(victim, tmp_path, capsys):
    fx.image_model(tmp_path / "img.ts")
    fx.png(tmp_path / "a.png")
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").symlink_to(victim / "victim.txt")
    args = ("--out", out, "--n-samples", 16, "--segments", "grid", "--n-segments", 4, "--top-k", 2)
    err = refused(capsys, "explain", tmp_path / "img.ts", tmp_path / "a.png", *args)
    assert f"{out / 'summary.json'} must not be a symbolic link" in err
    assert (victim / "victim.txt").read_text() == "precious"


@pytest.mark.parametrize(
    "index, message",
    [
        ("[" * 100_000 + "]" * 100_000, "nested at most 32 levels"),
        ({"shard_size": "x"}, r"`shard_size` must be an int in [1, 2**31), got 'x'"),
    ],
    ids=["nested", "shard_size"],
)
def test_a_damaged_index_is_one_line_not_an_internal_error(copy, capsys, index, message):
    if isinstance(index, dict):
        info = {**json.loads((copy / "index.json").read_text()), **index}
        index = json.dumps({**info, "sha256": index_digest(info)})
    (copy / "index.json").write_text(index)
    assert message in refused(capsys, "summarize", copy)


def test_dataset_json_is_never_read_through_a_link(copy, victim, capsys):
    pytest.importorskip("matplotlib")
    (victim / "elsewhere" / "record.json").write_text(json.dumps({"classes": ["secret"]}))
    (copy / "dataset.json").symlink_to(victim / "elsewhere" / "record.json")
    err = refused(capsys, "show", copy, "--out", victim / "pictures")
    assert f"cannot read {copy / 'dataset.json'}" in err and "symbolic link" in err
    code, out, err = cli(capsys, "summarize", copy, "--out", victim / "summary", "--n-boot", 2)
    assert code == 0 and "secret" not in out, err
