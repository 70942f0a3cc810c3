"""Benchmark torchlime's torch SLIC against scikit-image's quickshift (lime's default) and slic.

All methods segment skimage's astronaut resized to 224x224 (RGB in [0, 1]); torch SLIC is
also timed on a batch of 64 (flips and shifts of the same image). Every time is the median
of ``--runs`` runs after ``--warmup`` runs, with ``torch.cuda.synchronize()`` on CUDA.

    python benchmarks/bench_segmentation.py --device cpu

writes benchmarks/results/segmentation_<device>.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from torchlime.image.segments import slic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import header, test_image, write  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timeit(fn: Callable[[], Any], runs: int, warmup: int, device: torch.device) -> tuple[dict[str, Any], Any]:
    """Median / min / all wall times of ``fn`` in seconds (and the median process CPU time,
    which a busy machine inflates less), and its last result."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
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
    return {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times,
            "median_cpu_s": statistics.median(cpu)}, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per method (>= 5)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--skimage-runs", type=int, default=5, help="timed runs of the scikit-image methods")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.runs < 5 or args.skimage_runs < 5:
        parser.error("--runs and --skimage-runs must be >= 5")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False")
    from skimage import segmentation

    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    device = torch.device(args.device)
    host = torch.device("cpu")
    image = test_image()
    x = image.to(device)
    variants = [image.roll((8 * i, 5 * i), (2, 3)) for i in range(args.batch)]
    batch = torch.cat([v.flip(-1) if i % 2 else v for i, v in enumerate(variants)]).to(device)
    np_image = image[0].permute(1, 2, 0).double().numpy()

    single, lab1 = timeit(lambda: slic(x), args.runs, args.warmup, device)
    batched, labb = timeit(lambda: slic(batch), args.runs, args.warmup, device)
    quick, labq = timeit(lambda: segmentation.quickshift(np_image, kernel_size=4, max_dist=200, ratio=0.2),
                         args.skimage_runs, 1, host)
    sk_slic, labs = timeit(lambda: segmentation.slic(np_image, n_segments=100), args.skimage_runs, 1, host)

    per_image = batched["median_s"] / args.batch
    counts_batch = (labb.flatten(1).amax(1) + 1).cpu()
    hdr = header(device)
    result = {
        "device": args.device,
        "device_name": hdr["device"],
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_1min_before_after": [load_before[0], os.getloadavg()[0]],
        "git_commit": hdr["commit"],
        "date": hdr["date"],
        "image": "skimage.data.astronaut() resized to 224x224 (torch bilinear, antialias)",
        "runs": args.runs,
        "timings": {
            "torch_slic_1x224": single,
            f"torch_slic_{args.batch}x224": {**batched, "median_per_image_s": per_image},
            "skimage_quickshift_lime_params": quick,
            "skimage_slic_n100": sk_slic,
        },
        "segments": {
            "torch_slic_1x224": int(lab1.max()) + 1,
            f"torch_slic_{args.batch}x224": {"min": int(counts_batch.min()), "max": int(counts_batch.max()),
                                              "mean": float(counts_batch.float().mean())},
            "skimage_quickshift_lime_params": int(len(np.unique(labq))),
            "skimage_slic_n100": int(len(np.unique(labs))),
        },
        "ratios_per_image": {
            "quickshift_over_torch_slic_single": quick["median_s"] / single["median_s"],
            "quickshift_over_torch_slic_batched": quick["median_s"] / per_image,
            "skimage_slic_over_torch_slic_single": sk_slic["median_s"] / single["median_s"],
            "skimage_slic_over_torch_slic_batched": sk_slic["median_s"] / per_image,
            "torch_single_over_batched_per_image": single["median_s"] / per_image,
        },
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"segmentation_{args.device}.json"
    out = write(out.name, result, out.parent)
    t = result["timings"]
    print(f"{result['device_name']} | torch {torch.__version__} | {torch.get_num_threads()} threads")
    print(f"torch slic 1x224:      {single['median_s'] * 1e3:8.1f} ms   "
          f"({result['segments']['torch_slic_1x224']} segments)")
    print(f"torch slic {args.batch}x224:     {batched['median_s'] * 1e3:8.1f} ms = {per_image * 1e3:.1f} ms/image")
    print(f"skimage quickshift:    {t['skimage_quickshift_lime_params']['median_s'] * 1e3:8.1f} ms   "
          f"({result['segments']['skimage_quickshift_lime_params']} segments)")
    print(f"skimage slic n=100:    {t['skimage_slic_n100']['median_s'] * 1e3:8.1f} ms   "
          f"({result['segments']['skimage_slic_n100']} segments)")
    print("ratios:", json.dumps({k: round(v, 2) for k, v in result["ratios_per_image"].items()}))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()


# =================================================================================================
# Triton SLIC (CUDA only), appended section.
#
#     python benchmarks/bench_segmentation.py --device cuda
#
# first runs the measurements above unchanged, then this section times
# ``torchlime.image._slic_triton.slic_triton`` (SLIC with the Triton assign / update kernels of
# kernels/slic.py) next to ``segments.slic`` on the same images (re-timed here, same session) and
# the two kernels alone on the batch, and writes benchmarks/results/segmentation_cuda_triton.json
# (``<--out stem>_triton.json`` when --out is given). With --device cpu (or without CUDA, Triton,
# with TORCHLIME_DISABLE_TRITON set or torch's deterministic mode on) it prints why it is skipped
# and writes nothing.
# =================================================================================================


def triton_section(argv: list[str] | None = None) -> dict[str, Any] | None:
    """Time the Triton SLIC path on CUDA; None (skipped) elsewhere."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=None)
    args, _ = parser.parse_known_args(argv)
    if args.device != "cuda" or not torch.cuda.is_available():
        print("triton slic: skipped (CUDA only; run with --device cuda on a GPU)")
        return None
    from torchlime import _backend
    from torchlime.image._slic_triton import seed_grid, slic_triton
    from torchlime.image.segments import boundaries
    from torchlime.kernels.reference import slic_features

    device = torch.device("cuda")
    image = test_image()
    x = image.to(device)
    if not _backend.use_triton(x):
        print("triton slic: skipped (triton missing, TORCHLIME_DISABLE_TRITON set or deterministic mode on)")
        return None
    variants = [image.roll((8 * i, 5 * i), (2, 3)) for i in range(args.batch)]
    batch = torch.cat([v.flip(-1) if i % 2 else v for i, v in enumerate(variants)]).to(device)

    tri_single, lab1 = timeit(lambda: slic_triton(x), args.runs, args.warmup, device)
    tri_batched, labb = timeit(lambda: slic_triton(batch), args.runs, args.warmup, device)
    torch_single, ref1 = timeit(lambda: slic(x), args.runs, args.warmup, device)
    torch_batched, refb = timeit(lambda: slic(batch), args.runs, args.warmup, device)

    # the two kernels alone, one call each on the batch (SLIC makes n_iter assigns and n_iter updates)
    import kornia

    step, sh, sw, gh, gw = seed_grid(224, 224, 100)
    feats = slic_features(kornia.color.rgb_to_lab(batch), 10.0 / step)
    seeds = ((torch.arange(224, device=device) // sh).view(224, 1) * gw
             + torch.arange(224, device=device) // sw).to(torch.int32).expand(args.batch, 224, 224)
    sums, counts = _backend.slic_update(feats, seeds, gh * gw, (sh, sw))
    centres = (sums / counts.unsqueeze(-1)).view(args.batch, gh, gw, -1)
    labels, _ = _backend.slic_assign(feats, centres, (sh, sw))
    k_assign, _ = timeit(lambda: _backend.slic_assign(feats, centres, (sh, sw)), args.runs, args.warmup, device)
    k_update, _ = timeit(lambda: _backend.slic_update(feats, labels, gh * gw, (sh, sw)), args.runs,
                         args.warmup, device)
    k_atomic, _ = timeit(lambda: _backend.slic_update(feats, labels, gh * gw), args.runs, args.warmup, device)

    same_cuts = (boundaries(labb) == boundaries(refb)).float().mean().item()
    counts_tri = (labb.flatten(1).amax(1) + 1).cpu()
    hdr = header(device)
    result = {
        "device": "cuda",
        "device_name": hdr["device"],
        "torch_version": torch.__version__,
        "triton_version": __import__("triton").__version__,
        "git_commit": hdr["commit"],
        "date": hdr["date"],
        "image": "skimage.data.astronaut() resized to 224x224 (torch bilinear, antialias)",
        "runs": args.runs,
        "timings": {
            "triton_slic_1x224": tri_single,
            f"triton_slic_{args.batch}x224": {**tri_batched,
                                               "median_per_image_s": tri_batched["median_s"] / args.batch},
            "torch_slic_1x224": torch_single,
            f"torch_slic_{args.batch}x224": {**torch_batched,
                                              "median_per_image_s": torch_batched["median_s"] / args.batch},
            f"kernel_assign_{args.batch}x224": k_assign,
            f"kernel_update_cells_{args.batch}x224": k_update,
            f"kernel_update_atomic_{args.batch}x224": k_atomic,
        },
        "segments": {
            "triton_slic_1x224": int(lab1.max()) + 1,
            "torch_slic_1x224": int(ref1.max()) + 1,
            f"triton_slic_{args.batch}x224": {"min": int(counts_tri.min()), "max": int(counts_tri.max()),
                                               "mean": float(counts_tri.float().mean())},
        },
        "boundary_agreement_with_torch_slic": same_cuts,
        "ratios": {
            "torch_over_triton_single": torch_single["median_s"] / tri_single["median_s"],
            "torch_over_triton_batched": torch_batched["median_s"] / tri_batched["median_s"],
        },
    }
    out = (args.out.with_name(args.out.stem + "_triton.json") if args.out
           else ROOT / "benchmarks" / "results" / "segmentation_cuda_triton.json")
    out = write(out.name, result, out.parent)
    t = result["timings"]
    print(f"triton slic 1x224:     {tri_single['median_s'] * 1e3:8.1f} ms   (torch slic {torch_single['median_s'] * 1e3:.1f} ms)")
    print(f"triton slic {args.batch}x224:    {tri_batched['median_s'] * 1e3:8.1f} ms   "
          f"(torch slic {torch_batched['median_s'] * 1e3:.1f} ms)")
    print(f"kernels on {args.batch}x224: assign {t[f'kernel_assign_{args.batch}x224']['median_s'] * 1e3:.2f} ms, "
          f"update {t[f'kernel_update_cells_{args.batch}x224']['median_s'] * 1e3:.2f} ms "
          f"(atomic {t[f'kernel_update_atomic_{args.batch}x224']['median_s'] * 1e3:.2f} ms)")
    print(f"boundary agreement with torch slic: {same_cuts:.4f}")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    triton_section()
