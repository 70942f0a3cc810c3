"""``explain_dataset`` killed (SIGKILL) mid-run and started again: no finished shard lost, no duplicate,
no temporary file left, and the same coefficients as an uninterrupted run.

The run is ``tests/dataset_worker.py`` in a subprocess; its ``--stop-at point:shard`` (a replaced
``_store.checkpoint`` in that process) makes it stop, and signal through a marker file, between a
shard's temporary write and its rename (``before_rename``) or between the rename and the index update
(``before_index``), so the test can kill it exactly there; a third run is killed at whatever point it
reached once its first shard was on disk.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from torchlime.dataset import load_results
from torchlime.dataset._lock import writer_tag

worker = importlib.import_module("tests.helpers.dataset_worker")  # tests/dataset_worker.py (tests/ is on sys.path)
SCRIPT = Path(worker.__file__)
FIELDS = ("index", "coef", "intercept", "score", "local_pred", "target", "n_features", "samples_used", "label")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    worker.run(out)
    return load_results(out).load()


def start(out: Path, hook: str = "", *args: str) -> tuple[subprocess.Popen, Path]:
    marker = out.parent / "hook-reached"
    cmd = [sys.executable, str(SCRIPT), str(out), "--stop-at", hook, "--marker", str(marker), *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, marker


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended ({proc.returncode}) before {path.name}: {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{path.name} did not appear in {timeout} s")
        time.sleep(0.01)


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    proc.stderr.close()


def listed(out: Path) -> list[int]:
    return [e["shard"] for e in json.loads((out / "index.json").read_text())["shards"]]


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every shard file: a rewritten file gets a new inode (os.replace)."""
    names = [p for p in os.listdir(out) if p.startswith("shard")]
    return {p: (os.stat(out / p).st_ino, os.stat(out / p).st_mtime_ns) for p in names}


def check_finished(out: Path, reference) -> None:
    names = sorted(os.listdir(out))
    assert names == ["index.json", "shard-000000.safetensors", "shard-000001.safetensors", "shard-000002.safetensors"]
    info = json.loads((out / "index.json").read_text())
    assert info["complete"] and listed(out) == [0, 1, 2]
    res = load_results(out).load()
    for name in FIELDS:
        assert torch.equal(getattr(res, name), getattr(reference, name)), name


def test_killed_between_temporary_write_and_rename(tmp_path, reference):
    out = tmp_path / "out"
    proc, marker = start(out, "before_rename:1")
    wait_for(marker, proc)
    kill(proc)
    names = sorted(os.listdir(out))
    tmp = f".shard-000001.safetensors.{writer_tag().rsplit('.', 1)[0]}.{proc.pid}.tmp"  # named with its writer
    assert names == [".lock", tmp, "index.json", "shard-000000.safetensors"]
    assert listed(out) == [0] and len(load_results(out)) == 8  # the temporary file is no result
    before = stamps(out)
    with pytest.warns(RuntimeWarning, match="taking over the stale lock"):  # its writer is dead
        worker.run(out, inputs_per_step=3)  # started again, here in the test process, with other steps
    assert stamps(out)["shard-000000.safetensors"] == before["shard-000000.safetensors"]  # not rewritten
    check_finished(out, reference)


def test_killed_between_rename_and_index_update(tmp_path, reference):
    out = tmp_path / "out"
    proc, marker = start(out, "before_index:1")
    wait_for(marker, proc)
    kill(proc)
    assert sorted(os.listdir(out)) == [".lock", "index.json", "shard-000000.safetensors", "shard-000001.safetensors"]
    assert listed(out) == [0]  # the index lags behind ...
    assert torch.equal(load_results(out).index, torch.arange(16))  # ... but the finished shard is found
    before = stamps(out)
    with pytest.warns(RuntimeWarning, match="taking over the stale lock"):
        worker.run(out)
    after = stamps(out)
    assert {k: after[k] for k in before} == before  # shards 0 and 1 kept as they were: only shard 2 computed
    check_finished(out, reference)


def test_killed_at_any_moment_then_resumed_by_the_same_command(tmp_path, reference):
    out = tmp_path / "out"
    proc, _ = start(out, "", "--inputs-per-step", "1")
    wait_for(out / "shard-000000.safetensors", proc)
    kill(proc)  # somewhere after shard 0: a batch of 1 takes a while, shard 1 has 8 of them
    assert not json.loads((out / "index.json").read_text())["complete"]
    again, _ = start(out, "", "--inputs-per-step", "1")
    assert again.wait(120) == 0, again.stderr.read()[-2000:]
    again.stderr.close()
    check_finished(out, reference)
