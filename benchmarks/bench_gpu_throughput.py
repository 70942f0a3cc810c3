"""GPU throughput: resnet50 at 224x224, a batch of 64 images x N=1000 samples each.

One ``explain_image(model, images, n_samples=N, batch_size=b)`` call explains all
64 images (torch SLIC segments for each, then 64 000 perturbed images through the
model in chunks of b). Reported per variant (dtype / layout / compile):

* explanations per second = 64 / median seconds of the call (segmentation included);
* the forward floor: seconds of 64·N rows of the bare forward pass of the same
  model, dtype and batch size b (one pre-built chunk of b perturbed images, run
  ceil(64·N / b) times under ``torch.inference_mode()``);
* ``ratio`` = floor seconds / torchlime seconds = torchlime's samples per second
  over the bare forward pass's images per second. Target >= 0.9.

Protocol: warm-up (one call of each on a small N, one floor pass), then ``--reps``
interleaved repetitions (torchlime, floor, next variant...), synchronised, medians.

    python benchmarks/bench_gpu_throughput.py                     # cuda, 64 x 1000, 5 repetitions
    python benchmarks/bench_gpu_throughput.py --variants bf16_channels_last --batch-size 1024
    python benchmarks/bench_gpu_throughput.py --device cpu --quick --out /tmp/quick   # smoke test
"""
from __future__ import annotations

import argparse
import math
import time
import traceback
from pathlib import Path

import torch
from bench_gpu_latency import VARIANTS, build_model, floor_fn, perturbed_images, settings
from common import RESULTS, header, summary, test_image, timed, write

from torchlime.image import explain_image
from torchlime.image.segments import slic

DEFAULT_VARIANTS = ["fp32", "bf16", "bf16_channels_last"]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=512, help="chunk of the torchlime run and of the floor")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=list(VARIANTS))
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    ap.add_argument("--quick", action="store_true", help="smoke test: 4 images x N=8, 64x64, batch 8, 1 repetition")
    args = ap.parse_args()
    if args.quick:
        args.images, args.n, args.size, args.batch_size, args.reps = 4, 8, 64, 8, 1
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    images = image_batch(args.images, args.size).to(device)
    chunk, _ = perturbed_images(images[:1], args.batch_size)  # one chunk of b perturbed images
    rows = args.images * args.n
    calls = math.ceil(rows / args.batch_size)

    def explain_fn(model, n):
        def run():
            exp = explain_image(model, images, n_samples=n, batch_size=args.batch_size)
            exp.coef.sum().item()
        return run

    variants, errors = {}, {}
    for name in args.variants:
        try:
            model, _ = build_model(args.model, VARIANTS[name], device, args.batch_size)
            t0 = time.perf_counter()
            explain_fn(model, min(args.n, 50))()
            floor = floor_fn(model, chunk, args.batch_size, total=rows)
            timed(floor_fn(model, chunk, args.batch_size, total=2 * args.batch_size), device)
            variants[name] = dict(model=model, explain=explain_fn(model, args.n), floor=floor,
                                  warmup_seconds=time.perf_counter() - t0)
            print(f"warm-up {name}: {variants[name]['warmup_seconds']:.1f} s", flush=True)
        except Exception as err:  # noqa: BLE001 - one broken variant must not lose the others
            errors[name] = f"{type(err).__name__}: {err}"
            traceback.print_exc()

    times = {name: dict(torchlime=[], floor=[]) for name in variants}
    for rep in range(args.reps):
        for name, v in variants.items():
            times[name]["torchlime"].append(timed(v["explain"], device))
            times[name]["floor"].append(timed(v["floor"], device))
            print(f"rep {rep} {name}: torchlime {times[name]['torchlime'][-1]:.2f} s, "
                  f"floor {times[name]['floor'][-1]:.2f} s", flush=True)
    seg = [timed(lambda: slic(images), device) for _ in range(3)]

    results = {}
    for name, t in times.items():
        tl, fl = summary(t["torchlime"]), summary(t["floor"])
        results[name] = dict(
            options={k: str(o) for k, o in VARIANTS[name].items()}, seconds=dict(torchlime=tl, floor=fl),
            explanations_per_second=args.images / tl["median"],
            samples_per_second=rows / tl["median"], floor_images_per_second=rows / fl["median"],
            ratio=fl["median"] / tl["median"], warmup_seconds=variants[name]["warmup_seconds"])
    out = header(device)
    out.update(benchmark="gpu_throughput", model=args.model, image_size=args.size, images=args.images,
               n_samples=args.n, batch_size=args.batch_size, floor_calls=calls, repetitions=args.reps,
               quick=args.quick, settings=settings(device), segmentation_seconds_torch_slic=summary(seg),
               variants=results, errors=errors, target_ratio=0.9)
    out["meets_target"] = ({k: r["ratio"] >= 0.9 for k, r in results.items()} if not args.quick else None)
    path = write(f"gpu_throughput_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"wrote {path}")
    for name, r in results.items():
        print(f"{name:28s} {r['explanations_per_second']:.2f} explanations/s  "
              f"{r['samples_per_second']:,.0f} samples/s vs floor {r['floor_images_per_second']:,.0f} images/s  "
              f"ratio {r['ratio']:.3f}")
    for name, e in errors.items():
        print(f"{name}: FAILED {e}")


if __name__ == "__main__":
    main()
