"""``torchlime demo``: explain held-out images of the embedded model and check them against the truth.

The embedded classifier (``torchlime.demo.image_models.DemoNet``, weights in
``torchlime/demo/weights``) sees synthetic images whose class is decided by one
planted object among distractors, so the right explanation is known pixel by
pixel. The demo explains a batch of held-out images in one call and reports,
per image, how much of the planted object the top-k segments cover.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from torchlime.demo.image_data import CLASS_NAMES, make_images
from torchlime.demo.image_models import load_demo_model
from torchlime.image import explain_image, slic

HELD_OUT_SEED = 2026  # never used for training (train: 0, validation: 1)


def chosen_pixels(exp_features: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """Bool (B, H, W): pixels of the chosen segments. exp_features (B, 1, H, W), top long (B, k)."""
    lab = exp_features[:, 0]
    return (lab.unsqueeze(-1) == top.view(top.shape[0], 1, 1, -1)).any(-1)


def coverage(exp_features: torch.Tensor, top: torch.Tensor, evidence: torch.Tensor) -> torch.Tensor:
    """Fraction of each planted object's pixels inside the chosen segments (recall), float (B,).

    Args:
        exp_features: long (B, 1, H, W) segment ids.
        top: long (B, k) chosen ids.
        evidence: bool (B, H, W) planted object.
    """
    chosen = chosen_pixels(exp_features, top)
    return (chosen & evidence).sum((1, 2)).float() / evidence.sum((1, 2)).clamp_min(1).float()


def hits(exp_features: torch.Tensor, top: torch.Tensor, evidence: torch.Tensor) -> torch.Tensor:
    """Bool (B,): the single most important segment touches the planted object (pointing game)."""
    return (chosen_pixels(exp_features, top[:, :1]) & evidence).any(2).any(1)


def run_demo(
    out: Path,
    device: str = "cpu",
    n_images: int = 8,
    n_samples: int = 1000,
    n_segments: int = 25,
    k: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Explain ``n_images`` held-out images, write one PNG each and ``summary.json`` into ``out``."""
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("`--device cuda` was asked for, but torch.cuda.is_available() is False")
    dev = torch.device(device)
    model = load_demo_model(dev)
    images, labels, evidence = make_images(n_images, seed=HELD_OUT_SEED)
    images, labels, evidence = images.to(dev), labels.to(dev), evidence.to(dev)

    with warnings.catch_warnings():  # warm-up (allocations, kernels); its tiny N is never reported
        warnings.simplefilter("ignore")
        explain_image(model, images[:1], n_segments=n_segments, n_samples=16)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    segments = slic(images, n_segments=n_segments)
    fewest = int(segments.flatten(1).amax(1).min()) + 1
    if k > fewest:
        raise ValueError(
            f"--top-k must be at most the number of segments of every image ({fewest} with "
            f"--n-segments {n_segments}), got {k}"
        )
    exp = explain_image(
        model, images, segments=segments, n_samples=n_samples, baseline="mean", generator=seed
    )  # logits: probabilities of a confident model saturate
    if dev.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0

    out.mkdir(parents=True, exist_ok=True)
    top, _ = exp.top_features(k, by="value")  # the segments that support the class (coverage of the object)
    cov = coverage(exp.features, top[:, 0], evidence)
    hit = hits(exp.features, top[:, 0], evidence)
    pred = exp.target[:, 0]
    pngs = []
    try:
        from torchlime.image.viz import save_image_explanation

        for i in range(n_images):
            pngs.append(
                str(
                    save_image_explanation(
                        exp,
                        images,
                        out / f"explanation_{i:02d}.png",
                        index=i,
                        k=k,
                        class_names=list(CLASS_NAMES),
                        truth=evidence[i],
                    )
                )
            )
    except ImportError:
        pngs = []  # matplotlib missing: the JSON still has everything
    summary = dict(
        device=str(dev),
        n_images=n_images,
        n_samples=n_samples,
        n_segments_asked=n_segments,
        top_k=k,
        seconds_total=seconds,
        seconds_per_explanation=seconds / n_images,
        mean_weighted_r2=float(exp.score[:, 0].mean()),
        mean_top_k_coverage=float(cov.mean()),
        top1_hit_rate=float(hit.float().mean()),
        accuracy=float((pred == labels).float().mean()),
        images=[
            dict(
                index=i,
                true_class=CLASS_NAMES[int(labels[i])],
                predicted=CLASS_NAMES[int(pred[i])],
                n_segments=int(exp.n_features[i]),
                weighted_r2=float(exp.score[i, 0]),
                top_k_coverage=float(cov[i]),
                top1_hits_object=bool(hit[i]),
                top_segments=top[i, 0].tolist(),
            )
            for i in range(n_images)
        ],
        pictures=pngs,
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    exp.save(out / "explanation.pt")
    return summary
