"""Pixel flipping as a Quantus user runs it: ``quantus.PixelFlipping`` vs ``torchlime.compat.quantus.PixelFlipping``.

A small CNN with random weights (two 3x3 convolutions, 16/32 channels, the second stride 2, ReLU, global
average pooling, a linear layer to 10 classes, He-normal weights), 16 random 3x32x32 images, standard-normal
float64 attributions (``a_batch``: no ties, so both rank the elements alike), each image's top class as
``y_batch``, ``features_in_step=64`` (3072 / 64 = 48 steps: Quantus needs a step that divides H x W = 1024, which
64 steps' 48 elements do not), ``perturb_baseline="black"`` (each image's minimum), softmax scores. Interleaved
repetitions (medians reported) of:

* ``quantus``: ``quantus.PixelFlipping(features_in_step=64, perturb_baseline="black")(model, x, y, a)`` at its
  defaults (``batch_size=64``: all 16 images in one batch, one model call of 16 rows per step);
* ``compat``: ``torchlime.compat.quantus.PixelFlipping``, the same call (``batch_size=64``: at most 64 rows
  per model call, every step of every image in one chunked pass);
* ``native``: ``torchlime.metrics.deletion(model, x, a, target=y, baseline=fill, steps=48, softmax=True)``
  (torchlime's chunk rule sizes the calls);
* ``floor``: no metric, the model once on the 16 x 48 perturbed rows (built beforehand) in calls of 64 rows.

Model calls are counted by a forward pre-hook. The curves of ``compat`` and ``native`` are compared with
Quantus's (max absolute difference). ``--threads 1`` is steadier on a small shared CPU.

    python benchmarks/bench_quantus.py --threads 1               # results/quantus_cpu.json
    python benchmarks/bench_quantus.py --quick --out /tmp/q      # smoke run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import collections
import statistics
import warnings
from typing import Callable

import numpy as np
import torch

from torchlime.compat.quantus import PixelFlipping
from torchlime.metrics import deletion

from benchmarks.common import (
    common_args,
    device_arg,
    header,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    write,
)

STEP, CHUNK = 64, 64


def convnet(device: torch.device) -> torch.nn.Module:
    """The small CNN (random He-normal weights, so that the scores vary over the steps)."""
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )
    for layer in net:
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return net.eval().to(device)


class Calls:
    """Counts a module's calls by their rows (a forward pre-hook)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.rows: collections.Counter[int] = collections.Counter()
        model.register_forward_pre_hook(self._hook)

    def _hook(self, module: torch.nn.Module, args: tuple) -> None:
        self.rows[int(args[0].shape[0])] += 1

    def take(self) -> dict:
        """The calls since the last ``take``: their number and {rows: calls}."""
        out = dict(model_calls=sum(self.rows.values()), calls_by_rows={str(k): v for k, v in sorted(self.rows.items())})
        self.rows.clear()
        return out


