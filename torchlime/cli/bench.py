"""``torchlime bench MODEL --input-shape C H W``: how far is an explanation from the model's forward floor?

The explanation: ``explain_image`` of ``--inputs-per-step`` random inputs of that shape (one call)
over a grid of about ``--n-segments`` cells, ``--n-samples`` samples each, on the user's device. It
is run twice to warm up (the first call measures the chunk size and caches it), then ``--reps``
times; the figure is the median, each run synchronised (CUDA) before and after. The JSON figures
keep their names (``batch``: the inputs per step).

The floor: the same number of rows (inputs x samples) forwarded through the model under
``torch.inference_mode()`` in chunks, from one chunk that already lives on the device (so it is
the model's own cost, without building the perturbed inputs), at the best of a few chunk sizes
(the engine's chosen size among them); each size is warmed up once and timed ``--reps`` times
(median). The ratio explanation / floor is what torchlime adds on top of the forward passes
LIME needs anyway: 1.0 would be free.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypedDict

import torch

from torchlime.cli._args import Parser, file_arg, int_at_least, model_command
from torchlime.cli._common import (
    CliError,
    collected_warnings,
    model_failure,
    resolve_device,
    sync,
    write_json,
)
from torchlime.cli._model import load_model

if TYPE_CHECKING:
    from torchlime.engine.explanation import Explanation


def add_parser(sub: argparse._SubParsersAction[Parser]) -> None:
    """The ``bench`` command's options."""
    p = model_command(sub, "bench", "time an explanation of your model against its forward floor")
    p.add_argument(
        "--input-shape",
        type=int_at_least(1),
        nargs=3,
        required=True,
        metavar=("C", "H", "W"),
        help="shape of one input",
    )
    p.add_argument(
        "--inputs-per-step", type=int_at_least(1), default=1, help="inputs per explanation call (default: 1)"
    )
    p.add_argument("--n-samples", type=int_at_least(2), default=1000, help="samples per input (default: 1000)")
    p.add_argument("--n-segments", type=int_at_least(2), default=64, help="grid cells (default: 64)")
    p.add_argument("--reps", type=int_at_least(1), default=3, help="timed runs, median reported (default: 3)")
    p.add_argument("--seed", type=int_at_least(0), default=0)
    file_arg(p, "--json", "write every figure to this JSON file")
    p.set_defaults(parser=p)


CHUNKS = {"cpu": (16, 64, 256), "cuda": (128, 512, 2048)}


class Seconds(TypedDict):
    """Wall seconds of the timed explanation runs."""

    median: float
    runs: list[float]


class _Figures(TypedDict):
    """What ``bench`` measures (see the module docstring)."""

    device: str
    device_type: str
    torch: str
    input_shape: list[int]
    batch: int
    n_samples: int
    rows: int
    n_features: int
    reps: int
    engine_chunk: int
    explain_seconds: Seconds
    floor_seconds_by_chunk: dict[str, float]
    floor_chunk: int
    floor_seconds: float
    ratio: float
    explanations_per_second: float
    rows_per_second: float


class Figures(_Figures, total=False):
    """Every figure of ``bench``; the command adds the model and the warnings before writing ``--json``."""

    model: str
    warnings: list[str]


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's model and the torch thread count."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model} ({torch.get_num_threads()} torch threads)"


def timed(fn: Callable[[], object], device: torch.device) -> float:
    """Wall seconds of one call, synchronised before and after on CUDA."""
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - t0


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The model's first floating parameter or buffer dtype (float32 when it has none)."""
    for t in [*model.parameters(), *model.buffers()]:
        if t.is_floating_point():
            return t.dtype
    return torch.float32


def floor_fn(
    model: torch.nn.Module, shape: tuple[int, ...], rows: int, chunk: int, device: torch.device, dtype: torch.dtype
) -> Callable[[], None]:
    """Forward ``rows`` rows in chunks of ``chunk`` (one device-resident chunk, sliced for the last)."""
    x = torch.rand(chunk, *shape, generator=torch.Generator().manual_seed(1)).to(device, dtype)

    def run() -> None:
        with torch.inference_mode():
            for i in range(0, rows, chunk):
                model(x[: min(chunk, rows - i)])

    return run


