"""Every box of a batch of images explained by a detector (D-RISE scores): one torchlime call vs captum box by box.

Setup: 8 RGB images of 96x96 (seeded noise), 3 boxes each (24 targets: each image's 3 best detections
of the unperturbed image, with their labels, given to every system), an 8x8 grid of 12x12 cells (64
features), N = 256 samples per explanation, zero fill. The detector is ``TinyDetector``, defined here: a
random-weight (seeded) four-layer CNN with a one-anchor-per-cell head (6x6 cells, 4 classes) returning,
like torchvision's detectors, a list of per-image dicts ``boxes`` (16, 4) / ``labels`` / ``scores`` (its 16
best anchors). A torchvision Faster R-CNN costs about 0.3 s an image on 2 CPU cores: captum's 3 x 8 x N
single-image calls would take hours, so the detector here costs about 1 ms an image at a good batch size
("small"); a "tiny" one, three times cheaper, is timed for torchlime and its floor only, to show the
fixed per-row overhead where the model hides it least.

Interleaved repetitions (median of ``--reps``) of:

* ``torchlime``: one ``torchlime.explain(detector, images, cells, target=Boxes(boxes=, labels=))``
  call: all 24 boxes, every sample's detections scored against every box of its image at once;
* ``captum_ppe{P}`` ("small" only): ``captum.attr.Lime`` (its defaults: Lasso, exponential cosine
  kernel) called 24 times, image by image and box by box, with a forward wrapper that returns that box's
  D-RISE score (max over the sample's detections of IoU x same label x score, ``torchvision.ops.box_iou``),
  the same cells as ``feature_mask``, ``baselines=0`` and ``perturbations_per_eval=P`` (1 is captum's
  default; the best of ``--ppes`` is its best setting), under ``torch.no_grad()``;
* ``floor``: the bare batched forward of the same 8 x N perturbed images (built beforehand) through
  the detector, at the best of a few batch sizes: no LIME can beat it.

Ratios: torchlime / floor (goal <= 1.2) and captum / torchlime (goal >= 3, the boxes per image: captum
runs the model once per box, torchlime once per image), for captum's default and best settings. A check
compares torchlime's score of each box on the unperturbed image with the captum wrapper's.

    python benchmarks/bench_boxes.py                       # results/boxes_cpu.json, ~4 min on 2 cores
    python benchmarks/bench_boxes.py --quick --out /tmp/q  # smoke run: N=16, 2 images, one repetition
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import statistics
import warnings
from typing import Callable

import torch

import torchlime
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.targets import Boxes

from benchmarks.common import (
    best_chunk,
    common_args,
    formatted,
    forward_rows,
    goal,
    header,
    load_average,
    optional_module,
    perturbed_images,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    write,
)

SIZE, CELL, BOXES, CLASSES, KEEP = 96, 12, 3, 4, 16


#: the detectors' channel widths: "small" (about 1 ms an image at a good batch size on 2 cores, 2.5 ms
#: alone) for every system; "tiny" (a third of that) for torchlime and its floor only: the overhead shows
WIDTHS = {"small": (3, 32, 64, 128, 256), "tiny": (3, 16, 32, 64, 96)}


class TinyDetector(torch.nn.Module):
    """A cheap deterministic detector: (c, 3, 96, 96) -> c dicts of its 16 best boxes (random weights)."""

    def __init__(self, widths: tuple[int, ...] = WIDTHS["small"]) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        layers: list[torch.nn.Module] = []
        for cin, cout in zip(widths, widths[1:]):  # four stride-2 convolutions: 96 -> 6
            layers += [torch.nn.Conv2d(cin, cout, 3, stride=2, padding=1), torch.nn.ReLU()]
        self.body = torch.nn.Sequential(*layers)
        self.head = torch.nn.Conv2d(widths[-1], 4 + CLASSES, 1)
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=g) * (2.0 / max(1, p[0].numel())) ** 0.5
        cells = (torch.arange(SIZE // 16) + 0.5) * 16.0
        cy, cx = torch.meshgrid(cells, cells, indexing="ij")
        self.register_buffer("centres", torch.stack((cx.flatten(), cy.flatten()), 1))  # (36, 2)

    def forward(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        out = self.head(self.body(x)).flatten(2).transpose(1, 2)  # (c, 36, 4 + C)
        centre = self.centres + 8.0 * torch.tanh(out[..., :2])
        half = 12.0 * torch.exp(0.5 * torch.tanh(out[..., 2:4]))
        boxes = torch.cat((centre - half, centre + half), -1).clamp(0, SIZE)
        probs = out[..., 4:].softmax(-1)
        scores, labels = probs.max(-1)
        scores, idx = scores.topk(KEEP, dim=1)
        boxes = boxes.gather(1, idx.unsqueeze(-1).expand(-1, -1, 4))
        labels = labels.gather(1, idx)
        return [{"boxes": b, "labels": lab, "scores": s} for b, lab, s in zip(boxes, labels, scores)]


def cells() -> torch.Tensor:
    """(1, 1, 96, 96) ids of the 8x8 grid of 12x12 cells."""
    c = torch.arange(SIZE) // CELL
    return (c.view(-1, 1) * (SIZE // CELL) + c.view(1, -1)).view(1, 1, SIZE, SIZE)


def targets(detector: TinyDetector, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each image's 3 best detections on the unperturbed image: boxes (B, 3, 4), labels (B, 3)."""
    with torch.inference_mode():
        found = detector(images)
    return torch.stack([d["boxes"][:BOXES] for d in found]), torch.stack([d["labels"][:BOXES] for d in found])


