"""Dropped tokens vs fills on the demo ViT: planted-object recall, and the missingness bias of fills.

The demo ViT (``torchlime.demo.image_vit``, trained on the planted-object images by
``examples/train_demo_vit.py``) and the demo CNN, on held-out images (seed ``HELD_OUT_SEED``), with the
same features for both: the ViT's 4 x 4 grid of 16x16-pixel patches (16 features).

1. Recall: each image explained for its true class (N = 1000, seed 0) with dropped patches and with
   fills (grey 0.5, each patch's mean colour); per setting the median weighted R², the mean and median
   coverage of the planted object by the top-2 patches (by signed weight: those supporting the class)
   and the pointing game (the top patch touches the object). The CNN with the same fills beside it.
2. Missingness bias (Jain et al., ICLR 2022): hide a random fraction of the patches that do not touch
   the object (the label's evidence stays whole) and record the accuracy (prediction = label) and how
   far the predicted class histogram moves from the labels' (total variation), for the ViT with grey
   fill, with mean fill and with dropped patches, and for the CNN with the fills. An unbiased absence
   keeps the accuracy at every fraction; a fill the model was never trained on drags predictions to
   some class.

    python -m benchmarks.bench_vit_drop_quality            # writes results/vit_drop_quality_cpu.json
"""

from __future__ import annotations

import argparse
import warnings

import torch

from torchlime.demo import load_demo_model, make_images
from torchlime.demo.image_vit import demo_vit_metadata, load_demo_vit
from torchlime.demo.run import HELD_OUT_SEED, coverage, hits
from torchlime.image import explain_image, grid
from torchlime.image.drop import DropModel, vit_family

from benchmarks.common import header, load_average, write

PATCH, GRID = 16, 4
FRACTIONS = (0.0, 0.25, 0.5, 0.75, 0.9)


def quality(exp, evidence: torch.Tensor, k: int = 2) -> dict:
    """Median R², mean / median top-k coverage and the pointing-game hit rate of one explanation."""
    top, _ = exp.top_features(k, by="value")
    cov = coverage(exp.features, top[:, 0], evidence)
    return dict(
        median_r2=round(float(exp.score[:, 0].median()), 4),
        mean_top2_coverage=round(float(cov.mean()), 4),
        median_top2_coverage=round(float(cov.median()), 4),
        pointing_game=round(float(hits(exp.features, top[:, 0], evidence).float().mean()), 4),
    )


def object_patches(evidence: torch.Tensor) -> torch.Tensor:
    """Bool (B, P): the patches that touch the planted object."""
    b = evidence.shape[0]
    return evidence.view(b, GRID, PATCH, GRID, PATCH).any(4).any(2).reshape(b, -1)


def hide_background(evidence: torch.Tensor, fraction: float, seed: int) -> torch.Tensor:
    """Bool (B, P) patches kept: ``fraction`` of the object-free patches hidden at random, the object's kept."""
    obj = object_patches(evidence)
    g = torch.Generator().manual_seed(seed)
    score = torch.rand(obj.shape, generator=g).masked_fill(obj, 2.0)  # the object's patches sort last
    n_bg = (~obj).sum(1, keepdim=True)
    rank = score.argsort(1).argsort(1)
    return ~(rank < (n_bg.float() * fraction).floor().long())


def predictions(model, images: torch.Tensor, keep: torch.Tensor, how: str) -> torch.Tensor:
    """Predicted classes (B,) with the hidden patches grey, mean-coloured, or dropped (``how``)."""
    with torch.inference_mode():
        if how == "drop":
            return DropModel(vit_family(model))(images, torch.arange(images.shape[0]), keep).argmax(1)
        pix = keep.view(-1, 1, GRID, 1, GRID, 1).expand(-1, 1, GRID, PATCH, GRID, PATCH).reshape(-1, 1, 64, 64)
        if how == "grey":
            fill = torch.full_like(images, 0.5)
        else:
            fill = images.view(-1, 3, GRID, PATCH, GRID, PATCH).mean((3, 5), keepdim=True)
            fill = fill.expand(-1, 3, GRID, PATCH, GRID, PATCH).reshape(images.shape)
        return model(torch.where(pix, images, fill)).argmax(1)


