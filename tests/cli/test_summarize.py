"""``torchlime summarize DIR``: prints the top features per class, writes summary.json, bars.png and beeswarm.png,
picks inputs with SP-LIME on request, and refuses what it cannot summarize in one line with exit code 2."""

from __future__ import annotations

import json

import pytest

from tests.dataset.test_summarize import COLUMNS, PerRowMaps, write
from tests.helpers.cli_fixtures import run as cli

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_summarize")
    write(root / "planted", shard_size=10)
    write(root / "superpixels", shard_size=10, modality=PerRowMaps())
    (root / "names.txt").write_text("\n".join(COLUMNS) + "\n")
    (root / "short.json").write_text(json.dumps(COLUMNS[:2]))
    return root


def test_summarize_prints_the_table_and_writes_the_files(folders, capsys):
    pytest.importorskip("matplotlib")
    code, out, err = cli(capsys, "summarize", folders / "planted", "--k", 2, "--names", folders / "names.txt")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "class 0: 12 explanation(s)" and lines[2].split()[:2] == ["1", "age"]
    first_of_class_1 = lines.index("class 1: 12 explanation(s)")
    assert [line.split()[1] for line in lines[first_of_class_1 + 2 : first_of_class_1 + 4]] == ["debt", "late"]
    out_dir = folders / "planted" / "summary"
    data = json.loads((out_dir / "summary.json").read_text())
    assert data["names"] == COLUMNS and data["classes"] == [0, 1] and data["picked"] is None
    for name in ("bars.png", "beeswarm.png"):
        assert (out_dir / name).read_bytes()[:8] == PNG


def test_pick_and_out(folders, tmp_path, capsys):
    code, out, err = cli(capsys, "summarize", folders / "planted", "--pick", 2, "--out", tmp_path / "s", "--n-boot", 20)
    assert code == 0, err
    data = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert len(data["picked"]) == 2 and f"SP-LIME picked 2 input(s): {data['picked'][0]}, " in out
    assert data["n_boot"] == 20


@pytest.mark.parametrize(
    "args, message",
    [
        (("missing",), "DIR {root}/missing: no such folder"),
        (("superpixels",), "superpixels of different images are not the same features"),
        (("planted", "--names", "{root}/short.json"), "must hold one name per feature (6), got 2"),
        (("planted", "--pick", 99), "--pick must be at most the 24 explanations DIR holds, got 99"),
        (("planted", "--k", 0), "expected an integer >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(folders, tmp_path, capsys, args, message):
    first, *rest = args
    rest = [str(a).format(root=folders) for a in rest]
    code, out, err = cli(capsys, "summarize", folders / first, *rest, "--out", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and message.format(root=folders) in err, err
    assert not (tmp_path / "out").exists()