def bench(
    model: torch.nn.Module,
    shape: tuple[int, int, int],
    inputs_per_step: int,
    n_samples: int,
    n_segments: int,
    reps: int,
    device: torch.device,
    seed: int = 0,
) -> Figures:
    """Time the explanation and the floor (see the module docstring); return every figure."""
    from torchlime.image import explain_image
    from torchlime.image.segments import resolve_segments

    c, h, w = shape
    dtype = model_dtype(model)
    images = torch.rand(inputs_per_step, c, h, w, generator=torch.Generator().manual_seed(seed)).to(device)
    segments = resolve_segments(images[:1], "grid", n_segments=n_segments)

    def explain() -> Explanation:
        exp = explain_image(model, images, segments=segments, n_samples=n_samples, generator=seed)
        exp.coef.sum().item()
        return exp

    exp = explain()  # warm-up: measures and caches the chunk size
    explain()
    times = [timed(explain, device) for _ in range(reps)]
    rows = inputs_per_step * n_samples
    engine_chunk = int(exp.run.batch_size or rows) if exp.run is not None else rows
    floors: dict[int, float] = {}
    for chunk in sorted({min(ch, rows) for ch in (*CHUNKS[device.type], engine_chunk)}):
        run = floor_fn(model, shape, rows, chunk, device, dtype)
        run()
        floors[chunk] = statistics.median(timed(run, device) for _ in range(reps))
    best = min(floors, key=floors.__getitem__)
    seconds = statistics.median(times)
    return Figures(
        device=device_name(device),
        device_type=device.type,
        torch=torch.__version__,
        input_shape=list(shape),
        batch=inputs_per_step,
        n_samples=n_samples,
        rows=rows,
        n_features=int(exp.n_features[0]),
        reps=reps,
        engine_chunk=engine_chunk,
        explain_seconds=dict(median=seconds, runs=times),
        floor_seconds_by_chunk={str(k): v for k, v in floors.items()},
        floor_chunk=best,
        floor_seconds=floors[best],
        ratio=seconds / floors[best],
        explanations_per_second=inputs_per_step / seconds,
        rows_per_second=rows / seconds,
    )


def run(args: argparse.Namespace) -> int:
    """The ``bench`` command: load, time, print the ratio, write ``--json``."""
    device = resolve_device(args.device)
    if args.json is not None and args.json.is_dir():
        raise CliError(f"--json {args.json} is a folder; give a file name")
    model, _ = load_model(args.model, args.weights, device)
    notes: list[str] = []
    try:
        with collected_warnings(notes):
            res = bench(
                model,
                tuple(args.input_shape),
                args.inputs_per_step,
                args.n_samples,
                args.n_segments,
                args.reps,
                device,
                args.seed,
            )
    except Exception as err:  # noqa: BLE001 - whatever the user's model raises becomes one line
        raise model_failure(err, f"inputs of shape {tuple(args.input_shape)}") from None
    res["model"], res["warnings"] = args.model, notes
    print(
        f"{args.model} on {res['device']}: {res['batch']} input(s) x {res['n_samples']} samples = {res['rows']} "
        f"rows, {res['n_features']} grid segments"
    )
    print(
        f"  explanation  {res['explain_seconds']['median']:.4f} s (median of {res['reps']}, engine chunk "
        f"{res['engine_chunk']})"
    )
    print(f"  forward floor {res['floor_seconds']:.4f} s (best chunk {res['floor_chunk']})")
    print(
        f"  ratio {res['ratio']:.2f}x the floor | {res['explanations_per_second']:.2f} explanations/s | "
        f"{res['rows_per_second']:.0f} rows/s"
    )
    if args.json is not None:
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json, res)
        except OSError as err:
            raise CliError(f"cannot write --json {args.json}: {err.strerror or err}") from None
        print(f"wrote {args.json}")
    return 0
