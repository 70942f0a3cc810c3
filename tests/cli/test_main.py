"""The command line: usage errors are one line with exit code 2 (no traceback), no empty output
folder is left behind, ``--version``; for every command, run as ``python -m torchlime.cli``
(the commands' own behaviour: tests/test_cli_explain.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import torchlime


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchlime.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_version():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"torchlime {torchlime.__version__}"


def test_python_dash_m_torchlime_is_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "torchlime", "--version"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == f"torchlime {torchlime.__version__}"
    proc = subprocess.run([sys.executable, "-m", "torchlime", "explode"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "invalid choice: 'explode'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        ((), "the following arguments are required: command"),
        (("demo", "--n-images", "0"), "argument --n-images: expected an integer >= 1, got 0"),
        (("demo", "--n-samples", "many"), "argument --n-samples: expected an integer, got 'many'"),
        (("demo", "--device", "tpu"), "argument --device: invalid choice: 'tpu'"),
        (("explode",), "invalid choice: 'explode'"),
        (("explain", "model.pt"), "the following arguments are required: INPUT, --out"),
    ],
)
def test_usage_errors_are_one_line(args, message):
    proc = run(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and message in proc.stderr and "Traceback" not in proc.stderr


def test_top_k_above_the_segments_is_refused_and_leaves_no_folder(tmp_path):
    out = tmp_path / "demo"
    proc = run("demo", "--out", str(out), "--n-images", "1", "--n-samples", "8", "--top-k", "500")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--top-k must be at most the number of segments of every image" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "command",
    [
        ("explain", "{model}", "{input}", "--out", "{out}"),
        ("explain-dataset", "{model}", "{tmp}/data", "--out", "{out}"),
        ("bench", "{model}", "--input-shape", "3", "8", "8"),
    ],
)
def test_a_file_that_is_no_model_is_one_line_and_leaves_no_folder(tmp_path, command):
    model, image, out = tmp_path / "model.pt", tmp_path / "x.png", tmp_path / "out"
    model.write_bytes(b"not a model")
    image.write_bytes(b"not an image either")
    args = [a.format(model=model, input=image, out=out, tmp=tmp_path) for a in command]
    proc = run(*args)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"torchlime {command[0]}: error: ")
    assert "model.pt" in proc.stderr and not out.exists()


def test_a_model_error_carrying_a_traceback_keeps_its_error_line():
    from torchlime.cli._common import short_error

    text = (
        "the model raised RuntimeError on its first call (The following operation failed in the TorchScript "
        "interpreter.\nTraceback of TorchScript (most recent call last):\n  code\nRuntimeError: mat1 and mat2 "
        "shapes cannot be multiplied (6x2 and 3x1)\n); torchlime sent it a float32 tensor of shape (6, 2)"
    )
    assert short_error(RuntimeError(text)) == "RuntimeError: mat1 and mat2 shapes cannot be multiplied (6x2 and 3x1)"
