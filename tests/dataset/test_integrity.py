"""Fault injection on a result folder: nothing on disk is ever silently wrong, and one rerun repairs it.

Flipped bytes, truncation, a deleted shard, a damaged index, a full disk (``ENOSPC``) and a file too large
(``EFBIG``) mid-write, a stale and a live lock, writers on other hosts, and two writers racing: every case
ends in a warning or an error that names the file, and the same command run once more leaves the folder
byte for byte equal to a clean run's.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from torchlime._util import files as _files
from torchlime.dataset import FolderLockedError, load_results
from torchlime.dataset._lock import LOCK, host, writer_tag
from torchlime.dataset._scan import DamagedIndexError

worker = importlib.import_module("tests.helpers.dataset_worker")
SCRIPT = Path(worker.__file__)
SHARDS = ["shard-000000.safetensors", "shard-000001.safetensors", "shard-000002.safetensors"]


def assert_same_bytes(out: Path, clean: Path) -> None:
    """The folder equals the clean run's, file for file and byte for byte (no lock, no temporary file)."""
    assert sorted(os.listdir(out)) == sorted(os.listdir(clean)) == ["index.json", *SHARDS]
    for name in os.listdir(clean):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name


def flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))


class Calls:
    """Counts the model's calls in the tests' run."""

    def __init__(self, monkeypatch) -> None:
        self.n = 0
        make = worker.make_model

        def counted():
            model = make()
            model.register_forward_hook(lambda *a: setattr(self, "n", self.n + 1))
            return model

        monkeypatch.setattr(worker, "make_model", counted)


@pytest.mark.parametrize("at", [0.5, 0.02], ids=["tensor-bytes", "header"])
def test_flipped_bytes_are_caught_and_one_rerun_repairs(copy, clean, at):
    shard = copy / SHARDS[1]
    size = shard.stat().st_size
    flip(shard, at)
    assert shard.stat().st_size == size  # same length: only a checksum can tell
    with pytest.warns(RuntimeWarning, match=r"shard-000001.safetensors is damaged .*inputs 8..15 are left out"):
        res = load_results(copy)
    assert not res.complete and res.index.tolist() == list(range(8)) + list(range(16, 20))
    with pytest.warns(RuntimeWarning, match="shard-000001.safetensors is damaged"):
        worker.run(copy)
    assert_same_bytes(copy, clean)
    assert load_results(copy).complete


def test_truncated_shard_one_rerun_repairs(copy, clean):
    shard = copy / SHARDS[2]
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.warns(RuntimeWarning, match=r"shard-000002.safetensors is damaged \(unreadable"):
        assert not load_results(copy).complete
    with pytest.warns(RuntimeWarning, match="shard-000002.safetensors is damaged"):
        worker.run(copy)  # the index said complete: the shard is verified, found damaged, computed again
    assert_same_bytes(copy, clean)


def test_deleted_shard_one_rerun_repairs(copy, clean, monkeypatch):
    (copy / SHARDS[0]).unlink()
    assert len(load_results(copy)) == 12
    calls = Calls(monkeypatch)
    worker.run(copy)
    assert calls.n > 0
    assert_same_bytes(copy, clean)


def test_complete_folder_is_verified_and_not_recomputed(copy, clean, monkeypatch):
    calls = Calls(monkeypatch)
    worker.run(copy)
    assert calls.n == 0
    assert_same_bytes(copy, clean)


