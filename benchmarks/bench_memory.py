"""Peak resident memory of one explanation as the number of samples grows (CPU).

A linear model over 64 features (so the model itself costs nothing), N samples, one
explanation per child process; the growth of the process's peak resident set size
(``ru_maxrss``) during the call and the process's whole peak (torch included) are reported
with the seconds the call took. With
``--previous-tree DIR`` an earlier torchlime (a source tree) runs the same calls for the
sizes it can hold, for comparison.

    python benchmarks/bench_memory.py                                  # N = 1e5, 1e6, 1e7
    python benchmarks/bench_memory.py --previous-tree /tmp/old --previous-commit 68ecdbf
    python benchmarks/bench_memory.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.common import common_args, header, write

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1]) if sys.argv[1] else None
import torch
from torchlime import explain
n, f, batch = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.manual_seed(0)
model, x = torch.nn.Linear(f, 2), torch.rand(1, f)
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
exp = explain(model, x, torch.arange(f).view(1, f), n_samples=n, batch_size=batch)
seconds = time.perf_counter() - t0
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(peak_growth_mib=grew / 1024, peak_rss_mib=peak / 1024, seconds=seconds,
                      min_r2=float(exp.score.min()))))
"""


def measure(tree: str, n: int, f: int, batch: int) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, tree, str(n), str(f), str(batch)],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=Path(__file__).resolve().parent,
    )
    if proc.returncode != 0:
        return dict(error=proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--previous-tree", type=Path)
    ap.add_argument("--previous-commit")
    ap.add_argument("--previous-max", type=float, default=2e6, help="largest N run with the previous tree")
    args = ap.parse_args()
    sizes = [1e4, 5e4] if args.quick else args.sizes
    out = dict(
        header(torch.device("cpu")),
        benchmark="bench_memory",
        features=args.features,
        batch_size=args.batch_size,
        previous_commit=args.previous_commit if args.previous_tree else None,
        results=[],
    )
    for n in map(int, sizes):
        row = dict(n_samples=n, torchlime=measure("", n, args.features, args.batch_size))
        if args.previous_tree and n <= args.previous_max:
            row["previous"] = measure(str(args.previous_tree), n, args.features, args.batch_size)
        out["results"].append(row)
        print(json.dumps(row), flush=True)
    print(f"wrote {write('memory_cpu.json', out, args.out)}")


if __name__ == "__main__":
    main()
