"""GPU latency: one 299x299 image, inception_v3, N=1000, end to end (torch SLIC included).

For every variant (fp32, bf16 autocast, channels_last, torch.compile and
combinations, all through ``torchlime.accel.Accelerated``) the script times

* ``explain_image(model, image, n_samples=N, batch_size=b)``: segmentation (the
  default torch SLIC on the GPU), masks, perturbation, forward, kernel and fit,
  until the coefficients are on the host;
* the floor: the bare forward pass of the same N perturbed images (built once,
  already on the GPU) in chunks of b, under ``torch.inference_mode()``, for each
  candidate b; the torchlime run uses the variant's best b.

Protocol: warm-up (every variant and every floor batch size run once, which also
compiles and autotunes), then ``--reps`` repetitions that run all variants back to
back (interleaved), each timing synchronised with ``torch.cuda.synchronize``;
medians are reported. Target: the best variant <= 0.3 s on an H100.

    python benchmarks/bench_gpu_latency.py                       # cuda, N=1000, 10 repetitions
    python benchmarks/bench_gpu_latency.py --variants fp32 bf16
    python benchmarks/bench_gpu_latency.py --device cpu --quick --out /tmp/quick   # smoke test
"""
from __future__ import annotations

import argparse
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
from common import IMAGENET_MEAN, IMAGENET_STD, RESULTS, header, summary, test_image, timed, vision_model, write

import torchlime
from torchlime.accel import Accelerated
from torchlime.features import relabel
from torchlime.image._explain import Normalized, explain_image
from torchlime.image.segments import slic
from torchlime.perturb import perturb_chunk

#: name -> Accelerated options (an empty dict: the plain model, no wrapper)
VARIANTS: dict[str, dict[str, Any]] = {
    "fp32": {},
    "bf16": dict(autocast=torch.bfloat16),
    "channels_last": dict(channels_last=True),
    "bf16_channels_last": dict(autocast=torch.bfloat16, channels_last=True),
    "compile": dict(compile=True),
    "bf16_channels_last_compile": dict(autocast=torch.bfloat16, channels_last=True, compile=True),
}


def build_model(name: str, options: dict[str, Any], device: torch.device,
                compile_batch: int) -> tuple[torch.nn.Module, list[int] | None]:
    """A fresh normalised torchvision model (random weights) wrapped for one variant.

    Returns the model and, for compiled variants, the only batch size it is timed at
    (compiled variants run fixed-size chunks of ``compile_batch``); else None.
    """
    model = Normalized(vision_model(name, device), IMAGENET_MEAN, IMAGENET_STD).to(device).eval()
    if not options:
        return model, None
    opts = dict(options)
    fixed = None
    if opts.get("compile"):
        opts["chunk_size"] = compile_batch
        fixed = [compile_batch]
    return Accelerated(model, **opts).eval(), fixed


def perturbed_images(images: torch.Tensor, n: int, n_segments: int = 100) -> tuple[torch.Tensor, torch.Tensor]:
    """N perturbed copies of every image as explain_image builds them (torch SLIC, Bernoulli(1/2)
    masks from generator seed 0, baseline 0): ((B*N, C, H, W) images, (B, 1, H, W) labels)."""
    labels, nf = relabel(slic(images, n_segments=n_segments).unsqueeze(1))
    f = int(nf.max())
    gen = torch.Generator(device=images.device).manual_seed(0)
    masks = torchlime.BernoulliSampler()(nf, n, f, gen)
    base = torch.zeros_like(images)
    return perturb_chunk(images, base, labels, masks, 0, images.shape[0] * n), labels


def floor_fn(model: Callable, images: torch.Tensor, batch: int, total: int | None = None) -> Callable[[], None]:
    """Forward ``total`` rows (default: all of ``images``) in chunks of ``batch``, cycling over ``images``."""
    total = images.shape[0] if total is None else total

    def run() -> None:
        with torch.inference_mode():
            done = 0
            while done < total:
                rows = min(batch, total - done)
                start = done % images.shape[0]
                chunk = images[start:start + rows]
                model(chunk).softmax(1)
                done += chunk.shape[0]
    return run


