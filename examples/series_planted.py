"""Explain a model with a planted signal in a multivariate time series, and draw the explanation.

The model reads only channel 2 in time window 3 (of 10): its score is the mean of those steps. The
series are random, with a bump where the model looks. Explained over (channel, window) cells, over
windows and over channels, with each of the four fills, the planted feature ranks first for every
series; the script prints the ranks and saves the picture of the first series' cells.

    python examples/series_planted.py                 # the picture under the temporary directory
    python examples/series_planted.py series.png
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import matplotlib
import torch

from torchlime.series import SeriesFill, explain_series, plot_series

CHANNEL, WINDOW, N_WINDOWS = 2, 3, 10


def planted(series: torch.Tensor) -> torch.Tensor:
    """Score (c,) of series (c, C, T): the mean of channel 2 over window 3."""
    steps = series.shape[-1]
    return series[:, CHANNEL, WINDOW * steps // N_WINDOWS : (WINDOW + 1) * steps // N_WINDOWS].mean(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=str(Path(tempfile.gettempdir()) / "series_planted.png"))
    parser.add_argument("--series", type=int, default=4, help="series to explain")
    parser.add_argument("--n-samples", type=int, default=256)
    args = parser.parse_args()
    matplotlib.use("Agg")

    x = torch.randn(args.series, 5, 100, generator=torch.Generator().manual_seed(0))
    x[:, CHANNEL, WINDOW * 10 : (WINDOW + 1) * 10] += 3.0  # the bump where the model looks
    planted_ids = {"window_channel": CHANNEL * N_WINDOWS + WINDOW, "window": WINDOW, "channel": CHANNEL}
    started = time.perf_counter()
    for segments, planted_id in planted_ids.items():
        for fill in ("mean", "interpolate", "noise", "shuffle"):
            exp = explain_series(
                planted,
                x,
                segments=segments,
                n_windows=N_WINDOWS,
                baseline=SeriesFill(fill),
                n_samples=args.n_samples,
                generator=0,
            )
            ranks = (exp.coef[:, 0] > exp.coef[:, 0, planted_id, None]).sum(1) + 1  # 1: ranks first
            print(f"{segments:>14} {fill:>11}: rank of the planted feature per series {ranks.tolist()}")
    print(f"12 explanations of {args.series} series in {time.perf_counter() - started:.2f} s")

    exp = explain_series(planted, x, segments="window_channel", n_windows=N_WINDOWS, n_samples=args.n_samples)
    fig = plot_series(exp, x, title="planted: channel 2, window 3")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"picture: {args.out}")


if __name__ == "__main__":
    main()
