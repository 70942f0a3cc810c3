"""Shared benchmark helpers: the test image, models, timing and the result header."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator

import torch

from torchlime.cli.bench import device_name  # one definition, shared with `torchlime bench`

RESULTS = Path(__file__).resolve().parent / "results"
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _git(*args: str) -> str:
    """A git command's output in this repository ("" where git or the repository is missing)."""
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent).stdout
    except OSError:
        return ""


def header(device: torch.device) -> dict:
    """Machine, versions, commit (and the tracked files that differ from it) and date for every result file."""
    modified = _git("status", "--porcelain", "--untracked-files=no")
    return dict(
        device=device_name(device),
        device_type=device.type,
        torch=torch.__version__,
        python=platform.python_version(),
        commit=_git("rev-parse", "HEAD").strip() or "unknown",
        modified_files=[line[3:] for line in modified.splitlines() if line.strip()],
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call, synchronised on CUDA."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def summary(times: list[float]) -> dict:
    """Median, min, max and all runs."""
    return dict(median=statistics.median(times), min=min(times), max=max(times), runs=times)


def test_image(size: int = 224) -> torch.Tensor:
    """scikit-image's astronaut, resized with antialiasing: float (1, 3, size, size) in [0, 1]."""
    from skimage import data

    img = torch.from_numpy(data.astronaut()).permute(2, 0, 1).float().div(255).unsqueeze(0)
    return torch.nn.functional.interpolate(
        img, size=(size, size), mode="bilinear", antialias=True, align_corners=False
    ).clamp(0, 1)


def vision_model(name: str, device: torch.device) -> torch.nn.Module:
    """A torchvision classifier with random weights (speed does not depend on them), eval mode."""
    import torchvision

    torch.manual_seed(0)
    kwargs = dict(weights=None)
    if name == "inception_v3":
        kwargs.update(aux_logits=False, init_weights=False)
    return getattr(torchvision.models, name)(**kwargs).eval().to(device)


class Normalize(torch.nn.Module):
    """``model((x - mean) / std)``: what a model trained on normalised images sees. The anchors
    (lime, captum) and the forward floors run this wrapper; torchlime gets ``normalize=`` instead,
    which it fuses into the perturbation pass (the user's way).
    """

    def __init__(self, model: torch.nn.Module, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model((x - self.mean.to(x)) / self.std.to(x))


def perturbed_images(
    image: torch.Tensor, segments: torch.Tensor, n: int, seed: int = 0, fill: str = "mean"
) -> torch.Tensor:
    """The N perturbed images of one (1, C, H, W) image, built beforehand for a forward floor:
    Bernoulli(1/2) masks over the segments (row 0 all kept), hidden segments filled with their
    mean colour (lime's ``hide_color=None``) or zero. Plain torch, independent of torchlime.
    The masks are drawn on the CPU (the same for every device); the images are built on the
    image's device.
    """
    dev = image.device
    seg = segments.reshape(-1).long().to(dev)
    ids, inverse = seg.unique(return_inverse=True)
    f = ids.numel()
    g = torch.Generator().manual_seed(seed)
    masks = torch.rand(n, f, generator=g) < 0.5
    masks[0] = True
    masks = masks.to(dev)
    flat = image.reshape(image.shape[1], -1)
    if fill == "mean":
        sums = torch.zeros(image.shape[1], f, dtype=flat.dtype, device=dev).index_add_(1, inverse, flat)
        base = (sums / torch.bincount(inverse, minlength=f).clamp_min(1))[:, inverse]
    else:
        base = torch.zeros_like(flat)
    keep = masks[:, inverse].unsqueeze(1)  # (N, 1, H*W)
    return torch.where(keep, flat, base).view(n, *image.shape[1:])


def normalized(images: torch.Tensor, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> torch.Tensor:
    """``(images - mean) / std`` per channel (dim 1): what a model sees behind ``normalize=``."""
    m = torch.tensor(mean, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=images.dtype, device=images.device).view(1, -1, 1, 1)
    return (images - m) / s


def formatted(rows: torch.Tensor, model) -> torch.Tensor:
    """``rows`` in the dtype and memory layout torchlime writes its chunks in for ``model``
    (``torchlime.stages.forward.model.input_format``: an ``Accelerated`` wrapper's autocast dtype and
    channels-last, a module's floating dtype, channels-last 4-D input for conv nets on the CPU),
    so a floor forwards what torchlime forwards. The result is an inference tensor, like torchlime's
    chunks (built under ``torch.inference_mode()``): a compiled model then runs the floor and
    torchlime on one graph (normal tensors would compile a second). ``rows`` built under inference
    mode are not copied when the format leaves them as they are.
    """
    from torchlime.stages.forward.model import input_format

    fmt = input_format(model, rows[:1])
    with torch.inference_mode():
        out = rows.to(fmt.dtype) if fmt.dtype is not None else rows
        if fmt.channels_last and out.ndim == 4:
            out = out.contiguous(memory_format=torch.channels_last)
        if not out.is_inference():  # a normal tensor the format left unchanged
            out = out.clone(memory_format=torch.preserve_format)
    return out


def forward_rows(
    model: Callable, rows: torch.Tensor, chunk: int, total: int | None = None, softmax: bool = False
) -> Callable[[], None]:
    """A function that forwards ``total`` rows (default: all of ``rows``) through ``model`` in chunks
    of ``chunk`` under ``torch.inference_mode()``, cycling over the prebuilt ``rows``: a forward floor.
    """
    total = rows.shape[0] if total is None else total

    def run() -> None:
        with torch.inference_mode():
            done = 0
            while done < total:
                start = done % rows.shape[0]
                part = rows[start : start + min(chunk, total - done)]
                out = model(part)
                if softmax:
                    out.float().softmax(1)
                done += part.shape[0]

    return run


def best_chunk(
    make: Callable[[int], Callable[[], object]], sizes, device: torch.device, repeats: int = 2
) -> tuple[int, dict[int, float]]:
    """The fastest of a few chunk sizes: ``make(size)`` gives the function to time; each size runs
    once to warm up, then ``repeats`` times; returns (best size, {size: min seconds}).
    """
    seconds = {}
    for size in sorted(set(int(s) for s in sizes)):
        fn = make(size)
        fn()
        seconds[size] = min(timed(fn, device) for _ in range(repeats))
    return min(seconds, key=seconds.get), seconds


def warm_up(explain: Callable[[], None], store: dict, least: int = 3, most: int = 8) -> int:
    """Call ``explain`` until the chunk size torchlime measures has settled (the same size in two
    calls in a row, at least ``least`` calls: this also covers compilation, cuDNN autotuning and
    graph capture); returns that size.
    """
    sizes: list[int] = []
    for _ in range(most):
        explain()
        sizes.append(store["meta"]["batch_size"])
        if len(sizes) >= max(least, 2) and sizes[-1] == sizes[-2]:
            break
    return sizes[-1]


def goal(description: str, value: float | None, limit: float, kind: str = "<=", quick: bool = False) -> dict:
    """A goal stored next to a figure: what it asks, the figure, and whether this run is within it
    (None for smoke runs and missing figures: a quick run is not a measurement).
    """
    within = None
    if value is not None and not quick:
        within = bool(value <= limit) if kind == "<=" else bool(value >= limit)
    return dict(goal=description, limit=limit, kind=kind, value=value, within_goal=within)


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):
        return None


def optional_module(name: str):
    """``(module, None)`` or ``(None, why)`` for a package a benchmark can do without (lime, captum)."""
    import importlib

    try:
        return importlib.import_module(name), None
    except Exception as err:  # noqa: BLE001 - a broken install counts as missing
        return None, f"{type(err).__name__}: {err}"


def smoke_threads(args, device: torch.device) -> None:
    """One torch thread for smoke runs on the CPU (unless ``args.threads`` says otherwise): on a
    small shared machine two spinning threads can make a tiny run many times slower.
    """
    threads = getattr(args, "threads", None)
    if threads:
        torch.set_num_threads(threads)
    elif getattr(args, "quick", False) and device.type == "cpu":
        torch.set_num_threads(1)


def device_arg(value: str) -> torch.device:
    """``--device`` as a torch.device, with a clear error when CUDA is asked for and missing."""
    device = torch.device(value)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {value}: torch.cuda.is_available() is False (use --device cpu for a smoke run)")
    return device


def common_args(parser, default_device: str = "cpu"):
    """``--device``, ``--out FOLDER`` (default ``results/``) and ``--quick`` for every benchmark."""
    parser.add_argument("--device", default=default_device)
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="folder the JSON result is written into (default: %(default)s)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: a tiny run, not a result")
    return parser


def vision_args(parser, model: str, size: int):
    """``--threads``, ``--model`` and ``--size`` of the torchvision benchmarks (quick runs: resnet18 at 64)."""
    threads = "torch CPU threads (default: torch's; quick on CPU: 1)"
    parser.add_argument("--threads", type=int, default=None, help=threads)
    parser.add_argument("--model", default=None, help=f"torchvision model (default {model}; quick: resnet18)")
    parser.add_argument("--size", type=int, default=None, help=f"image side (default {size}; quick: 64)")
    return parser


def size_defaults(args, defaults: dict, quick: bool | None = None):
    """Fill every option left at None with its (quick, full) default: ``defaults`` maps an option
    name to the pair; ``quick`` defaults to ``args.quick``. Returns ``args``.
    """
    quick = args.quick if quick is None else quick
    for key, (small, full) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, small if quick else full)
    return args


