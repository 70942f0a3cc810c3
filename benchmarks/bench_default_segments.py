"""How the segment count and the fill decide the quality of an image explanation (the defaults' source).

On the embedded demo model (64 x 64 images with a planted object, held-out seed) every combination of
sample budget N, SLIC segment count and fill is explained with the same seed; recorded per combination:
the median weighted R² of the surrogate and the median / mean coverage of the planted object by the
top-3 segments (ranked by signed weight: the segments that support the predicted class). The defaults of
``explain_image`` (``image._defaults``: ``n_segments = clamp(N // 40, 8, 100)``; fill "mean", lime's)
are read from this table, and the row ``"default"`` explains with them as a user would.

    python -m benchmarks.bench_default_segments            # writes results/default_segments_cpu.json
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import torch

from torchlime.demo import load_demo_model, make_images
from torchlime.demo.run import HELD_OUT_SEED, coverage
from torchlime.image import explain_image

from benchmarks.common import header, write

COUNTS = (16, 25, 50, 100)
BUDGETS = (500, 1000)
FILLS = (0.0, "mean", "blur")


def quality(exp: torch.Tensor, evidence: torch.Tensor) -> dict:
    """Median weighted R², median and mean top-3 coverage (by signed weight) of one explanation."""
    top, _ = exp.top_features(3, by="value")
    cov = coverage(exp.features, top[:, 0], evidence)
    r2 = exp.score[:, 0]
    return dict(
        n_features_mean=float(exp.n_features.float().mean()),
        median_r2=float(r2.median()),
        median_top3_coverage=float(cov.median()),
        mean_top3_coverage=float(cov.mean()),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-images", type=int, default=16)
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # weak fits are what this table measures
    model = load_demo_model()
    images, labels, evidence = make_images(args.n_images, seed=HELD_OUT_SEED)
    rows = []
    for n in BUDGETS:
        for fill in FILLS:
            for count in COUNTS:
                exp = explain_image(
                    model, images, target=labels, n_samples=n, n_segments=count, baseline=fill, generator=0
                )
                rows.append(dict(n_samples=n, n_segments=count, fill=fill, **quality(exp, evidence)))
                print(rows[-1], flush=True)
        exp = explain_image(model, images, target=labels, n_samples=n, generator=0)
        rows.append(dict(n_samples=n, n_segments="default", fill="default", **quality(exp, evidence)))
        print(rows[-1], flush=True)
    best = {
        n: max((r for r in rows if r["n_samples"] == n), key=lambda r: r["median_r2"] + r["mean_top3_coverage"])
        for n in BUDGETS
    }
    out = dict(
        header(torch.device("cpu")),
        model="torchlime.demo DemoNet (embedded weights), 64 x 64 images",
        n_images=args.n_images,
        rows=rows,
        best_per_budget={str(n): dict(best[n]) for n in BUDGETS},
        default_rows=[r for r in rows if r["n_segments"] == "default"],
        median_r2_over_rows=statistics.median(r["median_r2"] for r in rows),
    )
    print(write("default_segments_cpu.json", out))


if __name__ == "__main__":
    main()
