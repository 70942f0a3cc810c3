"""Peak memory of one explanation as a function of the chunk size and the input size.

A small conv net with random weights (Conv2d(3, 16, 3, padding 1)-ReLU-Conv2d(16, 32, 3, stride 2)-
ReLU-AdaptiveAvgPool-Linear(32, 10), eval mode), whose activations grow with the image: one
(1, 3, H, W) image, an 8 x 8 grid of features (``torchlime.image.segments.grid``), N = 1024
samples, explained with ``batch_size=c`` (rows per model call) for every H and c, one child
process per measurement. On the CPU the growth of the child's peak resident set size
(``ru_maxrss``) during the call is reported; on CUDA the growth of
``torch.cuda.max_memory_allocated`` (the engine's own ``meta["peak_memory"]``, which follows that
peak across the resets of its chunk-size bookkeeping). Before the measured call each child runs a
tiny explanation (4 samples, 2 rows per call) of the same image, so that the lazy set-up of torch and
its kernels is not counted.

Beside each figure: the bytes of one row's input and of one row's activations (the sum of the output
sizes of every leaf module on one row, by forward hooks), and the model-free estimate
``c * (input + activation bytes per row)``, with the measured peak growth over that estimate; and a
second estimate, ``c * live bytes per row``: the row plus the input and output of the layer at which a
chain of layers under ``inference_mode`` holds the most at once (here the first ReLU: the row, the
first conv's output and the ReLU's output).

    python benchmarks/bench_chunk_memory.py                       # H = 64, 128, 224; c = 16 .. 1024
    python benchmarks/bench_chunk_memory.py --device cuda
    python benchmarks/bench_chunk_memory.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.common import common_args, device_arg, header, load_average, smoke_threads, write

MIB = 2**20

CHILD = r"""
import json, resource, sys, time
import torch
from benchmarks.bench_chunk_memory import conv_net
from torchlime import explain
from torchlime.image.segments import grid
size, chunk, n, threads, cells, device = (*map(int, sys.argv[1:6]), torch.device(sys.argv[6]))
torch.set_num_threads(threads)
model = conv_net().to(device)
x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(0)).to(device)
feats = grid(x, cells, cells).unsqueeze(1)  # (1, 1, H, W): one map for the 3 channels
explain(model, x, feats, n_samples=4, batch_size=2, generator=0)  # warm-up: torch's lazy set-up
cuda = device.type == "cuda"
if cuda:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
exp = explain(model, x, feats, n_samples=n, batch_size=chunk, generator=0)
coef = exp.coef.cpu()
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
row = dict(seconds=seconds, rss_growth_mib=(peak - start) / 1024, peak_rss_mib=peak / 1024,
           batch_size_used=exp.meta["batch_size"], finite=bool(torch.isfinite(coef).all()))
if cuda:
    row.update(memory="cuda_max_memory_allocated", peak_growth_mib=exp.meta["peak_memory"] / 2 ** 20)
else:
    row.update(memory="ru_maxrss", peak_growth_mib=row["rss_growth_mib"])
print(json.dumps(row))
"""


def conv_net() -> torch.nn.Module:
    """The benchmark's model: random weights (seed 0), eval mode; activations scale with H x W."""
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).eval()


def row_bytes(size: int) -> tuple[int, int, int]:
    """(input, activation, live) bytes of one (1, 3, size, size) float32 row, by forward hooks on every
    leaf module: the activations are the summed output sizes; live is what a chain of layers under
    ``inference_mode`` holds at once at its worst layer: the row (kept by the caller throughout) plus
    that layer's input (unless it is the row) and output.
    """
    model, outs, live = conv_net(), [0], [0]
    x = torch.zeros(1, 3, size, size)

    def nbytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    def hook(_module, inputs, out) -> None:
        outs[0] += nbytes(out)
        held = nbytes(out) + sum(nbytes(t) for t in inputs if isinstance(t, torch.Tensor) and t is not x)
        live[0] = max(live[0], held)

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    with torch.inference_mode():
        model(x)
    for h in handles:
        h.remove()
    return nbytes(x), outs[0], nbytes(x) + live[0]


def measure(size: int, chunk: int, n: int, threads: int, cells: int, device: torch.device) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(size), str(chunk), str(n), str(threads), str(cells), str(device)],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=Path(__file__).resolve().parents[1],
    )
    if proc.returncode != 0:
        return dict(error=proc.stderr.strip().splitlines()[-1] if proc.stderr else f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="image sides H = W (default 64 128 224)")
    ap.add_argument("--chunks", type=int, nargs="+", default=None, help="batch_size values (default 16 64 256 1024)")
    ap.add_argument("--n-samples", type=int, default=None, help="default 1024; quick: 64")
    ap.add_argument("--cells", type=int, default=8, help="grid of cells x cells features (default 8: 64 features)")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads in each child (default: torch's; quick on CPU: 1)"
    )
    args = ap.parse_args()
    device = device_arg(args.device)
    smoke_threads(args, device)
    sizes = args.sizes or ([32] if args.quick else [64, 128, 224])
    chunks = args.chunks or ([16, 64] if args.quick else [16, 64, 256, 1024])
    n = args.n_samples or (64 if args.quick else 1024)
    out = dict(
        header(device),
        benchmark="bench_chunk_memory",
        quick=args.quick,
        n_samples=n,
        features=args.cells**2,
        torch_threads=torch.get_num_threads(),
        load_average=load_average(),
        memory="cuda_max_memory_allocated" if device.type == "cuda" else "ru_maxrss",
        model="Conv2d(3,16,3,p1)-ReLU-Conv2d(16,32,3,s2)-ReLU-AdaptiveAvgPool2d(1)-Linear(32,10), fp32",
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
        results=[],
    )
    for size in sizes:
        input_bytes, act_bytes, live_bytes = row_bytes(size)
        for chunk in chunks:
            got = measure(size, chunk, n, torch.get_num_threads(), args.cells, device)
            estimate = chunk * (input_bytes + act_bytes)
            row = dict(
                size=size,
                chunk=chunk,
                input_bytes_per_row=input_bytes,
                activation_bytes_per_row=act_bytes,
                live_bytes_per_row=live_bytes,
                activation_over_input=act_bytes / input_bytes,
                estimate_mib=estimate / MIB,
                live_estimate_mib=chunk * live_bytes / MIB,
                **got,
            )
            if "peak_growth_mib" in got:
                row["measured_over_estimate"] = got["peak_growth_mib"] * MIB / estimate
                row["measured_over_live"] = got["peak_growth_mib"] / row["live_estimate_mib"]
            out["results"].append(row)
            print(json.dumps(row), flush=True)
    name = f"chunk_memory_{device.type}{'_quick' if args.quick else ''}.json"
    print(f"wrote {write(name, out, args.out)}")


if __name__ == "__main__":
    main()
