"""``torchlime demo``: explain held-out images of the embedded classifier, write PNGs and a JSON summary."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch

from torchlime.cli._args import Parser, int_at_least
from torchlime.demo.run import run_demo


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``demo`` command's options."""
    demo = sub.add_parser("demo", help="explain held-out images of the embedded model, write PNGs and a JSON summary")
    demo.add_argument("--out", type=Path, default=Path("torchlime_demo"), help="output folder (default: %(default)s)")
    demo.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    demo.add_argument("--n-images", type=int_at_least(1), default=8, help="held-out images (default: %(default)s)")
    demo.add_argument(
        "--n-samples", type=int_at_least(2), default=1000, help="perturbed samples per image (default: %(default)s)"
    )
    demo.add_argument(
        "--n-segments", type=int_at_least(2), default=25, help="SLIC superpixels asked for (default: %(default)s)"
    )
    demo.add_argument(
        "--top-k", type=int_at_least(1), default=3, help="segments shown and scored per image (default: %(default)s)"
    )
    demo.set_defaults(parser=demo)


def run(args: argparse.Namespace) -> int:
    """Run the demo; a bad option value is one line on stderr and exit code 2."""
    parser = args.parser
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine; use --device cpu")
    created = not args.out.exists()
    try:
        s = run_demo(args.out, args.device, args.n_images, args.n_samples, n_segments=args.n_segments, k=args.top_k)
    except (ValueError, TypeError) as err:
        if created and args.out.is_dir() and not any(args.out.iterdir()):
            shutil.rmtree(args.out)
        parser.error(str(err))
    print(
        f"explained {s['n_images']} images x {s['n_samples']} samples on {s['device']} in "
        f"{s['seconds_total']:.2f} s ({s['seconds_per_explanation'] * 1000:.0f} ms per explanation)"
    )
    print(
        f"model accuracy {s['accuracy']:.2f} | mean weighted R^2 {s['mean_weighted_r2']:.3f} | "
        f"top-{s['top_k']} segments cover {100 * s['mean_top_k_coverage']:.0f}% of the planted object | "
        f"top segment on the object in {100 * s['top1_hit_rate']:.0f}% of images"
    )
    for img in s["images"]:
        print(
            f"  image {img['index']}: true {img['true_class']:<8} predicted {img['predicted']:<8} "
            f"R^2 {img['weighted_r2']:.2f}  coverage {100 * img['top_k_coverage']:.0f}%"
        )
    print(
        f"wrote {args.out / 'summary.json'}"
        + (f" and {len(s['pictures'])} PNGs in {args.out}" if s["pictures"] else " (install matplotlib for PNGs)")
    )
    return 0
