"""Requests no memory could hold are usage errors of the command line: one line naming the option, exit 2.

``--n-samples`` beyond the machine's memory (refused by the engine's size check before any sample is
made) and a ``--vocab`` JSON whose ids would make a list of a billion tokens (refused before it is built)
are the user's to change, not the model's failure nor an internal error.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli_fixtures as fx
from tests.helpers.cli_fixtures import run as cli


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli_sizes")
    fx.image_model(d / "img.ts")
    fx.text_model(d / "txt.ts")
    fx.png(d / "a.png")
    fx.text(d / "a.txt")
    return d


def _one_usage_line(code: int, stdout: str, err: str, command: str) -> None:
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert err.startswith(f"torchlime {command}: error: "), err


def test_n_samples_beyond_the_memory_is_a_usage_error(files, tmp_path, capsys):
    out = tmp_path / "out"
    code, stdout, err = cli(capsys, "explain", files / "img.ts", files / "a.png", "--out", out, "--n-samples", 10**12)
    _one_usage_line(code, stdout, err, "explain")
    assert "--n-samples 1000000000000 needs " in err and "TiB" in err and "of memory; use fewer samples" in err, err
    assert "the model failed" not in err and not out.exists()


def test_explain_dataset_names_n_samples_too(files, tmp_path, capsys):
    root = fx.image_folder(tmp_path / "data", per_class=1)
    out = tmp_path / "shards"
    args = ("explain-dataset", files / "img.ts", root, "--out", out, "--n-samples", 10**12, "--no-progress")
    code, stdout, err = cli(capsys, *args, "--segments", "grid", "--n-segments", 4)
    _one_usage_line(code, stdout, err, "explain-dataset")
    assert "--n-samples 1000000000000 needs " in err and "use fewer samples" in err, err
    assert "internal error" not in err and "the model failed" not in err


def test_vocab_ids_beyond_the_bound_are_refused_before_the_list_is_made(files, tmp_path, capsys):
    words = {w: i for i, w in enumerate(fx.WORDS)}
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps({**words, "far": 10**9}))
    out = tmp_path / "out"
    code, stdout, err = cli(
        capsys, "explain", files / "txt.ts", files / "a.txt", "--vocab", vocab, "--out", out, "--n-samples", 16
    )
    _one_usage_line(code, stdout, err, "explain")
    assert f"--vocab {vocab}: token ids must be in [0, 16777215] (2**24 - 1), got 1000000000" in err, err
    assert "internal error" not in err and not out.exists()
    vocab.write_text(json.dumps({**words, "back": -1}))  # a negative id wrote the last token before
    code, stdout, err = cli(
        capsys, "explain", files / "txt.ts", files / "a.txt", "--vocab", vocab, "--out", out, "--n-samples", 16
    )
    _one_usage_line(code, stdout, err, "explain")
    assert "token ids must be in [0, 16777215] (2**24 - 1), got -1" in err, err
