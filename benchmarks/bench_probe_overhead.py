"""Overhead of ``ProbeExplainer`` in a training loop: a training step with and without a probe call.

A small CIFAR-sized CNN (conv-BN-ReLU x2, pooling, linear; 32x32 RGB, batch 64) is
trained with SGD. Each repetition times, back to back (interleaved):

* ``plain``: one training step (forward, loss, backward, optimizer step);
* ``with_probe``: one training step whose step number triggers ``maybe_explain``
  (the probe: P fixed images, 4x4 grid features, N samples, target "top1");
* ``probe_only``: the ``maybe_explain`` call alone.

Reported: medians, overhead per probe call (with_probe - plain) and the amortised
overhead per step for a probe every ``--every`` steps. Timings are synchronised
on CUDA. The weights after training with and without the probe are checked
bit-identical (same seed) as a side result.

    python benchmarks/bench_probe_overhead.py --threads 1       # CPU, writes results/probe_overhead_cpu.json
    python benchmarks/bench_probe_overhead.py --device cuda
    python benchmarks/bench_probe_overhead.py --quick --out /tmp/quick
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Optional

import torch
from common import RESULTS, header, summary, sync, write

from torchlime.training import ProbeExplainer


def make_model(device: torch.device) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(128, 10)).to(device)


def grid_features(size: int, cells: int, device: torch.device) -> torch.Tensor:
    """(1, 1, size, size) long map of cells x cells squares."""
    idx = torch.arange(size, device=device) * cells // size
    return (idx.view(-1, 1) * cells + idx.view(1, -1)).view(1, 1, size, size)


class Trainer:
    """Model, optimizer, data stream (global RNG) and an optional probe."""

    def __init__(self, device: torch.device, batch: int, probe_args: Optional[dict]) -> None:
        self.device = device
        self.batch = batch
        self.model = make_model(device).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.probe = None
        if probe_args is not None:
            g = torch.Generator().manual_seed(1)
            images = torch.rand(probe_args["images"], 3, 32, 32, generator=g).to(device)
            self.probe = ProbeExplainer(self.model, images, grid_features(32, 4, device),
                                        every=probe_args["every"], n_samples=probe_args["n"])

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


def bit_identical(device: torch.device, batch: int, probe_args: dict, steps: int) -> bool:
    """Train ``steps`` steps with and without the probe (same seed); compare every weight and buffer."""
    states = []
    for with_probe in (False, True):
        torch.manual_seed(123)
        tr = Trainer(device, batch, probe_args if with_probe else None)
        torch.manual_seed(123)
        for s in range(steps):
            tr.step()
            if tr.probe is not None:
                tr.probe.maybe_explain(s)
        states.append([t.detach().clone() for t in tr.model.state_dict().values()])
    return all(torch.equal(a, b) for a, b in zip(*states))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=64, help="training batch size")
    ap.add_argument("--probe-images", type=int, default=4)
    ap.add_argument("--n", type=int, default=1000, help="LIME samples per probe image")
    ap.add_argument("--every", type=int, default=100, help="probe period used for the amortised figure")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads (default: torch's); 1 is steadier on a loaded machine")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    ap.add_argument("--quick", action="store_true", help="smoke test: N=50, 2 repetitions")
    args = ap.parse_args()
    if args.quick:
        args.n, args.reps = 50, 2
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
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

    systems = dict(plain=plain, with_probe=with_probe, probe_only=probe_only)
    for fn in systems.values():  # warm-up
        fn()
        fn()
    times = {k: [] for k in systems}
    for rep in range(args.reps):
        for key, fn in systems.items():
            times[key].append(timed(fn, device))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms" for k, v in times.items()), flush=True)
    trainer.probe.history.clear()

    res = {k: summary(v) for k, v in times.items()}
    step = res["plain"]["median"]
    per_call = res["with_probe"]["median"] - step
    paired = [w - p for w, p in zip(times["with_probe"], times["plain"])]
    out = header(device)
    out.update(
        benchmark="probe_overhead", quick=args.quick, torch_threads=torch.get_num_threads(),
        load_average_1_5_15=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        setup=dict(model="small CNN (2 conv-BN-ReLU, 10 classes)", train_batch=args.batch, image="3x32x32",
                   probe_images=args.probe_images, n_samples=args.n, features="4x4 grid (16)",
                   target="top1", repetitions=args.reps),
        seconds=res,
        overhead_per_probe_call_seconds=per_call,
        overhead_per_probe_call_seconds_paired_median=statistics.median(paired),
        overhead_per_probe_call_in_training_steps=per_call / step,
        amortised_overhead_fraction=dict(every=args.every, fraction=per_call / (args.every * step)),
        bit_identical_weights_after_training=bit_identical(device, args.batch, dict(probe_args, every=3), 7),
    )
    name = f"probe_overhead_{device.type}{'_quick' if args.quick else ''}.json"
    path = write(name, out, args.out)
    print(f"wrote {path}")
    print(f"training step {step * 1e3:.1f} ms; probe call overhead {per_call * 1e3:.1f} ms "
          f"({per_call / step:.1f} steps); every {args.every} steps: "
          f"{100 * per_call / (args.every * step):.2f}% of training time; "
          f"bit-identical: {out['bit_identical_weights_after_training']}")


if __name__ == "__main__":
    main()