def test_damaged_index_is_named_and_rebuilt_by_one_rerun(copy, clean, monkeypatch):
    index = copy / "index.json"
    text = index.read_text()
    index.write_text(text.replace('"n_inputs": 20', '"n_inputs": 21'))  # valid JSON, wrong content
    with pytest.raises(DamagedIndexError, match=r"index.json is damaged \(checksum mismatch\); run explain_dataset"):
        load_results(copy)
    calls = Calls(monkeypatch)
    with pytest.warns(RuntimeWarning, match="index.json is damaged .* rebuilding it"):
        worker.run(copy)
    assert calls.n == 0  # the verified shards are adopted
    assert_same_bytes(copy, clean)
    index.write_text(text[: len(text) // 2])  # truncated: not even JSON
    with pytest.raises(ValueError, match=r"index.json is damaged \(unreadable"):
        load_results(copy)


def test_verify_false_reads_headers_only(copy):
    flip(copy / SHARDS[1])
    assert load_results(copy, verify=False).complete  # trusted, as documented
    with pytest.raises(TypeError, match="`verify` must be a bool"):
        load_results(copy, verify="yes")


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EFBIG], ids=["ENOSPC", "EFBIG"])
def test_a_write_failing_midway_leaves_a_readable_folder_and_one_rerun_completes(tmp_path, clean, monkeypatch, code):
    out = tmp_path / "out"
    real = _files.create

    def failing(dir_fd: int, name: str, data: bytes) -> None:
        if name.startswith(".shard-000001"):
            real(dir_fd, name, data[: len(data) // 2])  # half of it reached the disk
            raise OSError(code, os.strerror(code))
        real(dir_fd, name, data)

    monkeypatch.setattr(_files, "create", failing)
    with pytest.raises(OSError, match=os.strerror(code)):
        worker.run(out)
    assert sorted(os.listdir(out)) == ["index.json", SHARDS[0]]  # no temporary file, no lock left
    res = load_results(out)
    assert len(res) == 8 and not res.complete
    monkeypatch.setattr(_files, "create", real)
    worker.run(out)
    assert_same_bytes(out, clean)


def sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def write_lock(out: Path, **holder) -> None:
    info = {"host": host(), "pid": 1, "started": "2026-01-01T00:00:00Z", "run": "another", **holder}
    (out / LOCK).write_text(json.dumps(info))


def test_stale_lock_of_a_dead_process_is_taken_over(copy, clean):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_lock(copy, pid=dead.pid)
    (copy / SHARDS[1]).unlink()
    with pytest.warns(RuntimeWarning, match=f"taking over the stale lock .*pid {dead.pid}"):
        worker.run(copy)
    assert_same_bytes(copy, clean)  # the lock is gone too


def test_live_lock_refuses_at_once_naming_the_holder(copy, monkeypatch):
    live = sleeper()
    try:
        write_lock(copy, pid=live.pid)
        (copy / SHARDS[1]).unlink()
        before = {p: (copy / p).read_bytes() for p in os.listdir(copy)}
        calls = Calls(monkeypatch)
        with pytest.raises(FolderLockedError, match=f"pid {live.pid} on host {host()}.*wait for it to finish"):
            worker.run(copy)
        assert calls.n == 0 and {p: (copy / p).read_bytes() for p in os.listdir(copy)} == before
        assert isinstance(FolderLockedError("x"), RuntimeError)
    finally:
        live.kill()
        live.wait()


def test_lock_of_another_host_is_never_broken(copy):
    write_lock(copy, host="elsewhere", pid=12345)
    with pytest.raises(FolderLockedError, match=f"host elsewhere.*delete {copy / LOCK}"):
        worker.run(copy)


def test_cleanup_never_removes_another_writers_temporary_files(copy, clean):
    live = sleeper()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        mine, theirs = f".{SHARDS[1]}.{host()}.{live.pid}.tmp", f".{SHARDS[1]}.elsewhere.77.tmp"
        orphan = f".{SHARDS[1]}.{host()}.{dead.pid}.tmp"
        for name in (mine, theirs, orphan):
            (copy / name).write_bytes(b"partial")
        (copy / SHARDS[1]).unlink()
        worker.run(copy)
        names = set(os.listdir(copy))
        assert mine in names and theirs in names and orphan not in names
        for name in (mine, theirs):
            (copy / name).unlink()
        assert_same_bytes(copy, clean)
    finally:
        live.kill()
        live.wait()


def start(out: Path, hook: str = "") -> tuple[subprocess.Popen, Path]:
    marker = out.parent / f"hook-{time.monotonic_ns()}"
    cmd = [sys.executable, str(SCRIPT), str(out), "--stop-at", hook, "--marker", str(marker)]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), marker


def test_a_second_writer_is_refused_while_the_first_runs(tmp_path, clean):
    out = tmp_path / "out"
    first, marker = start(out, "before_rename:1")
    try:
        deadline = time.monotonic() + 90
        while not marker.exists():
            assert first.poll() is None, first.stderr.read()[-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        second, _ = start(out)
        assert second.wait(60) != 0
        err = second.stderr.read()
        assert "FolderLockedError" in err and f"pid {first.pid}" in err, err[-2000:]
    finally:
        first.kill()
        first.wait()
    names = os.listdir(out)
    assert LOCK in names and any(n.endswith(f".{first.pid}.tmp") for n in names)  # the first's files untouched
    with pytest.warns(RuntimeWarning, match="taking over the stale lock"):
        worker.run(out)
    assert_same_bytes(out, clean)


def test_two_writers_racing_end_in_one_clean_folder(tmp_path, clean):
    out = tmp_path / "out"
    procs = [start(out)[0] for _ in range(2)]
    codes = [p.wait(180) for p in procs]
    errors = [p.stderr.read() for p in procs]
    assert 0 in codes, errors
    for code, err in zip(codes, errors):
        assert code == 0 or "FolderLockedError" in err, err[-2000:]  # never FileNotFoundError on a rename
        assert "FileNotFoundError" not in err
    worker.run(out)  # whatever the interleaving, the folder is whole and complete
    assert_same_bytes(out, clean)


def test_format_versions(copy):
    info = json.loads((copy / "index.json").read_text())
    info["format"] = "torchlime.dataset/5"
    (copy / "index.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="written by a newer torchlime: upgrade torchlime"):
        load_results(copy)
    old = {k: v for k, v in info.items() if k != "sha256"}
    old["format"] = "torchlime.dataset/1"
    (copy / "index.json").write_text(json.dumps(old))
    for name in SHARDS:  # shards as the first format wrote them: no digest
        with safe_open(str(copy / name), framework="pt") as f:
            tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())
        meta.pop("sha256")
        meta.pop("input_shape")
        tensors.pop("features")
        save_file(tensors, str(copy / name), metadata={**meta, "format": "torchlime.dataset.shard/1"})
    with pytest.warns(RuntimeWarning, match="format 'torchlime.dataset/1', which has no checksums"):
        res = load_results(copy)
    assert res.complete and len(res) == 20
    with pytest.raises(ValueError, match="without checksums, by an earlier torchlime: read it with load_results"):
        worker.run(copy)


def test_writer_tag_names_host_and_pid():
    assert writer_tag() == f"{host()}.{os.getpid()}" and "." not in host()