def bias(model, images, labels, evidence, how: str) -> list[dict]:
    """Accuracy and the predicted-class total variation per hidden fraction."""
    out = []
    n_classes = int(labels.max()) + 1
    truth = torch.bincount(labels, minlength=n_classes).float() / labels.numel()
    for f in FRACTIONS:
        pred = predictions(model, images, hide_background(evidence, f, seed=7), how)
        hist = torch.bincount(pred, minlength=n_classes).float() / pred.numel()
        out.append(
            dict(
                hidden_fraction_of_background=f,
                accuracy=round(float((pred == labels).float().mean()), 4),
                predicted_class_share=[round(float(v), 4) for v in hist],
                total_variation_from_labels=round(float(0.5 * (hist - truth).abs().sum()), 4),
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-images", type=int, default=32, help="held-out images explained (recall)")
    ap.add_argument("--n-bias", type=int, default=1000, help="held-out images of the bias table")
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="smoke run: a few images, few samples")
    args = ap.parse_args()
    if args.quick:
        args.n_images, args.n_bias, args.n_samples = 2, 16, 60
    warnings.simplefilter("ignore")  # weak fits are part of what this table measures
    load_before = load_average()
    vit, cnn = load_demo_vit(), load_demo_model()
    images, labels, evidence = make_images(args.n_images, seed=HELD_OUT_SEED)
    patches = grid(images, GRID, GRID)
    call = dict(target=labels.view(-1, 1), n_samples=args.n_samples, generator=0)
    recall = {
        "vit_drop": quality(explain_image(vit, images, baseline="drop", **call), evidence),
        "vit_grey": quality(explain_image(vit, images, segments=patches, baseline=0.5, **call), evidence),
        "vit_mean": quality(explain_image(vit, images, segments=patches, baseline="mean", **call), evidence),
        "cnn_grey": quality(explain_image(cnn, images, segments=patches, baseline=0.5, **call), evidence),
        "cnn_mean": quality(explain_image(cnn, images, segments=patches, baseline="mean", **call), evidence),
    }
    for k, v in recall.items():
        print(k, v, flush=True)
    b_images, b_labels, b_evidence = make_images(args.n_bias, seed=HELD_OUT_SEED + 1)
    missingness = {
        "vit_drop": bias(vit, b_images, b_labels, b_evidence, "drop"),
        "vit_grey": bias(vit, b_images, b_labels, b_evidence, "grey"),
        "vit_mean": bias(vit, b_images, b_labels, b_evidence, "mean"),
        "cnn_grey": bias(cnn, b_images, b_labels, b_evidence, "grey"),
        "cnn_mean": bias(cnn, b_images, b_labels, b_evidence, "mean"),
    }
    for k, v in missingness.items():
        print(k, [(r["hidden_fraction_of_background"], r["accuracy"]) for r in v], flush=True)
    meta = demo_vit_metadata()
    result = dict(
        header(torch.device("cpu")),
        load_average_1_5_15_at_start=load_before,
        load_average_1_5_15=load_average(),
        quick=args.quick,
        setup=dict(
            vit=dict(config=meta.get("config"), test_accuracy=meta.get("test_accuracy")),
            features="4 x 4 grid of 16x16-pixel patches (the ViT's own patches)",
            n_images=args.n_images,
            n_bias_images=args.n_bias,
            n_samples=args.n_samples,
            held_out_seed=HELD_OUT_SEED,
            target="true class",
        ),
        recall=recall,
        missingness_bias=missingness,
    )
    print("wrote", write("vit_drop_quality_cpu.json", result) if not args.quick else "(quick: nothing)")


if __name__ == "__main__":
    main()