def box_score(detector: TinyDetector, box: torch.Tensor, label: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """captum's forward for one box: (n, 3, H, W) -> (n,) D-RISE scores, one row at a time as a user writes it."""
    from torchvision.ops import box_iou

    def forward(x: torch.Tensor) -> torch.Tensor:
        rows = []
        for d in detector(x):
            sim = box_iou(box[None], d["boxes"])[0] * (d["labels"] == label) * d["scores"]
            rows.append(sim.max() if sim.numel() else sim.new_zeros(()))
        return torch.stack(rows)

    return forward


def run_torchlime(detector, images, feats, boxes, labels, n) -> Callable[[], torchlime.Explanation]:
    target = Boxes(boxes=boxes, labels=labels)

    def run() -> torchlime.Explanation:
        with warnings.catch_warnings():  # a random-weight detector's flat scores and a quick run's tiny N
            warnings.simplefilter("ignore", UnreliableExplanationWarning)
            return torchlime.explain(detector, images, feats, target=target, n_samples=n, baseline=0.0, generator=0)

    return run


def run_captum(detector, images, feats, boxes, labels, n, ppe) -> Callable[[], list[torch.Tensor]]:
    from captum.attr import Lime

    def run() -> list[torch.Tensor]:
        out = []
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(images.shape[0]):
                for j in range(BOXES):
                    lime = Lime(box_score(detector, boxes[i, j], int(labels[i, j])))
                    out.append(
                        lime.attribute(
                            images[i : i + 1],
                            baselines=0.0,
                            feature_mask=feats,
                            n_samples=n,
                            perturbations_per_eval=min(ppe, n),
                        )
                    )
        return out

    return run


def floor_of(detector, images, feats, n, device) -> tuple[Callable[[], None], int, dict]:
    """The bare batched forward of the same B x N perturbed images (built beforehand), at its best batch size."""
    rows = [perturbed_images(images[i : i + 1], feats[0, 0], n, seed=i, fill="zero") for i in range(len(images))]
    rows_t = formatted(torch.cat(rows), detector)
    sizes = [s for s in (16, 64, 256) if s <= rows_t.shape[0]] or [rows_t.shape[0]]
    chunk, by_size = best_chunk(lambda s: forward_rows(detector, rows_t, s), sizes, device, repeats=1)
    return forward_rows(detector, rows_t, chunk), chunk, by_size


def check_scores(detector, images, feats, boxes, labels) -> float:
    """Largest |torchlime's score of each box on the unperturbed image - the captum wrapper's|."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        exp = torchlime.explain(
            detector, images, feats, target=Boxes(boxes=boxes, labels=labels), n_samples=8, return_samples=True
        )
    with torch.no_grad():
        wrapper = torch.tensor(
            [
                [float(box_score(detector, boxes[i, j], int(labels[i, j]))(images[i : i + 1])[0]) for j in range(BOXES)]
                for i in range(len(images))
            ]
        )
    return float((exp.outputs[:, 0].cpu() - wrapper).abs().max())


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--n", type=int, default=None, help="samples per explanation (default 256, quick 16)")
    parser.add_argument("--images", type=int, default=None, help="images (default 8, quick 2)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, quick 1)")
    parser.add_argument("--ppes", type=int, nargs="+", default=None, help="captum perturbations_per_eval")
    parser.add_argument("--threads", type=int, default=None)
    args = size_defaults(
        parser.parse_args(), dict(n=(16, 256), images=(2, 8), reps=(1, 3), ppes=([1, 16], [1, 16, 64]))
    )
    device = torch.device(args.device)
    smoke_threads(args, device)
    for module in ("captum.attr", "torchvision.ops"):
        if optional_module(module)[1]:
            raise SystemExit(f"bench_boxes needs {module}: {optional_module(module)[1]}")

    images = torch.rand(args.images, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1)).to(device)
    feats, n = cells().to(device), args.n
    systems: dict[str, Callable[[], object]] = {}
    warm: dict[str, Callable[[], object]] = {}
    setup: dict[str, dict] = {}
    for name, widths in WIDTHS.items():
        torch.manual_seed(0)
        detector = TinyDetector(widths).eval().to(device)
        boxes, labels = targets(detector, images)
        systems[f"{name}/torchlime"] = warm[name] = run_torchlime(detector, images, feats, boxes, labels, n)
        if name == "small":
            for p in args.ppes:
                systems[f"small/captum_ppe{p}"] = run_captum(detector, images, feats, boxes, labels, n, p)
                warm[f"captum_ppe{p}"] = run_captum(detector, images[:1], feats, boxes, labels, 8, p)
        floor, chunk, by_size = floor_of(detector, images, feats, n, device)
        systems[f"{name}/floor"] = floor
        setup[name] = dict(
            widths=list(widths),
            floor_batch_size=chunk,
            floor_seconds_by_batch_size=by_size,
            reference_score_max_abs_diff=check_scores(detector, images, feats, boxes, labels),
        )

    for fn in warm.values():  # warm-up: imports, first allocations, torchlime's chunk size (captum at N=8)
        fn()
    for fn in warm.values():
        fn()
    runs: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(args.reps):
        for name, fn in systems.items():
            runs[name].append(timed(fn, device))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()), flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    captum = {k.split("/")[1]: v for k, v in med.items() if "/captum" in k}
    best_captum = min(captum, key=captum.get)
    rows = len(images) * n
    ratios = dict(
        small_torchlime_over_floor=med["small/torchlime"] / med["small/floor"],
        tiny_torchlime_over_floor=med["tiny/torchlime"] / med["tiny/floor"],
        captum_default_over_torchlime=captum["captum_ppe1"] / med["small/torchlime"]
        if "captum_ppe1" in captum
        else None,
        captum_best_over_torchlime=captum[best_captum] / med["small/torchlime"],
    )
    overhead = {k: (med[f"{k}/torchlime"] - med[f"{k}/floor"]) / rows for k in WIDTHS}
    result = dict(
        header(device),
        threads=torch.get_num_threads(),
        load_average=load_average(),
        quick=args.quick,
        setup=dict(
            detector="TinyDetector (benchmarks/bench_boxes.py): random-weight 4-conv CNN, 6x6 anchors, 4 classes, "
            "its 16 best boxes per image as a list of dicts (torchvision's format)",
            images=len(images),
            size=SIZE,
            boxes_per_image=BOXES,
            cells=(SIZE // CELL) ** 2,
            n_samples=n,
            fill=0.0,
            reps=args.reps,
            captum_ppes=args.ppes,
            captum="captum.attr.Lime defaults (SkLearnLasso alpha=0.01, exp cosine kernel), one call per box",
            detectors=setup,
        ),
        seconds={k: summary(v) for k, v in runs.items()},
        **ratios,
        captum_best=best_captum,
        torchlime_overhead_seconds_per_row=overhead,
        goals=[
            goal("small: torchlime / floor <= 1.2", ratios["small_torchlime_over_floor"], 1.2, "<=", args.quick),
            goal("tiny: torchlime / floor <= 1.2", ratios["tiny_torchlime_over_floor"], 1.2, "<=", args.quick),
            goal(
                f"captum (best: {best_captum}) / torchlime >= boxes per image",
                ratios["captum_best_over_torchlime"],
                BOXES,
                ">=",
                args.quick,
            ),
            goal(
                "captum (default ppe=1) / torchlime >= boxes per image",
                ratios["captum_default_over_torchlime"],
                BOXES,
                ">=",
                args.quick,
            ),
        ],
    )
    print(", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None) + f"; captum best: {best_captum}")
    print(write(f"boxes_{device.type}{'_quick' if args.quick else ''}.json", result, args.out))


if __name__ == "__main__":
    main()
