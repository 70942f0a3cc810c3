"""What one batched pass buys over the veracity study's batch size of 1, for one explanation.

The study's code explained each clip with N = 8192 model calls of batch size 1. This script
times, in one interleaved run on one clip of the embedded SpecNet, N = 8192, preset "slime":

* ``explain``: torchlime's whole explanation (masks, perturbation, chunked forward, weights, fit)
  at the chunk size torchlime measures (or ``--chunk``);
* ``floor``: the bare forward pass over the same 8192 prebuilt rows, at the fastest of a few
  chunk sizes (torchlime's among them);
* ``floor_batch1``: the same 8192 rows as 8192 model calls of one row each, the model work alone
  of the study's set-up (its perturbation and fitting would come on top, so this is a lower bound
  on that set-up's time).

    python benchmarks/bench_audio_batch1.py                                # results/audio_batch1_<device>.json
    python benchmarks/bench_audio_batch1.py --device cuda
    python benchmarks/bench_audio_batch1.py --quick --out /tmp/quick       # smoke run: N = 64, 1 repetition
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse

import torch

from torchlime.audio import explain_spectrogram
from torchlime.demo import audio_data
from torchlime.demo.audio_models import load_audio_model

from benchmarks.bench_audio_gpu import MODEL, floor, floor_sizes, measured_floor
from benchmarks.common import (
    common_args,
    device_arg,
    header,
    load_average,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    warm_up,
    write,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common_args(
        argparse.ArgumentParser(description=__doc__.splitlines()[0]),
        default_device="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's; quick on CPU: 1)"
    )
    parser.add_argument("--n-samples", type=int, default=None, help="default 8192; quick: 64")
    parser.add_argument("--reps", type=int, default=None, help="default 5; quick: 1")
    parser.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="rows per model call for torchlime and the floor "
        "(default: torchlime measures its own; the floor takes the fastest of a few)",
    )
    args = parser.parse_args(argv)
    size_defaults(args, dict(n_samples=(64, 8192), reps=(1, 5)))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dev = device_arg(args.device)
    smoke_threads(args, dev)
    model = load_audio_model(dev)
    spec = audio_data.log_spectrogram(audio_data.make_clips(1, seed=99).waves).to(dev)  # (1, Fr, Tm)
    store: dict = {}

    def explain() -> None:
        exp = explain_spectrogram(model, spec, preset="slime", n_samples=args.n_samples, batch_size=args.chunk)
        exp.coef.sum().item()
        store["meta"] = exp.meta

    chunk = warm_up(explain, store)
    sizes = [args.chunk] if args.chunk else [*floor_sizes(dev, args.quick), chunk]
    floor_fn, floor_info = measured_floor(model, spec[0], args.n_samples, sizes, dev)
    fns = {"explain": explain, "floor": floor_fn, "floor_batch1": floor(model, spec[0], args.n_samples, 1)}
    fns["floor_batch1"]()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.reps):  # interleaved, so load changes hit every variant alike
        for name, fn in fns.items():
            times[name].append(timed(fn, dev))
    seconds = {name: summary(t) for name, t in times.items()}
    med = {name: s["median"] for name, s in seconds.items()}
    payload = dict(
        header(dev),
        benchmark="bench_audio_batch1",
        model=MODEL,
        input_shape=list(spec.shape[1:]),
        n_samples=args.n_samples,
        torchlime_chunk=chunk,
        floor_chunk=floor_info,
        repetitions=args.reps,
        quick=args.quick,
        preset="slime",
        seconds=seconds,
        explain_over_floor=med["explain"] / med["floor"],
        floor_batch1_over_explain=med["floor_batch1"] / med["explain"],
        load_average=load_average(),
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    name = f"audio_batch1_{dev.type}{'_quick' if args.quick else ''}.json"
    print(f"wrote {write(name, payload, args.out)}")
    for k, v in med.items():
        print(f"{k:>13}: {v:.3f} s")
    print(
        f"explain / floor {payload['explain_over_floor']:.2f}; "
        f"batch-1 model calls alone / explain {payload['floor_batch1_over_explain']:.1f}"
    )


if __name__ == "__main__":
    main()
