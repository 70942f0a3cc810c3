"""A result folder is untrusted input: links, named pipes, devices, sparse files, crafted headers and indexes.

Every case ends at once in a warning naming the shard (left out, as a damaged one) or an error naming the
file (``DamagedIndexError``, ``ValueError``), never in a file read or written outside the folder, a hang,
a ``RecursionError`` or a ``MemoryError``; a folder that is itself a link still works. Test hooks are not
reachable through the environment.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from torchlime.dataset import load_results
from torchlime.dataset._integrity import index_digest, shard_bytes
from torchlime.dataset._lock import LOCK, writer_tag
from torchlime.dataset._scan import DamagedIndexError

worker = importlib.import_module("tests.helpers.dataset_worker")
SHARDS = ["shard-000000.safetensors", "shard-000001.safetensors", "shard-000002.safetensors"]


@contextlib.contextmanager
def deadline(seconds: float = 10.0):
    """Fail with TimeoutError instead of hanging (a blocking open or read is interrupted)."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def left_out(out: Path, shard: str, why: str, verify: bool = True):
    """load_results of ``out`` warns that ``shard`` is damaged (``why``) and holds the other two shards' 12 rows."""
    with deadline(), pytest.warns(RuntimeWarning, match=rf"{shard} is damaged \(.*{why}.*inputs 8..15 are left out"):
        res = load_results(out, verify=verify)
    assert len(res) == 12 and not res.complete
    return res


def resign_index(out: Path, **fields) -> None:
    """Rewrite index.json with ``fields`` changed and a valid checksum."""
    info = json.loads((out / "index.json").read_text())
    info.update(fields)
    info["sha256"] = index_digest(info)
    (out / "index.json").write_text(json.dumps(info))


def test_a_shard_linked_outside_the_folder_is_never_read(copy, tmp_path):
    outside = tmp_path / "elsewhere.safetensors"
    os.replace(copy / SHARDS[1], outside)  # a valid shard: read through the link, it would pass
    (copy / SHARDS[1]).symlink_to(outside)
    for verify in (True, False):
        left_out(copy, SHARDS[1], "symbolic link", verify)


def test_an_index_linked_outside_is_refused_and_a_resumed_run_replaces_the_link_not_its_target(copy, tmp_path):
    outside = tmp_path / "elsewhere.json"
    os.replace(copy / "index.json", outside)
    (copy / "index.json").symlink_to(outside)
    before = outside.read_bytes()
    with deadline(), pytest.raises(DamagedIndexError, match=r"index.json is damaged .*symbolic link"):
        load_results(copy)
    with pytest.warns(RuntimeWarning, match="rebuilding it"):
        worker.run(copy)  # every shard verifies: nothing computed
    assert outside.read_bytes() == before and not (copy / "index.json").is_symlink()
    assert load_results(copy).complete


