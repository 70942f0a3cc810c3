"""What every ``torchlime`` command shares: one-line errors, devices, targets, output folders.

A command raises ``CliError`` for anything the user can fix (a file that cannot be read, a
model that does not load, an option that does not fit the inputs); ``torchlime.cli`` prints it
as one line on stderr with exit code 2. The output folders are ``_output``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import warnings
from pathlib import Path
from typing import Iterator, Optional, Union

import torch

from torchlime.engine.sizes import SizeError

Target = Union[None, int, str]


#: the command-line option of an explanation argument a ``SizeError`` names
_OPTIONS = {"n_samples": "--n-samples", "target": "--target"}


class CliError(Exception):
    """A usage error of a command: printed as one line, exit code 2."""


def one_line(message: object, limit: int = 500) -> str:
    r"""``message`` on one line (newlines joined with " | "), at most ``limit`` characters.

    Example:
        >>> one_line("first\n  second\n")
        'first | second'
    """
    text = " | ".join(part.strip() for part in str(message).splitlines() if part.strip())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def model_failure(err: Exception, what: str) -> CliError:
    """The one-line usage error for an explanation that raised.

    torchlime's own argument checks (ValueError, TypeError) as they are, a request too large for the
    memory (``SizeError``) as the option to change (``--n-samples``), anything else as the model failing
    on ``what``, with a hint for exported programs, which accept only the input shapes they were
    exported with.
    """
    if isinstance(err, SizeError):
        return size_usage(err, what)
    if isinstance(err, (ValueError, TypeError)):
        return CliError(f"cannot explain {what}: {short_error(err)}")
    hint = (
        " (an exported program accepts only the input shape it was exported with: pass inputs of that "
        "shape, e.g. --size H W)"
        if "guard" in str(err).lower()
        else ""
    )
    msg = short_error(err)
    if not re.match(r"^\w+(Error|Exception|Failure): ", msg):
        msg = f"{type(err).__name__}: {msg}"
    return CliError(f"the model failed on {what}: {msg}{hint}")


def size_usage(err: SizeError, what: str) -> CliError:
    """A request too large for the memory as a usage error naming the option to change.

    Example:
        >>> str(size_usage(SizeError("`n_samples`=10 needs 2 TiB; use fewer samples", "n_samples", 10, 2, 1), "a.png"))
        'cannot explain a.png: --n-samples 10 needs 2 TiB; use fewer samples'
    """
    said = short_error(err)
    option = _OPTIONS.get(err.argument)
    if option is not None:
        said = said.replace(f"`{err.argument}`=", f"{option} ").replace(f"`{err.argument}`", option)
    return CliError(f"cannot explain {what}: {said}")


def short_error(err: BaseException, limit: int = 300) -> str:
    r"""One line of an exception from a model or a library.

    The last line of a traceback carried in the message (TorchScript, DataLoader workers), a C++
    source location prefix (``fn, file.cpp:61, ...``) removed.

    Example:
        >>> short_error(RuntimeError("Traceback of TorchScript ...\n  code\nRuntimeError: shapes differ\n"))
        'RuntimeError: shapes differ'
    """
    text = str(err).strip()
    if "Traceback" in text:  # the error line of the traceback (the last one), not what follows it
        lines = text.splitlines()
        errors = [line.strip() for line in lines if re.match(r"^\s*[\w.]+(Error|Exception|Failure): ", line)]
        text = errors[-1] if errors else lines[-1]
        text = re.sub(r"^[\w.]*CliError: ", "", text)
    text = re.sub(r"^\w+, \S+:\d+, ", "", text)
    return one_line(text, limit) or type(err).__name__


def resolve_device(name: str) -> torch.device:
    """``auto`` (CUDA when available, else CPU), ``cpu``, ``cuda`` or ``cuda:N``, checked.

    Raises:
        CliError: an unknown device, or CUDA asked for on a machine without it.
    """
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise CliError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise CliError(f"--device must be auto, cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise CliError(f"--device {name}: torch.cuda.is_available() is False on this machine; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise CliError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def parse_target(text: str, allow_label: bool = False) -> Target:
    """``--target``: ``top`` (the top class: None), an int class, ``topK``, ``all`` (or ``label``).

    Example:
        >>> parse_target("top"), parse_target("3"), parse_target("top2"), parse_target("all")
        (None, 3, 'top2', 'all')
    """
    if text == "top":
        return None
    if text in ("all",) or (allow_label and text == "label"):
        return text
    if text.startswith("top") and text[3:].isdigit() and int(text[3:]) >= 1:
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        kinds = "top, topK, all, label or a class index >= 0" if allow_label else "top, topK, all or a class index >= 0"
        raise CliError(f"--target must be {kinds}, got {text!r}")
    return value


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def collected_warnings(into: list[str]) -> Iterator[None]:
    """Record warnings (one line each, duplicates dropped) into ``into`` instead of printing them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        try:
            yield
        finally:
            for w in caught:
                text = one_line(f"{w.category.__name__}: {w.message}", 300)
                if text not in into:
                    into.append(text)


