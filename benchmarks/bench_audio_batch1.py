"""What one batched pass buys over the veracity study's batch size of 1, for one explanation.

The study's code explained each clip with N = 8192 model calls of batch size 1. This script
times, in one interleaved run on one clip of the embedded SpecNet, N = 8192, preset "slime":

* ``explain``: torchlime's whole explanation (masks, perturbation, chunked forward, weights, fit);
* ``floor``: the bare forward pass over the same 8192 prebuilt rows in torchlime's chunks;
* ``floor_batch1``: the same 8192 rows as 8192 model calls of one row each, the model work alone
  of the study's set-up (its perturbation and fitting would come on top, so this is a lower bound
  on that set-up's time).

    python benchmarks/bench_audio_batch1.py                       # results/audio_batch1_<device>.json
    python benchmarks/bench_audio_batch1.py --quick --out /tmp/q  # smoke run: N = 512, 1 repetition
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_audio_gpu import floor  # noqa: E402
from common import RESULTS, header, summary, timed, write  # noqa: E402

from torchlime.audio import data as audio_data  # noqa: E402
from torchlime.audio import explain_spectrogram  # noqa: E402
from torchlime.audio.models import load_audio_model  # noqa: E402
from torchlime.forward import default_batch_size  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-samples", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result")
    parser.add_argument("--quick", action="store_true", help="smoke run: N = 512, 1 repetition")
    args = parser.parse_args()
    if args.quick:
        args.n_samples, args.reps = 512, 1
    dev = torch.device(args.device)
    model = load_audio_model(dev)
    spec = audio_data.log_spectrogram(audio_data.make_clips(1, seed=99).waves).to(dev)  # (1, Fr, Tm)
    chunk = 4096 if dev.type == "cuda" else default_batch_size(spec, args.n_samples)

    def explain() -> None:
        explain_spectrogram(model, spec, preset="slime", n_samples=args.n_samples, batch_size=chunk)

    fns = {"explain": explain, "floor": floor(model, spec[0], args.n_samples, chunk),
           "floor_batch1": floor(model, spec[0], args.n_samples, 1)}
    for fn in fns.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(args.reps):  # interleaved, so load changes hit every variant alike
        for name, fn in fns.items():
            times[name].append(timed(fn, dev))
    seconds = {name: summary(t) for name, t in times.items()}
    med = {name: s["median"] for name, s in seconds.items()}
    payload = dict(header(dev), benchmark="bench_audio_batch1", model="SpecNet (torchlime/audio/weights/audio_cnn.pt)",
                   input_shape=list(spec.shape[1:]), n_samples=args.n_samples, chunk=chunk, repetitions=args.reps,
                   quick=args.quick, preset="slime", seconds=seconds,
                   explain_over_floor=med["explain"] / med["floor"],
                   floor_batch1_over_explain=med["floor_batch1"] / med["explain"],
                   load_average=list(os.getloadavg()))
    name = f"audio_batch1_{dev.type}{'_quick' if args.quick else ''}.json"
    print(f"wrote {write(name, payload, args.out)}")
    for k, v in med.items():
        print(f"{k:>13}: {v:.3f} s")
    print(f"explain / floor {payload['explain_over_floor']:.2f}; "
          f"batch-1 model calls alone / explain {payload['floor_batch1_over_explain']:.1f}")


if __name__ == "__main__":
    main()