def test_a_folder_that_is_itself_a_link_still_works(copy, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(copy, target_is_directory=True)
    res = load_results(link)
    assert res.complete and len(res) == 20 and res[8:10].coef.shape == (2, 2, 16)
    (copy / SHARDS[1]).unlink()
    worker.run(link)
    assert load_results(link).complete


def test_a_shard_linked_to_dev_zero_a_fifo_or_a_folder_is_left_out_at_once(copy):
    (copy / SHARDS[1]).unlink()
    (copy / SHARDS[1]).symlink_to("/dev/zero")
    left_out(copy, SHARDS[1], "symbolic link")
    (copy / SHARDS[1]).unlink()
    os.mkfifo(copy / SHARDS[1])  # no writer: a blocking open would wait for ever
    left_out(copy, SHARDS[1], "named pipe")
    left_out(copy, SHARDS[1], "named pipe", verify=False)
    (copy / SHARDS[1]).unlink()
    (copy / SHARDS[1]).mkdir()
    left_out(copy, SHARDS[1], "got a folder")


def test_an_index_that_is_a_fifo_is_refused_at_once(copy):
    (copy / "index.json").unlink()
    os.mkfifo(copy / "index.json")
    with deadline(), pytest.raises(DamagedIndexError, match=r"index.json is damaged .*named pipe"):
        load_results(copy)


def test_a_sparse_8_gb_shard_is_refused_from_its_size_without_reading_it(copy):
    shard = copy / SHARDS[1]
    os.truncate(shard, 8 << 30)  # the valid shard's bytes, then 8 GB of holes: no disk used
    t0 = time.perf_counter()
    left_out(copy, SHARDS[1], "tensor data of 8589")
    left_out(copy, SHARDS[1], "tensor data of 8589", verify=False)
    shard.unlink()
    shard.touch()
    os.truncate(shard, 8 << 30)  # all holes: a header length of 0
    left_out(copy, SHARDS[1], "unreadable")
    assert time.perf_counter() - t0 < 5


def crafted(clean: Path, k: int, **replace: torch.Tensor) -> bytes:
    """Shard ``k`` of ``clean`` with tensors replaced, as a whole file with a valid checksum."""
    with safe_open(str(clean / SHARDS[k]), framework="pt") as f:
        tensors, meta = {name: f.get_tensor(name) for name in f.keys()}, dict(f.metadata())
    meta.pop("sha256")
    return shard_bytes({**tensors, **replace}, meta)[0]


def test_a_checksummed_header_declaring_2_40_features_pads_nothing(copy, clean):
    (copy / SHARDS[1]).write_bytes(crafted(clean, 1, coef=torch.zeros(0, 1, 2**40)))
    res = left_out(copy, SHARDS[1], r"a size of tensor 'coef' .* must be an int in \[0, 2\*\*31\), got 1099511627776")
    assert res.n_features_max == 16 and res.coef.shape == (12, 2, 16)
    (copy / SHARDS[1]).write_bytes(crafted(clean, 1, coef=torch.zeros(0, 1, 2**30)))  # sizes in range, no rows
    left_out(copy, SHARDS[1], r"'coef' must hold 8 rows \(stop - start\), got shape \[0, 1, 1073741824\]")
    info = json.loads((copy / "index.json").read_text())
    (copy / SHARDS[1]).write_bytes(crafted(clean, 1, coef=torch.zeros(8, 2, 3)))  # whole, but not the index's F
    left_out(copy, SHARDS[1], "n_features_max 3 differs from index.json's 16")
    assert info["shards"][1]["n_features_max"] == 16


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"shard_size": "x"}, r"`shard_size` must be an int in \[1, 2\*\*31\), got 'x'"),
        ({"shard_size": True}, r"`shard_size` must be an int in \[1, 2\*\*31\), got True"),
        ({"n_inputs": 2**40}, r"`n_inputs` must be an int in \[0, 2\*\*31\)"),
        ({"n_shards": 4}, r"`n_shards` must be 3 \(20 inputs in shards of 8\), got 4"),
        (
            {"shards": [{"shard": 0, "file": "../x", "start": 0, "stop": 8, "n_features_max": 16, "n_targets": 2}]},
            r"`shards\[0\]` must be shard 0's entry .*got file '\.\./x'",
        ),
        (
            {"shards": [{"shard": 0, "file": "../x", "start": 0, "stop": 8, "n_features_max": 2**40}]},
            r"`shards\[0\].n_features_max` must be an int in \[0, 2\*\*31\)",
        ),
    ],
)
def test_checksummed_index_fields_out_of_range_are_a_damaged_index(copy, fields, message):
    resign_index(copy, **fields)
    with deadline(), pytest.raises(DamagedIndexError, match=rf"index.json is damaged \({message}"):
        load_results(copy)


def test_an_index_nested_100000_deep_is_a_damaged_index_not_a_recursion_error(copy):
    (copy / "index.json").write_text("[" * 100_000 + "]" * 100_000)
    with deadline(), pytest.raises(DamagedIndexError, match="nested at most 32 levels"):
        load_results(copy)
    (copy / "index.json").write_text('{"format": "torchlime.dataset/3", "x": ' + "[" * 33 + "]" * 33 + "}")
    with pytest.raises(DamagedIndexError, match="nested at most 32 levels"):
        load_results(copy)


def test_a_lock_linked_to_dev_zero_is_refused_not_read(copy):
    (copy / LOCK).symlink_to("/dev/zero")
    with deadline(), pytest.raises(ValueError, match=r"\.lock must be a regular file, got a symbolic link.*delete"):
        worker.run(copy)
    assert (copy / LOCK).is_symlink()


@pytest.mark.parametrize("name", [SHARDS[1], "index.json"])
def test_a_planted_temporary_link_is_replaced_never_written_through(copy, clean, tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (copy / SHARDS[1]).unlink()  # shard 1 and the index are written again, through their temporary names
    (copy / f".{name}.{writer_tag()}.tmp").symlink_to(victim)
    worker.run(copy)
    assert victim.read_text() == "precious"
    assert sorted(os.listdir(copy)) == sorted(os.listdir(clean))
    for entry in os.listdir(clean):
        assert not (copy / entry).is_symlink() and (copy / entry).read_bytes() == (clean / entry).read_bytes()


def test_the_environment_reaches_no_test_hook(copy, tmp_path, monkeypatch):
    marker = tmp_path / "reached"
    monkeypatch.setenv("TORCHLIME_DATASET_HOOK", "before_rename:1")
    monkeypatch.setenv("TORCHLIME_DATASET_HOOK_FILE", str(marker))
    (copy / SHARDS[1]).unlink()
    with deadline(60):
        worker.run(copy)
    assert not marker.exists() and load_results(copy).complete
