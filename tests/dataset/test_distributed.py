"""``explain_dataset`` under torchrun: 2 processes on the CPU with the gloo backend write one folder
that ``load_results`` reads as if one process had written it, equal to the single-process run."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchlime.dataset import load_results

worker = importlib.import_module("tests.helpers.dataset_worker")  # tests/dataset_worker.py (tests/ is on sys.path)
SCRIPT = Path(worker.__file__)
FIELDS = ("index", "coef", "intercept", "score", "local_pred", "target", "n_features", "samples_used", "label")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(out: Path, *args: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        str(out),
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    worker.run(out)
    return out


def assert_same_folder(out: Path, reference_dir: Path) -> None:
    assert sorted(os.listdir(out)) == sorted(os.listdir(reference_dir))
    info, ref_info = (json.loads((p / "index.json").read_text()) for p in (out, reference_dir))
    assert info["complete"] and info["environment"]["world_size"] == 2
    for key in ("arguments", "fingerprint", "n_inputs", "n_shards", "shards"):
        assert info[key] == ref_info[key], key
    res, ref = load_results(out).load(), load_results(reference_dir).load()
    for name in FIELDS:
        assert torch.equal(getattr(res, name), getattr(ref, name)), name


def test_two_processes_equal_one(tmp_path, reference_dir):
    out = tmp_path / "out"
    torchrun(out, "--init-gloo")  # the script initialises torch.distributed (gloo) itself
    assert_same_folder(out, reference_dir)


def test_two_processes_resume_a_partial_folder_from_a_dataloader(tmp_path, reference_dir):
    out = tmp_path / "out"
    shutil.copytree(reference_dir, out)
    for k in (1, 2):  # rank 1 owns shard 1, rank 0 shards 0 and 2: both have work
        os.remove(out / f"shard-00000{k}.safetensors")
    kept = os.stat(out / "shard-000000.safetensors").st_ino
    torchrun(out, "--loader")  # no init in the script: explain_dataset creates (and ends) a gloo group
    assert os.stat(out / "shard-000000.safetensors").st_ino == kept
    assert_same_folder(out, reference_dir)
