"""Segmentation speed: torchlime's SLIC (torch and Triton paths) against scikit-image's slic and quickshift.

All methods segment scikit-image's astronaut resized to ``--size`` (224; RGB in [0, 1]), one
image and a batch (``--batch`` rolls and flips of it; scikit-image's methods segment one image
at a time, so their batch time would be ``batch`` times the single one):

* ``torch_slic``: ``torchlime.image.segments.slic`` with ``TORCHLIME_BACKEND=torch`` (the torch
  implementation, on the images' device);
* ``triton_slic``: the same call with ``TORCHLIME_BACKEND=auto``, which on CUDA runs SLIC's
  assignment and update steps as Triton kernels (CUDA only: on the CPU ``auto`` is the torch
  path, so this entry is recorded as skipped; also skipped without triton or under torch's
  deterministic mode, where ``auto`` picks the torch path; with ``TRITON_INTERPRET=1`` on the
  CPU the kernels run in Triton's interpreter, which checks the labels but says nothing of speed);
* ``skimage_quickshift`` (lime's parameters, ``torchlime.image.LIME_QUICKSHIFT``) and
  ``skimage_slic`` (n_segments=100) on the host.

The torch and Triton labels are compared image by image: the adjusted Rand index (sklearn,
if installed) and whether the label maps are identical. Every time is the median of
``--runs`` runs after ``--warmup`` runs, synchronised on CUDA.

    python benchmarks/bench_segmentation.py --device cuda                 # results/segmentation_cuda.json
    python benchmarks/bench_segmentation.py --device cpu --threads 2      # results/segmentation_cpu.json
    python benchmarks/bench_segmentation.py --device cpu --quick --out /tmp/quick   # smoke test
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import os
import statistics
import time
from typing import Any, Callable, Iterator

import numpy as np
import torch

from torchlime.image import LIME_QUICKSHIFT
from torchlime.image.segments import slic

from benchmarks.common import (
    common_args,
    device_arg,
    header,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    test_image,
    write,
)


@contextlib.contextmanager
def backend(mode: str) -> Iterator[None]:
    """``TORCHLIME_BACKEND=mode`` for the calls inside (torchlime reads it at every call)."""
    old = os.environ.get("TORCHLIME_BACKEND")
    os.environ["TORCHLIME_BACKEND"] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TORCHLIME_BACKEND", None)
        else:
            os.environ["TORCHLIME_BACKEND"] = old


def timeit(fn: Callable[[], Any], runs: int, warmup: int, device: torch.device) -> tuple[dict[str, Any], Any]:
    """Median / min / all wall times of ``fn`` in seconds (and the median process CPU time,
    which a busy machine inflates less), and its last result.
    """
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    result = None
    for _ in range(warmup):
        result = fn()
    sync()
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        sync()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "runs_s": times,
        "median_cpu_s": statistics.median(cpu),
    }, result


def agreement(a: torch.Tensor, b: torch.Tensor) -> dict[str, Any]:
    """How alike two (B, H, W) label maps are, image by image: adjusted Rand index (sklearn) and identity."""
    a, b = a.cpu(), b.cpu()
    identical = [bool(torch.equal(x, y)) for x, y in zip(a, b)]
    out: dict[str, Any] = dict(identical_images=sum(identical), images=len(identical))
    metrics, why = optional_module("sklearn.metrics")
    if metrics is None:
        out["adjusted_rand_index"] = f"skipped: scikit-learn is not installed ({why})"
        return out
    ari = [float(metrics.adjusted_rand_score(x.flatten().numpy(), y.flatten().numpy())) for x, y in zip(a, b)]
    out["adjusted_rand_index"] = dict(mean=statistics.fmean(ari), min=min(ari), per_image=ari)
    return out


def counts(labels: torch.Tensor) -> dict[str, float]:
    c = (labels.flatten(1).amax(1) + 1).cpu().float()
    return {"min": int(c.min()), "max": int(c.max()), "mean": float(c.mean())}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    parser.add_argument("--size", type=int, default=None, help="image side (default 224; quick: 64)")
    parser.add_argument("--batch", type=int, default=None, help="images in the batch (default 64; quick: 2)")
    parser.add_argument("--n-segments", type=int, default=100)
    parser.add_argument("--runs", type=int, default=None, help="timed runs per method (default 7; quick: 1)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 2; quick: 1)")
    parser.add_argument(
        "--skimage-runs", type=int, default=None, help="timed runs of scikit-image's methods (default 5; quick: 1)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.batch is not None and args.batch < 2:
        parser.error("--batch must be >= 2 (one image is timed on its own)")
    defaults = dict(size=(64, 224), batch=(2, 64), runs=(1, 7), warmup=(1, 2), skimage_runs=(1, 5))
    size_defaults(args, defaults)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    host = torch.device("cpu")
    image = test_image(args.size)
    x = image.to(device)
    variants = [image.roll((8 * i, 5 * i), (2, 3)) for i in range(args.batch)]
    batch = torch.cat([v.flip(-1) if i % 2 else v for i, v in enumerate(variants)]).to(device)
    np_image = image[0].permute(1, 2, 0).double().numpy()
    nseg = args.n_segments
    b, s = args.batch, args.size

    timings: dict[str, Any] = {}
    segments: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    labels: dict[str, torch.Tensor] = {}
    with backend("torch"):
        timings[f"torch_slic_1x{s}"], lab1 = timeit(lambda: slic(x, nseg), args.runs, args.warmup, device)
        timings[f"torch_slic_{b}x{s}"], labb = timeit(lambda: slic(batch, nseg), args.runs, args.warmup, device)
    labels["torch"] = torch.cat([lab1, labb])
    segments[f"torch_slic_1x{s}"], segments[f"torch_slic_{b}x{s}"] = counts(lab1), counts(labb)

    triton, why = optional_module("triton")
    interpreted = device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1" and triton is not None
    if device.type != "cuda" and not interpreted:
        skipped["triton_slic"] = (
            "CUDA only: with TORCHLIME_BACKEND=auto, CPU tensors take the torch path "
            "(TRITON_INTERPRET=1 runs the kernels interpreted on the CPU: a check, not a speed)"
        )
    elif triton is None:
        skipped["triton_slic"] = f"triton is not installed ({why})"
    elif torch.are_deterministic_algorithms_enabled():
        skipped["triton_slic"] = "torch's deterministic mode is on: TORCHLIME_BACKEND=auto takes the torch path"
    else:
        with backend("triton" if interpreted else "auto"):
            timings[f"triton_slic_1x{s}"], tri1 = timeit(lambda: slic(x, nseg), args.runs, args.warmup, device)
            timings[f"triton_slic_{b}x{s}"], trib = timeit(lambda: slic(batch, nseg), args.runs, args.warmup, device)
        labels["triton"] = torch.cat([tri1, trib])
        segments[f"triton_slic_1x{s}"], segments[f"triton_slic_{b}x{s}"] = counts(tri1), counts(trib)

    skimage, why = optional_module("skimage.segmentation")
    if skimage is None:
        skipped["skimage"] = f"scikit-image is not installed ({why})"
    else:
        timings[f"skimage_quickshift_1x{s}"], labq = timeit(
            lambda: skimage.quickshift(np_image, **LIME_QUICKSHIFT), args.skimage_runs, 1, host
        )
        timings[f"skimage_slic_1x{s}"], labs = timeit(
            lambda: skimage.slic(np_image, n_segments=nseg), args.skimage_runs, 1, host
        )
        segments[f"skimage_quickshift_1x{s}"] = int(len(np.unique(labq)))
        segments[f"skimage_slic_1x{s}"] = int(len(np.unique(labs)))

    per_image = {k: v["median_s"] / (b if f"_{b}x{s}" in k else 1) for k, v in timings.items()}
    ratios = {}
    torch1 = timings[f"torch_slic_1x{s}"]["median_s"]
    for k, v in per_image.items():
        if not k.startswith(f"torch_slic_1x{s}"):
            ratios[f"{k}_per_image_over_torch_slic_1x{s}"] = v / torch1

    out = header(device)
    out.update(
        benchmark="segmentation",
        quick=args.quick,
        torch_threads=torch.get_num_threads(),
        cpu_count=os.cpu_count(),
        load_average_before_after=[load_before, load_average()],
        triton_version=getattr(triton, "__version__", None),
        triton_interpreted=interpreted,
        image=f"skimage.data.astronaut() resized to {s}x{s} (torch bilinear, antialias)",
        batch=b,
        n_segments=nseg,
        runs=args.runs,
        skimage_runs=args.skimage_runs,
        timings=timings,
        median_seconds_per_image=per_image,
        ratios=ratios,
        segments=segments,
        skipped=skipped,
        torch_vs_triton_labels=(
            agreement(labels["torch"], labels["triton"]) if "triton" in labels else "skipped: no Triton run"
        ),
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    path = write(f"segmentation_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"{out['device']} | torch {torch.__version__} | {torch.get_num_threads()} threads")
    for k, v in timings.items():
        print(f"{k:28s} {v['median_s'] * 1e3:9.2f} ms   ({per_image[k] * 1e3:.2f} ms per image)")
    for k, why in skipped.items():
        print(f"{k}: skipped ({why})")
    agree = out["torch_vs_triton_labels"]
    if isinstance(agree, dict):
        ari = agree["adjusted_rand_index"]
        ari = f"mean {ari['mean']:.4f}, min {ari['min']:.4f}" if isinstance(ari, dict) else ari
        print(
            f"torch vs triton labels: {agree['identical_images']}/{agree['images']} identical; "
            f"adjusted Rand index {ari}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
