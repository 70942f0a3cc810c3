"""Overhead of ``ProbeExplainer`` in a training loop: a training step with and without a probe call.

A small CIFAR-sized CNN (conv-BN-ReLU x2, pooling, linear; 32x32 RGB, batch 64) is
trained with SGD. Each repetition times, back to back (interleaved):

* ``plain``: one training step (forward, loss, backward, optimizer step);
* ``with_probe``: one training step whose step number triggers ``maybe_explain``
  (the probe: P fixed images, 4x4 grid features, N samples, target "top1");
* ``probe_only``: the ``maybe_explain`` call alone;
* ``with_probe_graphs`` / ``probe_graphs_only``: the same with a second probe whose explainer
  has ``accelerate="cuda_graphs"`` (the stages after the plan replayed as one CUDA graph; on the
  CPU it runs eagerly and its record says why: ``graph_mode``);
* ``forward_floor``: the bare forward of the probe's P x N rows through the model in eval mode
  under ``torch.inference_mode()``, at the fastest of a few chunk sizes: no probe can be faster.

Reported: medians, overhead per probe call (with_probe - plain), eager and graphed, the amortised
overhead per step for a probe every ``--every`` steps, and the goal of the GPU issue: a probe call
within max(1 training step, its forward floor + 0.5 ms). Timings are synchronised on CUDA.

Side result, reproducibility: the weights after ``--check-steps`` training steps (same
seed) are compared for two plain runs (plain vs plain: is training itself
reproducible here?) and for a plain run against a run with a probe every 3 steps
(plain vs probe), once with torch's default algorithms and once under
``torch.use_deterministic_algorithms(True)``. "Bit-identical with and without the
probe" means something only where plain vs plain is bit-identical too (on a GPU,
non-deterministic kernels can make two plain runs differ).

    python benchmarks/bench_probe_overhead.py --threads 1       # CPU, writes results/probe_overhead_cpu.json
    python benchmarks/bench_probe_overhead.py --device cuda
    python benchmarks/bench_probe_overhead.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import os
import statistics
import time
import traceback
from typing import Any, Optional

import torch

from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer
from torchlime.integrations.probe import ProbeExplainer
from torchlime.stages.features import cell_ids
from torchlime.stages.forward.model import eval_mode

from benchmarks.common import (
    best_chunk,
    common_args,
    device_arg,
    forward_rows,
    goal,
    header,
    load_average,
    size_defaults,
    smoke_threads,
    summary,
    sync,
    write,
)


def make_model(device: torch.device) -> torch.nn.Module:
    """The CNN for 32x32 inputs. Its 16x16 map is pooled to 2x2 by ``AvgPool2d(8)``, the same values
    as ``AdaptiveAvgPool2d(2)``, whose CUDA backward has no deterministic implementation (the
    deterministic-algorithms half of the benchmark would raise on a GPU).
    """
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.BatchNorm2d(16),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1),
        torch.nn.BatchNorm2d(32),
        torch.nn.ReLU(),
        torch.nn.AvgPool2d(8),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 10),
    ).to(device)


def grid_features(size: int, cells: int, device: torch.device) -> torch.Tensor:
    """(1, 1, size, size) long map of cells x cells squares."""
    return cell_ids((size, size), (cells, cells), device=device).view(1, 1, size, size)


class Trainer:
    """Model, optimizer, data stream (global RNG) and an optional probe."""

    def __init__(self, device: torch.device, batch: int, probe_args: Optional[dict]) -> None:
        self.device = device
        self.batch = batch
        self.model = make_model(device).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.probe = self.probe_graphs = None
        if probe_args is not None:
            g = torch.Generator().manual_seed(1)
            images = torch.rand(probe_args["images"], 3, 32, 32, generator=g).to(device)
            self.probe = ProbeExplainer(
                self.model,
                images,
                grid_features(32, 4, device),
                every=probe_args["every"],
                call=Call(n_samples=probe_args["n"]),
            )
            self.probe_graphs = ProbeExplainer(  # the same probe, its stages replayed as one CUDA graph
                self.model,
                images,
                grid_features(32, 4, device),
                explainer=Explainer(accelerate="cuda_graphs"),
                every=probe_args["every"],
                call=Call(n_samples=probe_args["n"]),
            )

    def step(self) -> None:
        x = torch.randn(self.batch, 3, 32, 32, device=self.device)
        y = torch.randint(0, 10, (self.batch,), device=self.device)
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def timed(fn, device: torch.device) -> float:
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def final_weights(device: torch.device, batch: int, probe_args: Optional[dict], steps: int) -> list[torch.Tensor]:
    """Every weight and buffer after ``steps`` training steps from seed 123 (with a probe if ``probe_args``)."""
    torch.manual_seed(123)
    tr = Trainer(device, batch, probe_args)
    torch.manual_seed(123)
    for s in range(steps):
        tr.step()
        if tr.probe is not None:
            tr.probe.maybe_explain(s)
    return [t.detach().clone() for t in tr.model.state_dict().values()]


def compare(a: list[torch.Tensor], b: list[torch.Tensor]) -> dict[str, Any]:
    """Bit identity of two weight lists, and the largest absolute difference."""
    diff = max(float((x.double() - y.double()).abs().max()) if x.numel() else 0.0 for x, y in zip(a, b))
    return dict(bit_identical=all(torch.equal(x, y) for x, y in zip(a, b)), max_abs_difference=diff)


def reproducibility(device: torch.device, batch: int, probe_args: dict, steps: int) -> dict[str, Any]:
    """Plain vs plain and plain vs probe, with torch's default algorithms and with deterministic ones."""
    out: dict[str, Any] = {}
    before = torch.are_deterministic_algorithms_enabled()
    for deterministic in (False, True):
        key = "deterministic_algorithms" if deterministic else "default_algorithms"
        try:
            torch.use_deterministic_algorithms(deterministic)
            plain_a = final_weights(device, batch, None, steps)
            plain_b = final_weights(device, batch, None, steps)
            probed = final_weights(device, batch, probe_args, steps)
            out[key] = dict(plain_vs_plain=compare(plain_a, plain_b), plain_vs_probe=compare(plain_a, probed))
        except Exception as err:  # noqa: BLE001 - e.g. an op without a deterministic implementation
            traceback.print_exc()
            out[key] = dict(error=f"{type(err).__name__}: {err}")
        finally:
            torch.use_deterministic_algorithms(before)
    return out


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    ap.add_argument("--batch", type=int, default=64, help="training batch size")
    ap.add_argument("--probe-images", type=int, default=4)
    ap.add_argument("--n", type=int, default=None, help="LIME samples per probe image (default 1000; quick: 16)")
    ap.add_argument("--every", type=int, default=100, help="probe period used for the amortised figure")
    ap.add_argument("--reps", type=int, default=None, help="default 15; quick: 1")
    ap.add_argument(
        "--check-steps",
        type=int,
        default=None,
        help="training steps of the reproducibility check (default 7; quick: 4)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's; quick on CPU: 1); 1 is steadier on a loaded machine",
    )
    args = ap.parse_args()
    size_defaults(args, dict(n=(16, 1000), reps=(1, 15), check_steps=(4, 7)))
    if args.device.startswith("cuda"):  # cuBLAS reads it at its first use; deterministic algorithms need it
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    device = device_arg(args.device)
    smoke_threads(args, device)
    probe_args = dict(images=args.probe_images, n=args.n, every=1)  # every=1: each timed call explains

    torch.manual_seed(0)
    trainer = Trainer(device, args.batch, probe_args)
    step_no = 0

    def plain() -> None:
        trainer.step()

    def with_probe() -> None:
        nonlocal step_no
        trainer.step()
        trainer.probe.maybe_explain(step_no)
        step_no += 1

    def probe_only() -> None:
        nonlocal step_no
        trainer.probe.maybe_explain(step_no)
        step_no += 1

    def with_probe_graphs() -> None:
        nonlocal step_no
        trainer.step()
        trainer.probe_graphs.maybe_explain(step_no)
        step_no += 1

    def probe_graphs_only() -> None:
        nonlocal step_no
        trainer.probe_graphs.maybe_explain(step_no)
        step_no += 1

    rows = torch.rand(args.probe_images * args.n, 3, 32, 32, device=device)  # the rows a probe call forwards
    with eval_mode(trainer.model):
        floor_chunk, floor_candidates = best_chunk(
            lambda b: forward_rows(trainer.model, rows, b), sorted({16, 256, rows.shape[0]}), device
        )
    floor = forward_rows(trainer.model, rows, floor_chunk)

    def forward_floor() -> None:
        with eval_mode(trainer.model):
            floor()

    systems = dict(
        plain=plain,
        with_probe=with_probe,
        probe_only=probe_only,
        with_probe_graphs=with_probe_graphs,
        probe_graphs_only=probe_graphs_only,
        forward_floor=forward_floor,
    )
    for fn in systems.values():  # warm-up
        fn()
        fn()
    times = {k: [] for k in systems}
    for rep in range(args.reps):
        for key, fn in systems.items():
            times[key].append(timed(fn, device))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms" for k, v in times.items()), flush=True)
    graph_mode = trainer.probe_graphs.history[-1][1].run.cuda_graph  # how the last graphed call ran
    trainer.probe.history.clear()
    trainer.probe_graphs.history.clear()

    res = {k: summary(v) for k, v in times.items()}
    step = res["plain"]["median"]
    per_call = res["with_probe"]["median"] - step
    per_call_graphs = res["with_probe_graphs"]["median"] - step
    paired = [w - p for w, p in zip(times["with_probe"], times["plain"])]
    floor_s = res["forward_floor"]["median"]
    limit = max(step, floor_s + 0.0005)
    repro = reproducibility(device, args.batch, dict(probe_args, every=3), args.check_steps)
    default = repro["default_algorithms"]
    out = header(device)
    out.update(
        benchmark="probe_overhead",
        quick=args.quick,
        torch_threads=torch.get_num_threads(),
        load_average_1_5_15=load_average(),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG") if device.type == "cuda" else None,
        setup=dict(
            model="small CNN (2 conv-BN-ReLU, 10 classes)",
            train_batch=args.batch,
            image="3x32x32",
            probe_images=args.probe_images,
            n_samples=args.n,
            features="4x4 grid (16)",
            target="top1",
            repetitions=args.reps,
        ),
        seconds=res,
        overhead_per_probe_call_seconds=per_call,
        overhead_per_probe_call_seconds_paired_median=statistics.median(paired),
        overhead_per_probe_call_in_training_steps=per_call / step,
        amortised_overhead_fraction=dict(every=args.every, fraction=per_call / (args.every * step)),
        graphs=dict(
            graph_mode=graph_mode,
            overhead_per_probe_call_seconds=per_call_graphs,
            overhead_per_probe_call_in_training_steps=per_call_graphs / step,
            amortised_overhead_fraction=dict(every=args.every, fraction=per_call_graphs / (args.every * step)),
        ),
        forward_floor=dict(seconds=floor_s, chunk=floor_chunk, candidates_seconds=floor_candidates),
        goals=dict(
            eager=goal(
                "a probe call within max(1 training step, its forward floor + 0.5 ms)",
                per_call,
                limit,
                quick=args.quick,
            ),
            graphs=goal(
                'accelerate="cuda_graphs": a probe call within max(1 training step, its forward floor + 0.5 ms)',
                per_call_graphs,
                limit,
                quick=args.quick,
            ),
        ),
        reproducibility=dict(steps=args.check_steps, probe_every=3, seed=123, **repro),
        # with torch's default algorithms, as before; meaningful only where plain vs plain is identical too
        bit_identical_weights_after_training=default.get("plain_vs_probe", {}).get("bit_identical"),
        plain_runs_bit_identical=default.get("plain_vs_plain", {}).get("bit_identical"),
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    name = f"probe_overhead_{device.type}{'_quick' if args.quick else ''}.json"
    path = write(name, out, args.out)
    print(f"wrote {path}")
    print(
        f"training step {step * 1e3:.1f} ms; probe call overhead {per_call * 1e3:.1f} ms "
        f"({per_call / step:.1f} steps); every {args.every} steps: "
        f"{100 * per_call / (args.every * step):.2f}% of training time"
    )
    print(
        f'accelerate="cuda_graphs" ({graph_mode}): probe call overhead {per_call_graphs * 1e3:.1f} ms '
        f"({per_call_graphs / step:.1f} steps); forward floor {floor_s * 1e3:.2f} ms (chunk {floor_chunk}); "
        f"goal: within {limit * 1e3:.2f} ms"
    )
    for key, r in repro.items():
        if "error" in r:
            print(f"{key}: FAILED {r['error']}")
        else:
            print(
                f"{key}: plain vs plain bit-identical {r['plain_vs_plain']['bit_identical']} "
                f"(max diff {r['plain_vs_plain']['max_abs_difference']:.3g}); plain vs probe bit-identical "
                f"{r['plain_vs_probe']['bit_identical']} (max diff {r['plain_vs_probe']['max_abs_difference']:.3g})"
            )


if __name__ == "__main__":
    main()