def settings(device: torch.device) -> dict:
    """Backend switches that change speed, recorded with every result."""
    out = dict(cudnn_benchmark=torch.backends.cudnn.benchmark)
    if device.type == "cuda":
        out.update(matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32,
                   cudnn_allow_tf32=torch.backends.cudnn.allow_tf32)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="inception_v3")
    ap.add_argument("--size", type=int, default=299)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1000],
                    help="floor / chunk sizes tried for non-compiled variants")
    ap.add_argument("--compile-batch", type=int, default=256, help="fixed chunk of the compiled variants")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    ap.add_argument("--quick", action="store_true", help="smoke test: N=16, 1 repetition, 96x96, batch 8")
    args = ap.parse_args()
    if args.quick:
        args.n, args.reps, args.size, args.batch_sizes, args.compile_batch = 16, 1, 96, [8], 8
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    image = test_image(args.size).to(device)
    floor_images, _ = perturbed_images(image, args.n)

    variants, errors = {}, {}
    for name in args.variants:
        try:
            model, fixed = build_model(args.model, VARIANTS[name], device, args.compile_batch)
            variants[name] = dict(model=model, batches=fixed or args.batch_sizes)
        except Exception as err:  # noqa: BLE001 - one broken variant must not lose the others
            errors[name] = f"{type(err).__name__}: {err}"

    # warm-up: every floor batch size, then torchlime at each variant's best floor batch
    floor_warm: dict[str, dict[int, float]] = {}
    for name, v in list(variants.items()):
        try:
            t0 = time.perf_counter()
            floor_warm[name] = {b: timed(floor_fn(v["model"], floor_images, b), device) for b in v["batches"]}
            floor_warm[name] = {b: timed(floor_fn(v["model"], floor_images, b), device) for b in v["batches"]}
            v["batch"] = min(floor_warm[name], key=floor_warm[name].get)
            v["explain"] = _explain_fn(v["model"], image, args.n, v["batch"])
            v["explain"]()
            v["warmup_seconds"] = time.perf_counter() - t0
            print(f"warm-up {name}: {v['warmup_seconds']:.1f} s, best batch {v['batch']}", flush=True)
        except Exception as err:  # noqa: BLE001
            errors[name] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
            del variants[name]

    times = {name: dict(torchlime=[], **{f"floor_batch{b}": [] for b in v["batches"]})
             for name, v in variants.items()}
    for rep in range(args.reps):
        for name, v in variants.items():
            times[name]["torchlime"].append(timed(v["explain"], device))
            for b in v["batches"]:
                times[name][f"floor_batch{b}"].append(timed(floor_fn(v["model"], floor_images, b), device))
            print(f"rep {rep} {name}: torchlime {times[name]['torchlime'][-1]:.3f} s", flush=True)

    results = {}
    for name, t in times.items():
        res = {k: summary(v) for k, v in t.items()}
        floor_key = min((k for k in res if k.startswith("floor")), key=lambda k: res[k]["median"])
        results[name] = dict(options={k: str(o) for k, o in VARIANTS[name].items()},
                             batch_size=variants[name]["batch"], seconds=res, floor=floor_key,
                             torchlime_over_floor=res["torchlime"]["median"] / res[floor_key]["median"],
                             warmup_seconds=variants[name]["warmup_seconds"])
    best = min(results, key=lambda k: results[k]["seconds"]["torchlime"]["median"]) if results else None
    out = header(device)
    out.update(benchmark="gpu_latency", model=args.model, image_size=args.size, n_samples=args.n,
               repetitions=args.reps, quick=args.quick, settings=settings(device), variants=results,
               errors=errors, best_variant=best, target_seconds=0.3,
               best_seconds=results[best]["seconds"]["torchlime"]["median"] if best else None)
    out["meets_target"] = (best is not None and out["best_seconds"] <= 0.3) if not args.quick else None
    path = write(f"gpu_latency_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"wrote {path}")
    for name, r in results.items():
        print(f"{name:28s} torchlime {r['seconds']['torchlime']['median']:.3f} s  "
              f"floor {r['seconds'][r['floor']]['median']:.3f} s ({r['floor']})  "
              f"ratio {r['torchlime_over_floor']:.2f}")
    for name, e in errors.items():
        print(f"{name}: FAILED {e}")


def _explain_fn(model: Callable, image: torch.Tensor, n: int, batch: int) -> Callable[[], None]:
    def run() -> None:
        exp = explain_image(model, image, n_samples=n, batch_size=batch)
        exp.coef.sum().item()  # the result on the host
    return run


if __name__ == "__main__":
    main()
