"""What verifying a result folder costs: ``load_results(out, verify=True)`` against ``verify=False``.

Writes a folder of shards as ``explain_dataset`` writes them (checksummed safetensors files of random
coefficients), then opens it with and without verification, interleaved, on a warm page cache (the files
were just written and read once), and reports seconds per GB.

    python benchmarks/bench_verify.py                       # results/verify_cpu.json (about 1 GB on disk)
    python benchmarks/bench_verify.py --quick --out /tmp/q  # smoke run: a few MB
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import os
import shutil
import statistics
import tempfile
import time

import torch

from torchlime.dataset import load_results
from torchlime.dataset._store import Store, environment

from benchmarks.common import common_args, header, summary, write


def make_folder(out: _Path, n_shards: int, shard_size: int, n_targets: int, n_features: int) -> int:
    """A complete result folder of random rows; returns its size in bytes."""
    g = torch.Generator().manual_seed(0)
    store = Store(out, {"bench": True}, "bench", shard_size, n_shards * shard_size, environment(torch.device("cpu"), 1))
    store.open()
    for k in range(n_shards):
        n = shard_size
        store.write_shard(
            k,
            {
                "index": torch.arange(k * n, (k + 1) * n),
                "coef": torch.randn(n, n_targets, n_features, generator=g),
                "intercept": torch.randn(n, n_targets, generator=g),
                "score": torch.rand(n, n_targets, generator=g),
                "local_pred": torch.randn(n, n_targets, generator=g),
                "target": torch.zeros(n, n_targets, dtype=torch.long),
                "n_features": torch.full((n,), n_features),
            },
        )
    store.complete = True
    store.write_index()
    return sum(p.stat().st_size for p in out.iterdir())


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5, quick 2)")
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 5)
    n_shards, shard_size, n_targets, n_features = (4, 64, 2, 100) if args.quick else (16, 4096, 4, 1000)
    root = _Path(tempfile.mkdtemp())
    try:
        out = root / "out"
        size = make_folder(out, n_shards, shard_size, n_targets, n_features)
        load_results(out, verify=True)  # warm: the page cache holds the files
        times: dict[str, list[float]] = {"verify": [], "headers_only": []}
        for _ in range(reps):
            for name, verify in (("verify", True), ("headers_only", False)):
                t0 = time.perf_counter()
                res = load_results(out, verify=verify)
                times[name].append(time.perf_counter() - t0)
                assert res.complete
        gb = size / 1e9
        verify_per_gb = statistics.median(times["verify"]) / gb
        result = dict(
            header(torch.device("cpu")),
            quick=args.quick,
            cpu_count=os.cpu_count(),
            setup=dict(
                n_shards=n_shards, shard_size=shard_size, n_targets=n_targets, n_features=n_features, bytes=size
            ),
            seconds={k: summary(v) for k, v in times.items()},
            verify_seconds_per_gb=verify_per_gb,
            headers_only_seconds_per_gb=statistics.median(times["headers_only"]) / gb,
        )
        headers = result["headers_only_seconds_per_gb"]
        print(f"{size / 1e6:.0f} MB: verify {verify_per_gb:.2f} s/GB, headers only {headers:.4f} s/GB")
        print(write("verify_cpu.json" if not args.quick else "verify_cpu_quick.json", result, args.out))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
