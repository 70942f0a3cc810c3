"""Explain the embedded audio CNN on synthetic clips and check the explanations against the truth.

Every "voice" clip holds a harmonic, voice-like tone whose exact time-frequency
region is known. The clips are explained in one batched pass over the
5 time x 4 frequency grid (``explain_spectrogram``); the script reports how much
of the true region the top-k segments cover (and how much of the top-k area is
true evidence), next to the same numbers for k random segments, and writes a
PNG of the first clips and WAV files (the clip, its top-k segments alone and
their complement) to ``--out``.

    python examples/explain_audio.py --out audio_out
    python examples/explain_audio.py --baseline noise --segments mel --n-samples 8192
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from torchlime.audio import explain_spectrogram
from torchlime.audio.viz import plot_spectrogram_explanation, save_top_segments_wav
from torchlime.demo import audio_data
from torchlime.demo.audio_models import load_audio_model


def region_scores(top: torch.Tensor, truth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Coverage |top & truth| / |truth| and precision |top & truth| / |top|, each (B,), from bool (B, Fr, Tm)."""
    inter = (top & truth).flatten(1).sum(1).float()
    return inter / truth.flatten(1).sum(1).clamp_min(1), inter / top.flatten(1).sum(1).clamp_min(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=8, help="voice clips to explain")
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--k", type=int, default=3, help="top segments")
    parser.add_argument("--n-samples", type=int, default=2048)
    parser.add_argument(
        "--baseline",
        default="zero",
        help="the fill of hidden segments: zero, min, max, signal_mean, mean (each segment's), noise, shuffle or blur",
    )
    parser.add_argument("--segments", default="grid", help="grid, mel, time, freq or slic")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=Path("audio_out"))
    args = parser.parse_args()

    dev = torch.device(args.device)
    model = load_audio_model(dev)
    clips = audio_data.make_clips(3 * args.clips, seed=args.seed)
    pos = (clips.labels == 1).nonzero().flatten()[: args.clips]
    waves = clips.waves[pos].to(dev)
    specs = audio_data.log_spectrogram(waves)
    truth = clips.evidence[pos].to(dev)
    sr, hop, n_fft = audio_data.SAMPLE_RATE, audio_data.HOP_LENGTH, audio_data.N_FFT

    t0 = time.perf_counter()
    exp = explain_spectrogram(
        model,
        specs,
        target=1,
        segments=args.segments,
        baseline=args.baseline,
        n_samples=args.n_samples,
        sample_rate=sr,
        hop_length=hop,
        n_fft=n_fft,
        generator=0,
    )
    secs = time.perf_counter() - t0
    labels = exp.features.expand(len(pos), *specs.shape[-2:])
    idx, _ = exp.top_features(args.k)
    top = (labels.unsqueeze(1) == idx[:, 0].unsqueeze(-1).unsqueeze(-1)).any(1)
    gen = torch.Generator().manual_seed(0)
    rand_idx = torch.rand(len(pos), int(exp.n_features.max()), generator=gen).argsort(1)[:, : args.k].to(dev)
    rand_top = (labels.unsqueeze(1) == rand_idx.unsqueeze(-1).unsqueeze(-1)).any(1)
    cov, prec = region_scores(top, truth)
    r_cov, r_prec = region_scores(rand_top, truth)

    print(
        f"{len(pos)} voice clips, {args.segments} segments, baseline {args.baseline!r}, N = {args.n_samples}: "
        f"{secs:.1f} s on {dev} ({len(pos) / secs:.2f} explanations/s)"
    )
    print(f"{'clip':>4} {'P(voice)':>8} {'R2':>6} {'coverage':>9} {'precision':>9}")
    with torch.inference_mode():
        prob = model(specs).softmax(1)[:, 1]
    for i in range(len(pos)):
        print(f"{i:>4} {float(prob[i]):8.3f} {float(exp.score[i, 0]):6.3f} {float(cov[i]):9.3f} {float(prec[i]):9.3f}")
    print(
        f"mean: top-{args.k} LIME segments cover {float(cov.mean()):.1%} of the true region "
        f"(precision {float(prec.mean()):.1%}); {args.k} random segments: {float(r_cov.mean()):.1%} "
        f"(precision {float(r_prec.mean()):.1%})"
    )

    args.out.mkdir(parents=True, exist_ok=True)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        n_fig = min(4, len(pos))
        fig, axes = plt.subplots(1, n_fig, figsize=(5 * n_fig, 3.6), constrained_layout=True, squeeze=False)
        for i, ax in enumerate(axes[0]):
            plot_spectrogram_explanation(
                exp,
                specs,
                index=i,
                k=args.k,
                truth=truth[i],
                ax=ax,
                title=f"clip {i}: coverage {float(cov[i]):.0%}",
            )
        fig.savefig(args.out / "explanations.png", dpi=110)
        print(f"wrote {args.out / 'explanations.png'}")
    except ImportError:
        print("matplotlib is not installed: no figure")
    paths = save_top_segments_wav(
        exp, waves, args.out, k=args.k, index=0, n_fft=n_fft, hop_length=hop, win_length=n_fft
    )
    print("wrote " + ", ".join(str(p) for p in paths.values()))


if __name__ == "__main__":
    main()
