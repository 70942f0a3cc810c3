"""The ``torchlime`` command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="torchlime", description="Fast, batched, device-side LIME for PyTorch.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="explain held-out images of the embedded model, write PNGs and a JSON summary")
    demo.add_argument("--out", type=Path, default=Path("torchlime_demo"), help="output folder (default: %(default)s)")
    demo.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    demo.add_argument("--n-images", type=int, default=8)
    demo.add_argument("--n-samples", type=int, default=1000)
    demo.add_argument("--top-k", type=int, default=3)
    args = parser.parse_args(argv)

    if args.command == "demo":
        from .image.demo import run_demo

        s = run_demo(args.out, args.device, args.n_images, args.n_samples, top_k=args.top_k)
        print(f"explained {s['n_images']} images x {s['n_samples']} samples on {s['device']} in "
              f"{s['seconds_total']:.2f} s ({s['seconds_per_explanation'] * 1000:.0f} ms per explanation)")
        print(f"model accuracy {s['accuracy']:.2f} | mean weighted R^2 {s['mean_weighted_r2']:.3f} | "
              f"top-{s['top_k']} segments cover {100 * s['mean_top_k_coverage']:.0f}% of the planted object | "
              f"top segment on the object in {100 * s['top1_hit_rate']:.0f}% of images")
        for img in s["images"]:
            print(f"  image {img['index']}: true {img['true_class']:<8} predicted {img['predicted']:<8} "
                  f"R^2 {img['weighted_r2']:.2f}  coverage {100 * img['top_k_coverage']:.0f}%")
        print(f"wrote {args.out / 'summary.json'}" + (f" and {len(s['pictures'])} PNGs in {args.out}"
                                                      if s["pictures"] else " (install matplotlib for PNGs)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
