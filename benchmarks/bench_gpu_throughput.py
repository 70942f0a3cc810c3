"""GPU throughput: resnet50 at 224x224, 32 images x N=1000 samples each, in one call, against its floor.

One ``explain_image(model, images, n_samples=N, normalize=(mean, std), accelerate=...)`` call
explains all the images (SLIC for each on the device, then images·N perturbed images through
the model in the chunks torchlime measures). Variants: ``default`` (the plain fp32 model),
``fast`` (``accelerate="fast"``) and ``bf16_channels_last``
(``Accelerated(autocast=torch.bfloat16, channels_last=True)``); any variant of
``bench_gpu_latency.VARIANTS`` can be asked for. Reported per variant:

* explanations per second = images / median seconds of the call (segmentation included);
* the forward floor: seconds for the same images·N rows through the same (wrapped) model,
  prebuilt perturbed images (normalised, in the dtype and layout torchlime writes for that
  model, on the device) cycled in chunks of the fastest of a few sizes (torchlime's chunk
  among them), under ``torch.inference_mode()``;
* ``ratio`` = floor seconds / torchlime seconds (goal >= 0.99);
* the peak CUDA memory of the call (``exp.meta["peak_memory"]``; goal for the default run:
  under 8 GB = 8e9 bytes).

Goals are stored and printed next to the figures; this script claims nothing. Protocol:
warm-up (torchlime until its chunk size is measured, every floor size), then ``--reps``
interleaved repetitions (torchlime, floor, next variant ...), synchronised, medians.

    python benchmarks/bench_gpu_throughput.py                     # cuda, 32 x 1000, 5 repetitions
    python benchmarks/bench_gpu_throughput.py --images 64 --variants default bf16_channels_last
    python benchmarks/bench_gpu_throughput.py --device cpu --quick --out /tmp/quick   # smoke test
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import time
import traceback

import torch

from torchlime.image.segments import slic

from benchmarks.bench_gpu_latency import NORMALIZE, VARIANTS, build_variant, explain_fn, settings
from benchmarks.common import (
    best_chunk,
    common_args,
    device_arg,
    exit_if_stopped,
    formatted,
    forward_rows,
    goal,
    header,
    normalized,
    perturbed_images,
    size_defaults,
    smoke_threads,
    summary,
    test_image,
    timed,
    until_stopped,
    vision_args,
    warm_up,
    write,
)

DEFAULT_VARIANTS = ["default", "fast", "bf16_channels_last"]
PEAK_GOAL_BYTES = 8 * 10**9
POOL_ROWS = 4096  # torchlime's largest chunk (torchlime.stages.forward.chunking.MAX_CHUNK)


def image_batch(n_images: int, size: int) -> torch.Tensor:
    """(n_images, 3, size, size): the test image rolled, flipped and dimmed differently for each."""
    base = test_image(size)[0]
    out = []
    for i in range(n_images):
        img = torch.roll(base, shifts=(17 * i % size, 29 * i % size), dims=(1, 2))
        if i % 2:
            img = img.flip(2)
        out.append(img * (0.6 + 0.4 * ((i * 7) % 11) / 10))
    return torch.stack(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cuda")
    vision_args(ap, "resnet50", 224)
    ap.add_argument("--images", type=int, default=None, help="images explained in one call (default 32; quick: 2)")
    ap.add_argument("--n", type=int, default=None, help="samples per image (default 1000; quick: 16)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5; quick: 1)")
    ap.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=list(VARIANTS),
        help="default: default fast bf16_channels_last; quick: default fast (bf16 on a CPU is slow; the latency "
        "smoke run covers it)",
    )
    ap.add_argument(
        "--chunk-sizes",
        type=int,
        nargs="+",
        default=None,
        help="floor chunk sizes tried (default 256 512 1024 2048; quick: 8 16), plus torchlime's",
    )
    ap.add_argument("--compile-chunk", type=int, default=512, help="fixed chunk of compiled / graphed variants")
    args = ap.parse_args(argv)
    defaults = dict(
        model=("resnet18", "resnet50"),
        size=(64, 224),
        images=(2, 32),
        n=(16, 1000),
        reps=(1, 5),
        chunk_sizes=([8, 16], [256, 512, 1024, 2048]),
    )
    size_defaults(args, defaults)
    if args.variants is None:
        args.variants = DEFAULT_VARIANTS[:2] if args.quick else DEFAULT_VARIANTS
    if args.quick:
        args.compile_chunk = min(args.compile_chunk, 16)
    return args


def measure(
    args: argparse.Namespace,
    device: torch.device,
    images: torch.Tensor,
    pool: torch.Tensor,
    pool_rows: int,
    st: dict[str, dict],
) -> None:
    """Warm-ups, then the interleaved repetitions, filling ``st`` as it goes (``variants``, ``errors``,
    ``times``, ``peak``): a stop keeps what finished.
    """
    rows = args.images * args.n
    variants, errors = st["variants"], st["errors"]
    for name in args.variants:
        try:
            t0 = time.perf_counter()
            v = build_variant(name, args.model, device, args.compile_chunk)
            v["store"] = {}
            v["explain"] = explain_fn(v["model"], images, args.n, v["accelerate"], v["store"])
            chosen = warm_up(v["explain"], v["store"], least=2, most=6)
            v["rows"] = formatted(pool, v["floor_model"])
            sizes = [v["fixed"]] if v["fixed"] else [*args.chunk_sizes, chosen]
            sizes = [s for s in sizes if s <= pool_rows] or [pool_rows]
            probe_rows = min(rows, 2 * max(sizes))  # the same rows for every candidate size
            v["floor_batch"], v["floor_candidates"] = best_chunk(
                lambda b, v=v, p=probe_rows: forward_rows(v["floor_model"], v["rows"], b, total=p),
                sizes,
                device,
                repeats=1,
            )
            v["floor"] = forward_rows(v["floor_model"], v["rows"], v["floor_batch"], total=rows)
            v["floor"]()
            v["warmup_seconds"] = time.perf_counter() - t0
            variants[name] = v
            print(
                f"warm-up {name}: {v['warmup_seconds']:.1f} s, torchlime chunk {chosen}, "
                f"floor chunk {v['floor_batch']}",
                flush=True,
            )
        except Exception as err:  # noqa: BLE001 - one broken variant must not lose the others
            errors[name] = f"{type(err).__name__}: {err}"
            traceback.print_exc()

    times, peak = st["times"], st["peak"]
    times.update({name: dict(torchlime=[], floor=[]) for name in variants})
    for rep in range(args.reps):
        for name, v in variants.items():
            times[name]["torchlime"].append(timed(v["explain"], device))
            peak[name] = v["store"]["meta"].get("peak_memory")
            times[name]["floor"].append(timed(v["floor"], device))
            print(
                f"rep {rep} {name}: torchlime {times[name]['torchlime'][-1]:.3f} s, "
                f"floor {times[name]['floor'][-1]:.3f} s",
                flush=True,
            )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = device_arg(args.device)
    smoke_threads(args, device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    images = image_batch(args.images, args.size).to(device)
    rows = args.images * args.n
    # the floor's pool of prebuilt perturbed images (content does not change the speed), cycled
    pool_rows = min(rows, max(*args.chunk_sizes, args.compile_chunk, POOL_ROWS))
    segments = slic(images[:1])
    with torch.inference_mode():  # an inference tensor: the floor's rows need no copy (common.formatted)
        pool = normalized(perturbed_images(images[:1], segments, pool_rows, fill="zero"))

    st: dict[str, dict] = {k: {} for k in ("variants", "errors", "times", "peak")}
    stop: dict = {}
    with until_stopped(stop):
        measure(args, device, images, pool, pool_rows, st)
    variants, errors, peak = st["variants"], st["errors"], st["peak"]
    times = {k: t for k, t in st["times"].items() if t["torchlime"] and t["floor"]}
    seg = summary([timed(lambda: slic(images), device) for _ in range(3)])

    results = {}
    for name, t in times.items():
        v = variants[name]
        tl, fl = summary(t["torchlime"]), summary(t["floor"])
        ratio = fl["median"] / tl["median"]
        results[name] = dict(
            how=dict(
                accelerate=v["accelerate"],
                fixed_chunk=v["fixed"],
                options={k: str(o) for k, o in VARIANTS[name].get("options", {}).items()},
            ),
            seconds=dict(torchlime=tl, floor=fl),
            torchlime_chunk=v["store"]["meta"]["batch_size"],
            floor_chunk=v["floor_batch"],
            floor_candidates_seconds=v["floor_candidates"],
            floor_input=dict(
                dtype=str(v["rows"].dtype),
                channels_last=bool(v["rows"].is_contiguous(memory_format=torch.channels_last)),
            ),
            explanations_per_second=args.images / tl["median"],
            samples_per_second=rows / tl["median"],
            floor_images_per_second=rows / fl["median"],
            ratio=ratio,
            peak_memory_bytes=peak.get(name),
            warmup_seconds=v["warmup_seconds"],
            goals=dict(ratio=goal("floor seconds / torchlime seconds >= 0.99", ratio, 0.99, ">=", quick=args.quick)),
        )
        if name == "default":
            results[name]["goals"]["peak_memory"] = goal(
                "peak CUDA memory of the default run < 8 GB (8e9 bytes)",
                peak.get(name),
                PEAK_GOAL_BYTES,
                quick=args.quick or device.type != "cuda",
            )
    out = header(device)
    out.update(
        benchmark="gpu_throughput",
        quick=args.quick,
        model=args.model,
        image_size=args.size,
        images=args.images,
        n_samples=args.n,
        rows=rows,
        floor_pool_rows=pool_rows,
        repetitions=args.reps,
        normalize=[list(m) for m in NORMALIZE],
        settings=settings(device),
        segmentation_seconds_torchlime_slic=seg,
        variants=results,
        errors=errors,
        stopped_early=stop["stopped_early"],
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    path = write(f"gpu_throughput_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"wrote {path}")
    for name, r in results.items():
        print(
            f"{name:28s} {r['explanations_per_second']:.2f} explanations/s  "
            f"{r['samples_per_second']:,.0f} samples/s vs floor {r['floor_images_per_second']:,.0f} images/s  "
            f"ratio {r['ratio']:.3f} (goal >= 0.99)  peak {r['peak_memory_bytes']}"
            f"{' (goal < 8e9)' if name == 'default' else ''}"
        )
    for name, e in errors.items():
        print(f"{name}: FAILED {e}")
    exit_if_stopped(stop)
    if errors:  # the JSON above keeps what did run; the exit status tells a runner something failed
        raise SystemExit(1)


if __name__ == "__main__":
    main()