def write(name: str, payload: dict, out: Path = RESULTS) -> Path:
    """Writes ``payload`` as indented JSON to ``out / name`` (default: ``results/``); returns the path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


class Stopped(BaseException):
    """Raised inside :func:`until_stopped` by SIGTERM (``timeout``'s signal: run.sh's time limits).
    A BaseException, so that the benchmarks' ``except Exception`` around one variant does not
    swallow it.
    """


@contextlib.contextmanager
def until_stopped(record: dict) -> Iterator[None]:
    """Runs the block until it ends or SIGTERM / Ctrl-C stops it; a stop ends only the block, so
    the benchmark goes on to write what it finished. ``record["stopped_early"]`` names the signal
    (None when the block ran to its end); :func:`exit_if_stopped` then exits with status 124 (the
    status ``timeout`` gives), after the JSON is written.
    """

    def stop(signum, frame) -> None:  # noqa: ARG001 - the signal module's signature
        raise Stopped(signal.Signals(signum).name)

    record["stopped_early"] = None
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    except (Stopped, KeyboardInterrupt) as err:
        record["stopped_early"] = str(err) or type(err).__name__
        print(f"stopped early ({record['stopped_early']}): writing what finished", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_if_stopped(record: dict) -> None:
    """Exit status 124 when :func:`until_stopped` was stopped: a runner sees the part as unfinished
    although its JSON (with ``stopped_early`` set) was written.
    """
    if record.get("stopped_early"):
        raise SystemExit(124)
