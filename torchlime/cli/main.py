"""The ``torchlime`` command line.

Commands: ``demo`` (the embedded model), ``explain`` (image, audio or text files with your
model), ``explain-dataset`` (a folder of images in resumable shards), ``show`` (pictures of the
explanations a result folder stores), ``summarize`` (the importance of every feature per class over a
result folder, and SP-LIME's pick) and ``bench`` (your model's explanation against its forward
floor), one module each with ``add_parser`` and ``run``. MODEL is
a TorchScript file, an ExportedProgram file or ``module:factory`` with ``--weights`` (``_model``).

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
import sys
from typing import Optional, Protocol, Sequence

from torchlime.cli import bench, demo, explain, explain_dataset, show, summarize
from torchlime.cli._args import Parser
from torchlime.cli._common import CliError, short_error, size_usage
from torchlime.dataset import FolderLockedError
from torchlime.engine.sizes import SizeError
from torchlime.stages.forward.errors import ModelCallError


class Command(Protocol):
    """A command's module: ``add_parser(sub)`` adds its options, ``run(args)`` runs it."""

    def add_parser(self, sub: argparse._SubParsersAction[Parser]) -> None:
        """Add the command's parser and options to ``sub``."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command; returns the exit code."""


#: command name -> its module (``add_parser(sub)`` and ``run(args) -> exit code``), in ``--help`` order
COMMANDS: dict[str, Command] = {
    "demo": demo,
    "explain": explain,
    "explain-dataset": explain_dataset,
    "show": show,
    "summarize": summarize,
    "bench": bench,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``torchlime`` command."""
    from torchlime import __version__

    parser = Parser(prog="torchlime", description="Fast, batched, device-side LIME for PyTorch.")
    parser.add_argument("--version", action="version", version=f"torchlime {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    """Run a command of files and models; every failure becomes one line (exit 2, 1 or 130)."""
    parser = args.parser
    try:
        return COMMANDS[args.command].run(args)
    except SizeError as err:  # a request no memory could hold: the option to change, not the model
        parser.error(short_error(size_usage(err, "the inputs"), 500))
    except (CliError, ValueError, TypeError, ImportError, OSError, FolderLockedError) as err:
        parser.error(short_error(err, 500))
    except ModelCallError as err:  # the user's model failed on what it was sent: a usage error, as `explain` says
        parser.error(f"the model failed: {short_error(err, 500)}")
    except KeyboardInterrupt:
        resume = (
            " (finished shards are kept: run the same command again to resume)"
            if args.command == "explain-dataset"
            else ""
        )
        print(f"{parser.prog}: interrupted{resume}", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a bug: one line unless TORCHLIME_DEBUG asks for the traceback
        if os.environ.get("TORCHLIME_DEBUG"):
            raise
        print(
            f"{parser.prog}: internal error: {type(err).__name__}: {short_error(err, 500)} "
            f"(set TORCHLIME_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    return 1  # pragma: no cover - parser.error exits


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the command line; returns the exit code (argparse exits with 2 on usage errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":  # the demo cleans up and reports its own errors
        return demo.run(args)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
