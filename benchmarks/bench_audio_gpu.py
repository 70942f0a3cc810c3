"""Audio explanations per second for the embedded spectrogram CNN, against its forward-pass floor.

B clips (129 x 63 log spectrograms) are explained with ``explain_spectrogram``
and the SLIME preset (5 x 4 grid, Bernoulli 1/2, cosine kernel of width 0.25,
ridge, N = 8192) in one chunked batched pass; the floor is the bare forward
pass of the same B·N rows at the same chunk size under ``inference_mode`` (the
inputs built once, outside the timing). Optionally also the waveform path
(``explain_waveform(features="time_frequency")``: masked STFT -> istft ->
front end -> CNN) against its own floor (istft + model on prebuilt STFTs).

    python benchmarks/bench_audio_gpu.py                        # CUDA: B=64, N=8192, 10 repetitions
    python benchmarks/bench_audio_gpu.py --quick --out /tmp/quick   # CPU smoke run: B=2, 3 repetitions
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, header, summary, timed, write  # noqa: E402

from torchlime.audio import data as audio_data  # noqa: E402
from torchlime.audio import explain_spectrogram, explain_waveform  # noqa: E402
from torchlime.audio.models import load_audio_model  # noqa: E402
from torchlime.audio.stft import istft, stft  # noqa: E402


def floor(model: Callable, example: torch.Tensor, n_rows: int, chunk: int,
          prepare: Callable[[torch.Tensor], torch.Tensor] = lambda x: x) -> Callable[[], None]:
    """A function running ``model(prepare(rows))`` over n_rows rows in chunks (inputs prebuilt)."""
    rows = example.unsqueeze(0).expand(chunk, *example.shape).contiguous()

    def run() -> None:
        with torch.inference_mode():
            for start in range(0, n_rows, chunk):
                model(prepare(rows[: min(chunk, n_rows - start)]))

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64, help="clips explained together (B)")
    parser.add_argument("--n-samples", type=int, default=8192)
    parser.add_argument("--chunk", type=int, default=None, help="rows per model call (default: 4096 on CUDA, "
                                                                  "the engine's default on CPU)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--waveform", action="store_true", help="also time the waveform (STFT/istft) path")
    parser.add_argument("--quick", action="store_true", help="CPU smoke run: B=2, 3 repetitions, waveform too")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON result "
                        "(smoke runs: somewhere outside results/)")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.reps, args.device, args.waveform = 2, 3, "cpu", True
    dev = torch.device(args.device)
    model = load_audio_model(dev)
    waves = audio_data.make_clips(args.batch, seed=99).waves.to(dev)
    specs = audio_data.log_spectrogram(waves)
    n_rows = args.batch * args.n_samples
    chunk = args.chunk or (4096 if dev.type == "cuda" else None)
    if chunk is None:
        from torchlime.forward import default_batch_size

        chunk = default_batch_size(specs, n_rows)

    def explain() -> None:
        explain_spectrogram(model, specs, preset="slime", n_samples=args.n_samples, batch_size=chunk)

    results: dict[str, dict] = {}
    for name, fn in (("floor", floor(model, specs[0], n_rows, chunk)), ("explain", explain)):
        fn()  # warm-up
        results[name] = summary([timed(fn, dev) for _ in range(args.reps)])
    if args.waveform:
        wave_model = load_audio_model(dev, waveform=True)
        n_fft, hop = audio_data.N_FFT, audio_data.HOP_LENGTH
        spec0 = stft(waves[0], n_fft, hop, n_fft)

        def explain_wave() -> None:
            explain_waveform(wave_model, waves, sample_rate=audio_data.SAMPLE_RATE, features="time_frequency",
                             n_fft=n_fft, hop_length=hop, preset="slime", n_samples=args.n_samples,
                             batch_size=chunk)

        wave_floor = floor(wave_model, spec0, n_rows, chunk, lambda s: istft(s, n_fft, hop, n_fft, waves.shape[-1]))
        for name, fn in (("floor_waveform", wave_floor), ("explain_waveform", explain_wave)):
            fn()
            results[name] = summary([timed(fn, dev) for _ in range(args.reps)])
    rates = {k: args.batch / v["median"] for k, v in results.items()}
    payload = dict(header(dev), benchmark="bench_audio_gpu", model="SpecNet (torchlime/audio/weights/audio_cnn.pt)",
                   input_shape=list(specs.shape[1:]), batch=args.batch, n_samples=args.n_samples, chunk=chunk,
                   repetitions=args.reps, preset="slime", seconds=results,
                   explanations_per_second={k: v for k, v in rates.items() if k.startswith("explain")},
                   floor_explanations_per_second={k: v for k, v in rates.items() if k.startswith("floor")},
                   explain_over_floor=results["explain"]["median"] / results["floor"]["median"],
                   explain_over_floor_min=results["explain"]["min"] / results["floor"]["min"])
    if args.waveform:
        payload["explain_waveform_over_floor"] = (results["explain_waveform"]["median"]
                                                  / results["floor_waveform"]["median"])
        payload["explain_waveform_over_floor_min"] = (results["explain_waveform"]["min"]
                                                      / results["floor_waveform"]["min"])
    if dev.type == "cpu":
        payload["note"] = ("CPU run on a shared 2-core machine (other jobs running): proves the script works; "
                           "the numbers are not a GPU speed claim")
        payload["load_average"] = list(os.getloadavg())
    name = f"audio_gpu_{dev.type}{'_quick' if args.quick else ''}.json"
    print(f"wrote {write(name, payload, args.out)}")
    for k, v in results.items():
        print(f"{k:>18}: {v['median']:.3f} s  ({args.batch / v['median']:.2f} explanations/s)")


if __name__ == "__main__":
    main()
