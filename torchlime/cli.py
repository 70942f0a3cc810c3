"""The ``torchlime`` command line.

Usage errors (a bad option, a value out of range, CUDA asked for on a machine without it)
are one line on stderr and exit code 2, never a traceback; an output folder the command
created is removed again when the command fails before writing anything into it.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``torchlime demo: error: ...``), exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``torchlime`` command."""
    from . import __version__

    parser = _Parser(prog="torchlime", description="Fast, batched, device-side LIME for PyTorch.")
    parser.add_argument("--version", action="version", version=f"torchlime {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="explain held-out images of the embedded model, write PNGs and a JSON summary")
    demo.add_argument("--out", type=Path, default=Path("torchlime_demo"), help="output folder (default: %(default)s)")
    demo.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    demo.add_argument("--n-images", type=_int_at_least(1), default=8, help="held-out images (default: %(default)s)")
    demo.add_argument("--n-samples", type=_int_at_least(2), default=1000,
                      help="perturbed samples per image (default: %(default)s)")
    demo.add_argument("--n-segments", type=_int_at_least(2), default=40,
                      help="SLIC superpixels asked for (default: %(default)s)")
    demo.add_argument("--top-k", type=_int_at_least(1), default=3,
                      help="segments shown and scored per image (default: %(default)s)")
    demo.set_defaults(parser=demo)
    return parser


def _demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import torch

    from .image.demo import run_demo

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine; use --device cpu")
    created = not args.out.exists()
    try:
        s = run_demo(args.out, args.device, args.n_images, args.n_samples, n_segments=args.n_segments,
                     top_k=args.top_k)
    except (ValueError, TypeError) as err:
        if created and args.out.is_dir() and not any(args.out.iterdir()):
            shutil.rmtree(args.out)
        parser.error(str(err))
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit code (argparse exits with 2 on usage errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args, args.parser)
    return 0  # pragma: no cover - argparse requires a known command


if __name__ == "__main__":
    sys.exit(main())
