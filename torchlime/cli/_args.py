"""Argument types and option groups shared by the ``torchlime`` commands.

Usage errors are one line on stderr and exit code 2 (``Parser``), never a traceback. One name, one
meaning, in every command: ``--batch-size`` is rows per model call (the engine's ``batch_size``),
``--inputs-per-step`` inputs per explanation call.
"""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from typing import Callable, Union


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``torchlime demo: error: ...``), exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    return parse


def memory(text: str) -> float | int:
    """``--max-memory``: a fraction of the device in (0, 1], or bytes (an integer > 1, e.g. 4e9)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1] or a number of bytes, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1] or a number of bytes, got {text}")
    return value if value <= 1 else int(value)


def float_(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


SEGMENTERS = ["slic", "grid", "quickshift", "felzenszwalb", "skimage_slic"]


def file_arg(p: argparse.ArgumentParser, flag: str, help: str) -> None:
    """An option naming one file (``FILE``, a ``Path``): ``--weights``, ``--vocab``, ``--json``, ``--names``."""
    p.add_argument(flag, type=Path, metavar="FILE", help=help)


def model_command(sub: argparse._SubParsersAction[Parser], name: str, help: str) -> Parser:
    """A sub-command that runs the user's model: its parser, with ``MODEL``, ``--weights`` and ``--device``."""
    p = sub.add_parser(name, help=help)
    p.add_argument(
        "model",
        metavar="MODEL",
        help=(
            "a TorchScript file, an ExportedProgram file (torch.export.save) or module:factory. TorchScript files "
            "and module:factory run code: use only ones you trust. An ExportedProgram file is checked first and "
            "refused if it holds a pickle that is not weights-only, or code in its shape expressions, guards or names"
        ),
    )
    file_arg(p, "--weights", "state dict for MODEL module:factory (torch.load with weights_only=True)")
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N (default: auto)")
    return p


def explain_args(p: argparse.ArgumentParser, target: str, target_help: str) -> None:
    """The engine's options of a command that explains: samples, target, seed, softmax, rows per model call."""
    p.add_argument(
        "--n-samples", type=int_at_least(2), default=1000, help="perturbed samples per input (default: %(default)s)"
    )
    p.add_argument("--target", default=target, help=target_help)
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed of the masks (default: %(default)s)")
    p.add_argument("--softmax", action="store_true", help="explain probabilities (softmax of the outputs)")
    p.add_argument("--batch-size", type=int_at_least(1), help="rows per model call (default: the engine's rule)")


def n_segments_default() -> Union[int, str]:
    """``explain_image``'s own default ``n_segments``: the command line asks for the same."""
    from torchlime.image import explain_image

    default: Union[int, str] = inspect.signature(explain_image).parameters["n_segments"].default
    return default


def fill(text: str) -> Union[float, str]:
    """``--baseline``: a fill name of the engine ("mean", "blur", ...) or a number."""
    from torchlime.stages.perturb.fills import NAMES

    if text in NAMES:
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or one of {sorted(NAMES)}, got {text!r}") from None


def segment_count(text: str) -> Union[int, str]:
    """``--n-segments``: "auto" (from the sample budget and the image size, as ``explain_image``) or an int >= 2."""
    return "auto" if text == "auto" else int_at_least(2)(text)


def image_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--segments",
        choices=SEGMENTERS,
        default="slic",
        help="image segmentation (default: %(default)s; grid: about --n-segments cells)",
    )
    p.add_argument(
        "--n-segments",
        type=segment_count,
        default=n_segments_default(),
        help="segments asked for (slic, grid): an int, or auto (from --n-samples and the image size; "
        "default: %(default)s, as explain_image)",
    )
    p.add_argument("--size", type=int_at_least(1), nargs=2, metavar=("H", "W"), help="resize every image to H x W")
    p.add_argument(
        "--baseline",
        type=fill,
        default="mean",
        help="what hidden segments show: mean (each segment's mean colour, lime's; the default), blur, "
        "or a number (e.g. 0: black)",
    )
    p.add_argument("--channels", type=int, choices=[1, 3], default=3, help="read images as RGB (3) or grey (1)")
    p.add_argument("--mean", type=float_, nargs="+", help="per-channel mean the model normalises with")
    p.add_argument("--std", type=float_, nargs="+", help="per-channel std the model normalises with")
