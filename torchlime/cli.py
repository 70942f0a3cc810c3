"""The ``torchlime`` command line.

Commands: ``demo`` (the embedded model), ``explain`` (image, audio or text files with your
model: ``_cli_explain``), ``explain-dataset`` (a folder of images in resumable shards:
``_cli_dataset``) and ``bench`` (your model's explanation against its forward floor:
``_cli_bench``). MODEL is a TorchScript file, an ExportedProgram file or ``module:factory``
with ``--weights`` (``_cli_model``).

Usage errors (a bad option, a value out of range, CUDA asked for on a machine without it, a
file that cannot be read, a model that does not load) are one line on stderr and exit code 2,
never a traceback; an output folder the command created is removed again when the command
fails (``explain-dataset`` keeps one that holds finished shards, to resume from). An
unexpected failure is one line with exit code 1 (``TORCHLIME_DEBUG=1`` shows the traceback);
an interruption (Ctrl-C) exits with 130.
"""
from __future__ import annotations

import argparse
import os
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


def _memory(text: str) -> float | int:
    """``--max-memory``: a fraction of the device in (0, 1], or bytes (an integer > 1, e.g. 4e9)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1] or a number of bytes, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1] or a number of bytes, got {text}")
    return value if value <= 1 else int(value)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


SEGMENTERS = ["slic", "grid", "quickshift", "felzenszwalb", "skimage_slic"]


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL",
                   help="a TorchScript file, an ExportedProgram file (torch.export.save) or module:factory")
    p.add_argument("--weights", type=Path, metavar="FILE",
                   help="state dict for MODEL module:factory (torch.load with weights_only=True)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N (default: auto)")


def _explain_args(p: argparse.ArgumentParser, target: str, target_help: str) -> None:
    p.add_argument("--n-samples", type=_int_at_least(2), default=1000,
                   help="perturbed samples per input (default: %(default)s)")
    p.add_argument("--target", default=target, help=target_help)
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="seed of the masks (default: %(default)s)")
    p.add_argument("--softmax", action="store_true", help="explain probabilities (softmax of the outputs)")


def _image_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--segments", choices=SEGMENTERS, default="slic",
                   help="image segmentation (default: %(default)s; grid: about --n-segments cells)")
    p.add_argument("--n-segments", type=_int_at_least(2), default=50,
                   help="segments asked for (slic, grid; default: %(default)s)")
    p.add_argument("--size", type=_int_at_least(1), nargs=2, metavar=("H", "W"), help="resize every image to H x W")
    p.add_argument("--channels", type=int, choices=[1, 3], default=3, help="read images as RGB (3) or grey (1)")
    p.add_argument("--mean", type=_float, nargs="+", help="per-channel mean the model normalises with")
    p.add_argument("--std", type=_float, nargs="+", help="per-channel std the model normalises with")


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="explain image, audio or text files with your model; write pictures, "
                                       "explanation files and a JSON summary")
    _model_args(p)
    p.add_argument("inputs", metavar="INPUT", nargs="+", help="PNG/JPEG images, WAV files or UTF-8 text files")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--modality", choices=["image", "audio", "text"], help="default: from the file extensions")
    _explain_args(p, "top", "top (the top class, default), a class index, topK or all")
    p.add_argument("--top-k", type=_int_at_least(1), default=3,
                   help="features shown and listed per input (default: %(default)s)")
    p.add_argument("--batch-size", type=_int_at_least(1), help="rows per model call (default: measured)")
    _image_args(p)
    p.add_argument("--sample-rate", type=_int_at_least(1), help="audio: the rate the model expects (never resampled)")
    p.add_argument("--audio-features", choices=["time_frequency", "time"], default="time_frequency",
                   help="audio: STFT cells or time segments (default: %(default)s)")
    p.add_argument("--time-segments", type=_int_at_least(1), help="audio: time slots (default 5, or 10 for time)")
    p.add_argument("--freq-segments", type=_int_at_least(1), default=4, help="audio: frequency bands (default: 4)")
    p.add_argument("--n-fft", type=_int_at_least(2), default=512, help="audio: STFT size (default: %(default)s)")
    p.add_argument("--tokenizer", metavar="NAME_OR_FOLDER",
                   help="text: a Hugging Face tokenizer, offline (a local folder or a cached name)")
    p.add_argument("--vocab", type=Path, metavar="FILE",
                   help="text: split on whitespace, ids from this vocabulary (one token per line, or JSON)")
    p.add_argument("--lowercase", action="store_true", help="text with --vocab: lower-case unknown words")
    p.set_defaults(parser=p)


def _add_dataset(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain-dataset", help="explain a folder of images (ImageFolder layout) into resumable "
                                               "shards (torchlime.dataset)")
    _model_args(p)
    p.add_argument("folder", metavar="FOLDER", help="class sub-folders of PNG/JPEG images; label = class index")
    p.add_argument("--out", type=Path, required=True, help="result folder (run again to resume)")
    _explain_args(p, "label", "label (each image's class, default), top, a class index, topK or all")
    p.add_argument("--batch-size", type=_int_at_least(1), default=32,
                   help="images per explanation call (default: %(default)s)")
    p.add_argument("--model-batch-size", type=_int_at_least(1), help="rows per model call (default: measured)")
    p.add_argument("--shard-size", type=_int_at_least(1), default=1024,
                   help="explanations per shard file (default: %(default)s)")
    p.add_argument("--max-memory", type=_memory,
                   help="CUDA memory of a chunk: a fraction of the device (<= 1) or bytes")
    p.add_argument("--workers", type=_int_at_least(0), default=0, help="image-reading worker processes")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _image_args(p)
    p.set_defaults(parser=p)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="time an explanation of your model against its forward floor")
    _model_args(p)
    p.add_argument("--input-shape", type=_int_at_least(1), nargs=3, required=True, metavar=("C", "H", "W"),
                   help="shape of one input")
    p.add_argument("--batch", type=_int_at_least(1), default=1, help="inputs per explanation (default: 1)")
    p.add_argument("--n-samples", type=_int_at_least(2), default=1000, help="samples per input (default: 1000)")
    p.add_argument("--n-segments", type=_int_at_least(2), default=64, help="grid cells (default: 64)")
    p.add_argument("--reps", type=_int_at_least(1), default=3, help="timed runs, median reported (default: 3)")
    p.add_argument("--seed", type=_int_at_least(0), default=0)
    p.add_argument("--json", type=Path, metavar="FILE", help="write every figure to this JSON file")
    p.set_defaults(parser=p)


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
    _add_explain(sub)
    _add_dataset(sub)
    _add_bench(sub)
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


def _runner(command: str) -> Callable[[argparse.Namespace], int]:
    if command == "explain":
        from ._cli_explain import run_explain

        return run_explain
    if command == "explain-dataset":
        from ._cli_dataset import run_explain_dataset

        return run_explain_dataset
    from ._cli_bench import run_bench

    return run_bench


def _run(args: argparse.Namespace) -> int:
    """Run a command of files and models; every failure becomes one line (exit 2, 1 or 130)."""
    from ._cli_common import CliError, short_error

    parser = args.parser
    try:
        return _runner(args.command)(args)
    except (CliError, ValueError, TypeError, ImportError, OSError) as err:
        parser.error(short_error(err, 500))
    except KeyboardInterrupt:
        resume = " (finished shards are kept: run the same command again to resume)" \
            if args.command == "explain-dataset" else ""
        print(f"{parser.prog}: interrupted{resume}", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a bug: one line unless TORCHLIME_DEBUG asks for the traceback
        if os.environ.get("TORCHLIME_DEBUG"):
            raise
        print(f"{parser.prog}: internal error: {type(err).__name__}: {short_error(err, 500)} "
              f"(set TORCHLIME_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
    return 1  # pragma: no cover - parser.error exits


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit code (argparse exits with 2 on usage errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args, args.parser)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
