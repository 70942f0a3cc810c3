"""Several inputs in one call on the CPU: chunks that hold rows of several inputs, beside the previous version.

B = 8 RGB images of 96x96, a 12x12 grid of 8x8 cells (144 features) each, N = 250 samples per image,
target 0, zero fill, and a model that reads one pixel per cell (``bench_cpu_overhead.Cheap``: its cost
is measured and taken out). Interleaved repetitions of:

* ``torchlime``: ``torchlime.explain`` of the 8 images in one call, one chunk of all 2000 rows
  (``batch_size=2000``: every chunk holds rows of several inputs) and at the default chunk size;
* ``torchlime_previous`` (with ``--previous-tree DIR``): the same calls with another torchlime (a
  source tree, e.g. ``git worktree add DIR COMMIT``) in a worker process, timed inside the worker;
* ``captum``: ``captum.attr.Lime`` on the same images, feature mask, N and fill
  (``perturbations_per_eval=250``), target 0;
* ``write_floor``: the 2000 perturbed images written once from precomputed pixel weights (the memory
  traffic any blend pays).

Each system's own time is its wall time minus the time inside the model.

    python benchmarks/bench_many_inputs.py --previous-tree /tmp/base --previous-commit be87d6e
    python benchmarks/bench_many_inputs.py --quick --out /tmp/q     # smoke run: 2 repetitions
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

import torchlime

from benchmarks.bench_cpu_overhead import CELL, SIZE, Cheap, grid
from benchmarks.common import common_args, header, load_average, optional_module, summary, write

B, N = 8, 250
CHUNKS = {"one_chunk": B * N, "default_chunks": None}

#: another torchlime in a worker process: reads "run CHUNK" lines (0: default), answers "wall model"
WORKER = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import torchlime
from benchmarks.bench_cpu_overhead import Cheap, grid, SIZE
images = torch.load(sys.argv[3])
for line in sys.stdin:
    chunk = int(line.split()[1]) or None
    model = Cheap()
    t0 = time.perf_counter()
    torchlime.explain(model, images, grid().view(1, 1, SIZE, SIZE), target=0, n_samples=250, baseline=0.0,
                      generator=0, batch_size=chunk)
    print(time.perf_counter() - t0, model.seconds, flush=True)
"""


def run_torchlime(images: torch.Tensor, chunk: Optional[int]) -> tuple[float, float]:
    """One call: (wall seconds, model seconds)."""
    model = Cheap()
    t0 = time.perf_counter()
    torchlime.explain(
        model, images, grid().view(1, 1, SIZE, SIZE), target=0, n_samples=N, baseline=0.0, generator=0, batch_size=chunk
    )
    return time.perf_counter() - t0, model.seconds


class Previous:
    """The same calls with another torchlime source tree, in a worker process."""

    def __init__(self, tree: Path, images: torch.Tensor) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        script, data = Path(self.tmp.name) / "worker.py", Path(self.tmp.name) / "images.pt"
        script.write_text(WORKER)
        torch.save(images, data)
        root = str(Path(__file__).resolve().parents[1])
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(tree), root, str(data)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=""),
            cwd=self.tmp.name,
        )

    def run(self, chunk: Optional[int]) -> tuple[float, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"run {chunk or 0}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the previous-version worker stopped")
        wall, model = map(float, line.split())
        return wall, model

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.tmp.cleanup()


def run_captum(images: torch.Tensor) -> tuple[float, float]:
    """captum's Lime on the same images, mask, N and fill: (wall seconds, model seconds)."""
    from captum.attr import Lime

    model = Cheap()
    mask = grid().view(1, 1, SIZE, SIZE).expand(B, 3, SIZE, SIZE)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Lime(model).attribute(images, target=0, feature_mask=mask, n_samples=N, perturbations_per_eval=N)
    return time.perf_counter() - t0, model.seconds


def run_write_floor(images: torch.Tensor) -> tuple[float, float]:
    """The B x N perturbed images written once from precomputed pixel weights: (wall seconds, 0)."""
    g = torch.Generator().manual_seed(0)
    keep = torch.rand(N, (SIZE // CELL) ** 2, generator=g) < 0.5
    pixels = keep[:, grid().view(-1)].view(N, 1, SIZE, SIZE).float()
    fill = torch.zeros_like(images[:1])
    t0 = time.perf_counter()
    for b in range(B):
        for lo in range(0, N, 128):
            torch.lerp(fill, images[b : b + 1], pixels[lo : lo + 128])
    return time.perf_counter() - t0, 0.0


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 15, quick 2)")
    parser.add_argument("--previous-tree", type=Path, help="a source tree of an earlier torchlime to compare with")
    parser.add_argument("--previous-commit", default=None, help="the commit that tree comes from (recorded)")
    args = parser.parse_args()
    reps = args.reps or (2 if args.quick else 15)
    images = torch.rand(B, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    previous = Previous(args.previous_tree, images) if args.previous_tree else None
    systems: dict[str, Callable[[], tuple[float, float]]] = {}
    for name, chunk in CHUNKS.items():
        systems[f"torchlime_{name}"] = lambda c=chunk: run_torchlime(images, c)
        if previous is not None:
            systems[f"torchlime_previous_{name}"] = lambda c=chunk: previous.run(c)
    if optional_module("captum.attr")[0] is not None:
        systems["captum"] = lambda: run_captum(images)
    systems["write_floor"] = lambda: run_write_floor(images)
    for fn in systems.values():  # warm-up
        fn()
    own: dict[str, list[float]] = {k: [] for k in systems}
    model: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(reps):
        for name, fn in systems.items():
            wall, inside = fn()
            own[name].append(wall - inside)
            model[name].append(inside)
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms" for k, v in own.items()), flush=True)
    if previous is not None:
        previous.close()
    med = {k: statistics.median(v) for k, v in own.items()}
    ratios = {
        f"previous_over_this_{name}": med[f"torchlime_previous_{name}"] / med[f"torchlime_{name}"]
        for name in CHUNKS
        if f"torchlime_previous_{name}" in med
    }
    ratios.update({f"this_over_write_floor_{name}": med[f"torchlime_{name}"] / med["write_floor"] for name in CHUNKS})
    if "captum" in med:
        ratios.update({f"captum_over_this_{name}": med["captum"] / med[f"torchlime_{name}"] for name in CHUNKS})
    result = dict(
        header(torch.device("cpu")),
        benchmark="many_inputs",
        threads=torch.get_num_threads(),
        load_average=load_average(),
        quick=args.quick,
        previous_commit=args.previous_commit if previous is not None else None,
        setup=dict(inputs=B, size=SIZE, features=(SIZE // CELL) ** 2, n_samples=N, fill=0.0, target=0, reps=reps),
        own_seconds={k: summary(v) for k, v in own.items()},
        model_seconds={k: summary(v) for k, v in model.items()},
        ratios=ratios,
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    print({k: round(v, 2) for k, v in ratios.items()})
    print(write("many_inputs_cpu" + ("_quick" if args.quick else "") + ".json", result, args.out))


if __name__ == "__main__":
    main()
