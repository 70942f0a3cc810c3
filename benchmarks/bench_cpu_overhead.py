"""torchlime's own work on the CPU beside lime's, with a model that costs almost nothing.

One 96x96 RGB image, a 12x12 grid of 8x8 cells (144 features), N = 1000 samples, target 0, zero fill,
and a model that reads one pixel per cell (its cost is measured and taken out). Interleaved
repetitions of:

* ``lime``: ``LimeImageExplainer.explain_instance`` with the same grid as ``segmentation_fn``,
  ``hide_color=0``, ``num_samples=1000``, ``batch_size=1000`` (its fewest model calls);
* ``torchlime``: ``torchlime.explain`` with the same feature map and fill, default settings;
* ``torchlime_compat_lime``: ``torchlime.compat.lime.LimeImageExplainer``, lime's call unchanged (numpy
  HWC batches of ``batch_size=1000``), to show what the drop-in costs;
* ``write_floor``: no explanation at all, only the N perturbed images written once from precomputed pixel
  weights (``torch.lerp`` into chunks of 128 rows, the faster of the two exact writes here): the memory
  traffic any blend must pay, which bounds the ratio an implementation that hands the model float32
  images can reach on this machine.

Each system's *own* time is its wall time minus the time spent inside the model (timed inside the
model function; lime's conversion from its NumPy batch to a tensor counts as lime's work). The
ratio lime-own / torchlime-own is the figure the goal names (>= 50). torchlime's own time is split
by its profiler ranges (``torchlime::masks``, ``::blend``, ``::rows``, ``::fit``; the rest is planning
and checks) from one profiled call.

Beside a baseline commit (``--baseline``, default d781044): the same torchlime call at N = 250, 1000
and 4000 (``--sizes``) is timed in two child processes, one importing this tree's torchlime and one
the baseline's (a ``git worktree`` of it, made once), with the same torch threads, interleaved call by
call (the order of the two trees alternating from repetition to repetition), so that both see the
same machine. Their own times (wall minus model) and the ratio baseline / current per N are recorded
under ``against_baseline``: the fixed cost of a call shows at small N, the per-sample work at large N.

    python benchmarks/bench_cpu_overhead.py                      # results/cpu_overhead_cpu.json
    python benchmarks/bench_cpu_overhead.py --quick --out /tmp/q  # smoke run: 3 repetitions
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
if "--worker" in _sys.argv:  # a child timing some tree's torchlime: that tree first on the path
    _sys.path.insert(0, str(_Path(_sys.argv[_sys.argv.index("--worker") + 1]).resolve()))

import argparse
import json
import statistics
import subprocess
import time
from typing import Any, Callable

import numpy as np
import torch

SIZE, CELL, N = 96, 8, 1000
SIZES = (250, 1000, 4000)
RANGES = ("torchlime::masks", "torchlime::blend", "torchlime::model", "torchlime::rows", "torchlime::fit")


class Cheap:
    """A model that reads one pixel per grid cell: (c, 3, 96, 96) -> (c, 2); records its own time."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.w = torch.randn(SIZE // CELL * SIZE // CELL, 2, generator=g)
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        out = x[:, 0, CELL // 2 :: CELL, CELL // 2 :: CELL].reshape(x.shape[0], -1) @ self.w
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def grid() -> torch.Tensor:
    """(96, 96) long ids of the 12x12 cells."""
    cells = torch.arange(SIZE) // CELL
    return cells.view(-1, 1) * (SIZE // CELL) + cells.view(1, -1)


def run_torchlime(image: torch.Tensor, n: int = N) -> tuple[float, float, int]:
    """One explanation of ``n`` samples: (wall seconds, model seconds, model calls)."""
    import torchlime

    model = Cheap()
    t0 = time.perf_counter()
    torchlime.explain(model, image, grid().view(1, 1, SIZE, SIZE), target=0, n_samples=n, baseline=0.0, generator=0)
    return time.perf_counter() - t0, model.seconds, model.calls


def the_image() -> torch.Tensor:
    """(1, 3, 96, 96) the explained image."""
    return torch.rand(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))


def worker(tree: str, threads: int) -> None:
    """A child's loop: one torchlime call of N samples per line ``N`` read, one JSON line written back."""
    import torchlime

    torch.set_num_threads(threads)
    image = the_image()
    print(json.dumps(dict(torchlime=torchlime.__file__)), flush=True)
    for line in _sys.stdin:
        wall, model, calls = run_torchlime(image, int(line))
        print(json.dumps(dict(wall=wall, model=model, calls=calls)), flush=True)


class Child:
    """A worker process timing ``tree``'s torchlime."""

    def __init__(self, tree: _Path, threads: int) -> None:
        from benchmarks.baseline_tree import python_env

        command = [_sys.executable, str(_Path(__file__).resolve()), "--worker", str(tree), "--threads", str(threads)]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=python_env(tree)
        )
        self.imported = json.loads(self._line())["torchlime"]
        if not _Path(self.imported).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"the child for {tree} imported {self.imported}")

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a worker exited with {self.proc.wait()}")
        return line

    def run(self, n: int) -> dict[str, float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        out: dict[str, float] = json.loads(self._line())
        return out

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def against_baseline(commit: str, tree: _Path | None, sizes: tuple[int, ...], reps: int) -> dict[str, Any]:
    """This tree's torchlime and ``commit``'s, each in a child, interleaved call by call at every N."""
    from benchmarks.baseline_tree import ROOT, commit_of, worktree
    from benchmarks.common import summary

    trees = {"current": ROOT, "baseline": worktree(commit, tree)}
    threads = torch.get_num_threads()
    children = {name: Child(path, threads) for name, path in trees.items()}
    runs: dict[str, dict[int, dict[str, list[float]]]] = {
        name: {n: {"wall": [], "model": [], "own": []} for n in sizes} for name in trees
    }
    calls: dict[str, dict[int, int]] = {name: {} for name in trees}
    try:
        for name in trees:  # warm-up: imports, first allocations, every size once
            for n in sizes:
                children[name].run(n)
        for rep in range(reps):
            order = list(trees) if rep % 2 == 0 else list(trees)[::-1]
            for n in sizes:
                for name in order:
                    r = children[name].run(n)
                    runs[name][n]["wall"].append(r["wall"])
                    runs[name][n]["model"].append(r["model"])
                    runs[name][n]["own"].append(r["wall"] - r["model"])
                    calls[name][n] = int(r["calls"])
            print(
                f"rep {rep}: "
                + ", ".join(
                    f"N={n} own {runs['current'][n]['own'][-1] * 1e3:.1f} ms (baseline "
                    f"{runs['baseline'][n]['own'][-1] * 1e3:.1f})"
                    for n in sizes
                ),
                flush=True,
            )
    finally:
        for child in children.values():
            child.close()
    per_n = {}
    for n in sizes:
        own = {name: statistics.median(runs[name][n]["own"]) for name in trees}
        per_n[str(n)] = dict(
            {
                name: dict(
                    wall=summary(runs[name][n]["wall"]),
                    model=summary(runs[name][n]["model"]),
                    own=summary(runs[name][n]["own"]),
                    model_calls=calls[name][n],
                )
                for name in trees
            },
            baseline_own_over_current_own=own["baseline"] / own["current"],
            current_minus_baseline_own_ms=(own["current"] - own["baseline"]) * 1e3,
        )
        print(
            f"N={n}: own work current {own['current'] * 1e3:.2f} ms, baseline {own['baseline'] * 1e3:.2f} ms "
            f"(baseline / current {own['baseline'] / own['current']:.3f})"
        )
    return dict(
        baseline=commit,
        commits={name: commit_of(path) for name, path in trees.items()},
        trees={name: "this checkout" if name == "current" else f"a worktree of {commit}" for name in trees},
        threads=threads,
        sizes=list(sizes),
        reps=reps,
        per_n=per_n,
    )


def run_write_floor(image: torch.Tensor) -> tuple[float, float, int]:
    """The N perturbed images written once from precomputed masks: (wall seconds, 0, 0)."""
    g = torch.Generator().manual_seed(0)
    keep = torch.rand(N, (SIZE // CELL) ** 2, generator=g) < 0.5
    pixels = keep[:, grid().view(-1)].view(N, 1, SIZE, SIZE).float()  # (N, 1, H, W), outside the timing
    fill = torch.zeros_like(image)
    t0 = time.perf_counter()
    for lo in range(0, N, 128):
        torch.lerp(fill, image, pixels[lo : lo + 128])  # exact at 0 and 1, faster than torch.where here
    return time.perf_counter() - t0, 0.0, 0


def run_lime(image: torch.Tensor, explainer_class: Any = None) -> tuple[float, float, int]:
    """One lime explanation: (wall seconds, model seconds, model calls)."""
    from lime.lime_image import LimeImageExplainer

    explainer_class = explainer_class or LimeImageExplainer
    model = Cheap()
    hwc = image[0].permute(1, 2, 0).double().numpy()
    segments = grid().numpy()

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(np.ascontiguousarray(batch.transpose(0, 3, 1, 2))).float()
        return model(x).numpy()

    explainer = explainer_class(random_state=0)
    t0 = time.perf_counter()
    explainer.explain_instance(
        hwc,
        classifier_fn,
        labels=(0,),
        top_labels=None,
        hide_color=0,
        num_samples=N,
        batch_size=N,
        segmentation_fn=lambda img: segments,
        random_seed=0,
        **({"progress_bar": False} if explainer_class is not LimeImageExplainer else {}),
    )
    return time.perf_counter() - t0, model.seconds, model.calls


def run_compat_lime(image: torch.Tensor) -> tuple[float, float, int]:
    """lime's call on ``torchlime.compat.lime.LimeImageExplainer``: (wall seconds, model seconds, model calls)."""
    from torchlime.compat.lime import LimeImageExplainer

    return run_lime(image, LimeImageExplainer)


def split(image: torch.Tensor, calls: int = 5) -> dict[str, float]:
    """Seconds per profiler range of a torchlime call (CPU totals), and its wall time, under the profiler.

    The mean over ``calls`` profiled calls, after one profiled call that is thrown away (the
    profiler's own start-up).
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        run_torchlime(image)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            run_torchlime(image)
        wall = (time.perf_counter() - t0) / calls
    totals = {e.key: e.cpu_time_total / 1e6 / calls for e in prof.key_averages() if e.key in RANGES}
    out = {name.split("::")[1]: totals.get(name, 0.0) for name in RANGES}
    out["other"] = wall - sum(out.values())
    out["wall_profiled"] = wall
    return out


def main() -> None:
    from benchmarks.baseline_tree import BASELINE
    from benchmarks.common import common_args, header, load_average, summary, write

    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 25, quick 3)")
    parser.add_argument("--baseline", default=BASELINE, help="the commit timed beside (default %(default)s)")
    parser.add_argument("--baseline-tree", type=_Path, default=None, help="where its worktree is (or goes)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="N beside the baseline")
    parser.add_argument("--no-baseline", action="store_true", help="leave the baseline comparison out")
    args = parser.parse_args()
    reps = args.reps or (3 if args.quick else 25)
    image = the_image()
    systems: dict[str, Callable[[torch.Tensor], tuple[float, float, int]]] = {
        "torchlime": run_torchlime,
        "lime": run_lime,
        "torchlime_compat_lime": run_compat_lime,
        "write_floor": run_write_floor,
    }
    for fn in systems.values():  # warm-up: imports, first allocations
        fn(image)
    runs: dict[str, dict[str, list[float]]] = {k: {"wall": [], "model": [], "own": []} for k in systems}
    calls: dict[str, int] = {}
    for rep in range(reps):
        for name, fn in systems.items():
            wall, model, n_calls = fn(image)
            runs[name]["wall"].append(wall)
            runs[name]["model"].append(model)
            runs[name]["own"].append(wall - model)
            calls[name] = n_calls
        print(f"rep {rep}: " + ", ".join(f"{k} own {v['own'][-1] * 1000:.1f} ms" for k, v in runs.items()))
    own = {k: statistics.median(v["own"]) for k, v in runs.items()}
    ratio = own["lime"] / own["torchlime"]
    ceiling = own["lime"] / own["write_floor"]
    result = dict(
        header(torch.device("cpu")),
        threads=torch.get_num_threads(),
        load_average=load_average(),
        quick=args.quick,
        setup=dict(size=SIZE, cells=(SIZE // CELL) ** 2, n_samples=N, fill=0.0, target=0, reps=reps),
        systems={
            k: dict(
                wall=summary(v["wall"]),
                model=summary(v["model"]),
                own=summary(v["own"]),
                model_calls=calls[k],
            )
            for k, v in runs.items()
        },
        torchlime_split_seconds=split(image),
        lime_own_over_torchlime_own=ratio,
        # the fastest repetition of each: on a shared machine the memory-bound blend swings with the
        # neighbours' traffic more than lime's Python-bound work does; the goal stays on the medians
        lime_own_over_torchlime_own_best=min(runs["lime"]["own"]) / min(runs["torchlime"]["own"]),
        lime_own_over_compat_lime_own=own["lime"] / own["torchlime_compat_lime"],
        lime_own_over_write_floor=ceiling,
        goal=dict(description="lime's own work / torchlime's own work >= 50", value=ratio, met=ratio >= 50),
    )
    if not args.no_baseline:
        result["against_baseline"] = against_baseline(args.baseline, args.baseline_tree, tuple(args.sizes), reps)
    print(f"own work: lime {own['lime'] * 1000:.1f} ms, torchlime {own['torchlime'] * 1000:.1f} ms, ratio {ratio:.1f}")
    print(f"best repetitions: ratio {result['lime_own_over_torchlime_own_best']:.1f}")
    print(f"writing the perturbed images alone: {own['write_floor'] * 1000:.1f} ms (ratio ceiling {ceiling:.1f})")
    print("torchlime split (s):", {k: round(v, 4) for k, v in result["torchlime_split_seconds"].items()})
    print(write("cpu_overhead_cpu.json", result, args.out))


if __name__ == "__main__":
    if "--worker" in _sys.argv:
        worker_args = argparse.ArgumentParser()
        worker_args.add_argument("--worker")
        worker_args.add_argument("--threads", type=int)
        parsed = worker_args.parse_args()
        worker(parsed.worker, parsed.threads)
    else:
        main()