#: the most bytes ``DIR/dataset.json`` may hold (a file name per image: about 50 bytes each)
MAX_RECORD = 256 << 20


def read_record(folder: Path) -> dict[str, object]:
    """``DIR/dataset.json`` of explain-dataset (files, classes, how images were read), or {} without one.

    Read as untrusted input: a regular file (never through a link, never a named pipe), at most
    ``MAX_RECORD`` bytes, JSON nested at most 32 levels (``torchlime._util.files``).

    Raises:
        CliError: a ``dataset.json`` that cannot be read or parsed.
    """
    from torchlime._util.files import Folder

    try:
        with Folder.open(folder) as d:
            data = d.read_json("dataset.json", MAX_RECORD) if d.kind("dataset.json") is not None else {}
    except (OSError, ValueError) as err:
        raise CliError(f"cannot read {folder / 'dataset.json'}: {getattr(err, 'strerror', None) or err}") from None
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: object) -> Path:
    """Write ``data`` as indented JSON (with a final newline)."""
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def unique_stems(paths: list[Path], out: Optional[Path] = None, keep: tuple[Path, ...] = ()) -> list[str]:
    """A distinct file-name stem per path (``a``, ``a-2``, ... for repeated names).

    With ``out``, a stem is also skipped when a file the command must not overwrite (``paths``
    and ``keep``: the inputs, the model, its weights) lies in ``out`` under that stem (``out/a.png``
    for stem ``a``): every output is named ``stem.*`` (or ``stem-K.*``), so no input is ever
    overwritten by its own explanation.

    Example:
        >>> unique_stems([Path("x/a.png"), Path("y/a.png"), Path("b.wav")])
        ['a', 'a-2', 'b']
    """
    kept: list[str] = []  # names of the files to keep that lie in `out` (links as links, not their targets)
    if out is not None:
        folder = _place(out)
        kept = [_place(q).name for q in (*paths, *keep) if _place(q).parent == folder]
    taken: set[str] = set()
    seen: dict[str, int] = {}
    result = []
    for p in paths:
        base = p.stem or "input"
        while True:
            seen[base] = seen.get(base, 0) + 1
            stem = base if seen[base] == 1 else f"{base}-{seen[base]}"
            if stem not in taken and not any(n == stem or n.startswith(stem + ".") for n in kept):
                break
        taken.add(stem)
        result.append(stem)
    return result


def check_top_k(top_k: int, n_features: list[int], what: str, names: Optional[list[str]] = None) -> None:
    """Refuse ``--top-k`` above the number of features of any input (as ``torchlime demo`` does)."""
    fewest = min(n_features)
    if top_k > fewest:
        where = f" ({names[n_features.index(fewest)]})" if names else ""
        raise CliError(f"--top-k must be at most the number of {what} of every input ({fewest}{where}), got {top_k}")


def normalization(args: argparse.Namespace) -> Optional[tuple[tuple[float, ...], tuple[float, ...]]]:
    """``(mean, std)`` from ``--mean`` / ``--std`` (given together, one value per channel), or None."""
    mean, std = getattr(args, "mean", None), getattr(args, "std", None)
    if mean is None and std is None:
        return None
    if mean is None or std is None or len(mean) != len(std) or len(mean) != args.channels:
        raise CliError(
            f"--mean and --std go together, with one value per channel ({args.channels}) each; got "
            f"{len(mean or [])} and {len(std or [])} values"
        )
    if any(s <= 0 for s in std):
        raise CliError(f"--std values must be > 0, got {std}")
    return tuple(mean), tuple(std)


def check_outside(out: Path, folder: Path, out_name: str, folder_name: str) -> None:
    """Refuse an output folder at or inside an input folder (links not followed, ".." resolved).

    In an ImageFolder the output would become a class of its own on the next run, and pictures named
    ``I.png`` could overwrite its images.

    Raises:
        CliError: ``out`` is ``folder`` or lies inside it.
    """
    root, target = _place(folder), _place(out)
    if target == root or root in target.parents:
        raise CliError(
            f"{out_name} {out} lies inside {folder_name} {folder}: it would be read as a class folder, or its "
            f"files would overwrite the images; write elsewhere"
        )


def _place(path: Path) -> Path:
    """``path`` absolute, with ".." resolved and links not followed."""
    return Path(os.path.normpath(path.absolute()))