def flipped_rows(x: torch.Tensor, a: np.ndarray, step: int) -> torch.Tensor:
    """(B * steps, ...) the perturbed images of every step (the floor's input), stable order."""
    b, size = x.shape[0], x[0].numel()
    order = torch.as_tensor(np.argsort(-a.reshape(b, -1), axis=1, kind="stable"), device=x.device)
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(size, device=x.device).expand(b, size))
    j = torch.arange(1, size // step + 1, device=x.device).view(1, -1, 1)
    hidden = rank.unsqueeze(1) < j * step  # (B, steps, E)
    fill = x.reshape(b, -1).amin(1).view(b, 1, 1)
    rows = torch.where(hidden, fill, x.reshape(b, 1, -1))
    return rows.reshape(-1, *x.shape[1:])


def systems(model, x: np.ndarray, y: np.ndarray, a: np.ndarray, device: torch.device, quantus) -> dict[str, Callable]:
    """The calls to time, each returning its (B, steps) curves (None for the floor)."""
    call = dict(model=model, x_batch=x, y_batch=y, a_batch=a, device=device.type)
    xt, yt = torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)
    at, steps = torch.as_tensor(a, device=device), x[0].size // STEP
    fill = xt.reshape(len(x), -1).amin(1).view(-1, 1, 1, 1)
    out: dict[str, Callable] = {}
    if quantus is not None:
        metric = quantus.PixelFlipping(features_in_step=STEP, perturb_baseline="black", disable_warnings=True)
        out["quantus"] = lambda: np.array(metric(**call))
    compat = PixelFlipping(features_in_step=STEP, perturb_baseline="black")
    out["compat"] = lambda: np.array(compat(**call))
    out["native"] = lambda: (
        deletion(model, xt, at, target=yt, baseline=fill, steps=steps, softmax=True, return_curves=True)
        .curves[:, 0, 1:]
        .cpu()
        .numpy()
    )
    rows = flipped_rows(xt, a, STEP)

    def floor() -> None:
        with torch.inference_mode():
            for start in range(0, rows.shape[0], CHUNK):
                model(rows[start : start + CHUNK]).softmax(1)

    out["floor"] = floor
    return out


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--images", type=int, default=None, help="B (default 16, quick 4)")
    parser.add_argument("--size", type=int, default=None, help="image side (default 32, quick 16)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5, quick 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = size_defaults(parser.parse_args(), dict(images=(4, 16), size=(16, 32), reps=(1, 5)))
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    quantus, quantus_missing = optional_module("quantus")
    warnings.filterwarnings("ignore")  # Quantus's parameterisation notes and per-step "no change" checks
    model = convnet(device)
    calls = Calls(model)
    rng = np.random.default_rng(0)
    x = rng.random((args.images, 3, args.size, args.size)).astype(np.float32)
    a = rng.standard_normal(x.shape)
    with torch.inference_mode():
        y = model(torch.as_tensor(x, device=device)).argmax(1).cpu().numpy()
    calls.take()
    fns = systems(model, x, y, a, device, quantus)
    curves: dict[str, np.ndarray] = {}
    counted: dict[str, dict] = {}
    for name, fn in fns.items():  # warm-up: imports, first allocations, oneDNN primitives
        out = fn()
        counted[name] = calls.take()
        if out is not None:
            curves[name] = out
    times: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(args.reps):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
        calls.take()
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {f"{k}_over_floor": med[k] / med["floor"] for k in med if k != "floor"}
    agreement = {}
    if "quantus" in med:
        ratios.update({f"quantus_over_{k}": med["quantus"] / med[k] for k in ("compat", "native")})
        agreement = {
            f"{k}_vs_quantus_max_abs_diff": float(np.abs(curves[k] - curves["quantus"]).max())
            for k in ("compat", "native")
        }
    result = dict(
        header(device),
        threads=torch.get_num_threads() if device.type == "cpu" else None,
        load_average_1_5_15=load_average(),
        load_average_1_5_15_at_start=load_before,
        quick=args.quick,
        quantus_missing=quantus_missing,
        quantus_version=getattr(quantus, "__version__", None),
        setup=dict(
            model="2-conv CNN (16/32 channels), random He-normal weights, 10 classes",
            images=args.images,
            size=args.size,
            features_in_step=STEP,
            steps=x[0].size // STEP,
            perturb_baseline="black",
            softmax=True,
            attributions="standard normal, float64",
            target="each image's top class",
            reps=args.reps,
            floor_rows=args.images * (x[0].size // STEP),
            floor_rows_per_call=CHUNK,
            reduced=(args.images, args.size) != (16, 32),
        ),
        systems={k: dict(seconds=summary(times[k]), **counted[k]) for k in fns},
        ratios=ratios,
        curves=agreement,
    )
    for k, v in med.items():
        print(f"{k}: {v:.3f} s, {counted[k]['model_calls']} model calls, rows: calls {counted[k]['calls_by_rows']}")
    print("ratios:", {k: round(v, 2) for k, v in ratios.items()})
    print("curves:", agreement)
    print(write(f"quantus_{device.type}{'_quick' if args.quick else ''}.json", result, args.out))


if __name__ == "__main__":
    main()
