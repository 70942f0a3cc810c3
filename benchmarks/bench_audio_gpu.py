"""Audio explanations per second for the embedded spectrogram CNN, against its forward-pass floor.

B clips (129 x 63 log spectrograms) are explained with ``explain_spectrogram`` and the SLIME
preset (5 x 4 grid, Bernoulli 1/2, cosine kernel of width 0.25, ridge, N = 8192) in one
chunked batched pass, at the chunk size torchlime measures (or ``--chunk``); the floor is the
bare forward pass of the same B·N rows (prebuilt, on the device) under ``inference_mode`` at
the fastest of a few chunk sizes (torchlime's among them). With ``--waveform`` also the
waveform path (``explain_waveform(segments="time_frequency")``: masked STFT -> istft -> front
end -> CNN) against its own floor (istft + model on prebuilt STFTs).

    python benchmarks/bench_audio_gpu.py --waveform                  # CUDA: B=64, N=8192, 10 repetitions
    python benchmarks/bench_audio_gpu.py --device cpu --quick --out /tmp/quick   # smoke run (waveform too)
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
from typing import Callable

import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.audio.stft import istft, stft
from torchlime.demo import audio_data
from torchlime.demo.audio_models import load_audio_model

from benchmarks.common import (
    best_chunk,
    common_args,
    device_arg,
    forward_rows,
    header,
    load_average,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    warm_up,
    write,
)

MODEL = "SpecNet (torchlime/demo/weights/audio_cnn.pt)"


def floor(
    model: Callable,
    example: torch.Tensor,
    n_rows: int,
    chunk: int,
    prepare: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
) -> Callable[[], None]:
    """A function running ``model(prepare(rows))`` over ``n_rows`` rows in chunks of ``chunk``
    (the rows, copies of ``example``, built beforehand).
    """
    rows = example.unsqueeze(0).expand(min(chunk, n_rows), *example.shape).contiguous()
    return forward_rows(lambda x: model(prepare(x)), rows, chunk, total=n_rows)


def floor_sizes(device: torch.device, quick: bool) -> list[int]:
    """Chunk sizes a floor tries (torchlime's own chunk is added to them)."""
    if quick:
        return [16, 64]
    return [512, 1024, 2048, 4096] if device.type == "cuda" else [64, 256, 1024]


def measured_floor(
    model: Callable,
    example: torch.Tensor,
    n_rows: int,
    sizes: list[int],
    device: torch.device,
    prepare: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
) -> tuple[Callable[[], None], dict]:
    """The floor at the fastest of ``sizes`` (each timed on the same rows), and what was tried."""
    probe = min(n_rows, 2 * max(sizes))
    best, tried = best_chunk(lambda b: floor(model, example, probe, b, prepare), sizes, device, repeats=1)
    return floor(model, example, n_rows, best, prepare), dict(chunk=best, candidates_seconds=tried)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cuda")
    parser.add_argument("--batch", type=int, default=None, help="clips explained together (default 64; quick: 2)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's; quick on CPU: 1)"
    )
    parser.add_argument("--n-samples", type=int, default=None, help="default 8192 (the SLIME preset); quick: 64")
    parser.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="rows per model call for torchlime and the floor "
        "(default: torchlime measures its own; the floor takes the fastest of a few)",
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 10; quick: 1)")
    parser.add_argument("--waveform", action="store_true", help="also time the waveform (STFT/istft) path")
    args = parser.parse_args(argv)
    size_defaults(args, dict(batch=(2, 64), n_samples=(64, 8192), reps=(1, 10)))
    args.waveform = args.waveform or args.quick
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    dev = device_arg(args.device)
    smoke_threads(args, dev)
    model = load_audio_model(dev)
    waves = audio_data.make_clips(args.batch, seed=99).waves.to(dev)
    specs = audio_data.log_spectrogram(waves)
    n_rows = args.batch * args.n_samples
    sizes = [args.chunk] if args.chunk else floor_sizes(dev, args.quick)
    store: dict = {}

    def explain() -> None:
        exp = explain_spectrogram(model, specs, preset="slime", n_samples=args.n_samples, batch_size=args.chunk)
        exp.coef.sum().item()
        store["meta"] = exp.meta

    chunks = {"explain": warm_up(explain, store)}
    floor_fn, floors = measured_floor(model, specs[0], n_rows, [*sizes, chunks["explain"]], dev)
    systems = {"floor": floor_fn, "explain": explain}
    if args.waveform:
        wave_model = load_audio_model(dev, waveform=True)
        n_fft, hop = audio_data.N_FFT, audio_data.HOP_LENGTH
        spec0 = stft(waves[0], n_fft, hop, n_fft)
        wave_store: dict = {}

        def explain_wave() -> None:
            exp = explain_waveform(
                wave_model,
                waves,
                sample_rate=audio_data.SAMPLE_RATE,
                segments="time_frequency",
                n_fft=n_fft,
                hop_length=hop,
                preset="slime",
                n_samples=args.n_samples,
                batch_size=args.chunk,
            )
            exp.coef.sum().item()
            wave_store["meta"] = exp.meta

        def to_audio(s: torch.Tensor) -> torch.Tensor:
            return istft(s, n_fft, hop, n_fft, waves.shape[-1])

        chunks["explain_waveform"] = warm_up(explain_wave, wave_store)
        systems["floor_waveform"], floors["waveform"] = measured_floor(
            wave_model, spec0, n_rows, [*sizes, chunks["explain_waveform"]], dev, to_audio
        )
        systems["explain_waveform"] = explain_wave
    times: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(args.reps):  # interleaved
        for name, fn in systems.items():
            times[name].append(timed(fn, dev))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    results = {k: summary(v) for k, v in times.items()}
    rates = {k: args.batch / v["median"] for k, v in results.items()}
    payload = dict(
        header(dev),
        benchmark="bench_audio_gpu",
        quick=args.quick,
        model=MODEL,
        input_shape=list(specs.shape[1:]),
        batch=args.batch,
        n_samples=args.n_samples,
        torchlime_chunks=chunks,
        floor_chunks=floors,
        repetitions=args.reps,
        preset="slime",
        seconds=results,
        peak_memory_bytes=store["meta"].get("peak_memory"),
        explanations_per_second={k: v for k, v in rates.items() if k.startswith("explain")},
        floor_explanations_per_second={k: v for k, v in rates.items() if k.startswith("floor")},
        explain_over_floor=results["explain"]["median"] / results["floor"]["median"],
        explain_over_floor_min=results["explain"]["min"] / results["floor"]["min"],
        load_average=load_average(),
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    if args.waveform:
        payload["explain_waveform_over_floor"] = (
            results["explain_waveform"]["median"] / results["floor_waveform"]["median"]
        )
        payload["explain_waveform_over_floor_min"] = (
            results["explain_waveform"]["min"] / results["floor_waveform"]["min"]
        )
    name = f"audio_gpu_{dev.type}{'_quick' if args.quick else ''}.json"
    print(f"wrote {write(name, payload, args.out)}")
    for k, v in results.items():
        print(f"{k:>18}: {v['median']:.3f} s  ({args.batch / v['median']:.2f} explanations/s)")


if __name__ == "__main__":
    main()
