"""Train the demo CNN on synthetic images with a planted ground truth.

Generates training images (seed 0) and held-out test images (seed 1) with
:mod:`torchlime.demo.image_data`, trains :class:`torchlime.demo.image_models.DemoNet`
deterministically on the CPU, checks that the model relies on the evidence
object (and not on the distractors), and writes

* ``<out>/demo_cnn.pt``: the state dict, and
* ``<out>/demo_cnn.json``: seeds, hyper-parameters, accuracies, timing and the
  sha256 of the weights file.

Usage:
    python examples/train_demo_model.py --out DIR [--epochs N]

Re-running with the same arguments (and the same torch build and thread count)
reproduces the weights bit for bit; compare ``weights_sha256`` in the JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import platform
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from torchlime.demo.image_data import CLASS_NAMES, Scenes, make_images, make_scenes
from torchlime.demo.image_models import METADATA_FILE, WEIGHTS_FILE, DemoNet

TRAIN_SEED = 0
TEST_SEED = 1
IMAGE_SIZE = 64


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder (the committed weights live in torchlime/demo/weights/)"
    )
    parser.add_argument("--epochs", type=int, default=4, help="passes over the training set")
    parser.add_argument("--n-train", type=int, default=20_000, help="training images")
    parser.add_argument("--n-test", type=int, default=2_000, help="held-out test images")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=4e-3, help="peak learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and data order")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (the weights may depend on it; 1 is fastest on a busy machine)",
    )
    return parser.parse_args()


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    """Learning rate at ``step``: linear warm-up over ``warmup`` steps, then cosine to 0."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def train(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, args: argparse.Namespace) -> float:
    """Train ``model`` in place on ``images`` (N, 3, H, W) and ``labels`` (N,).

    AdamW with warm-up and cosine decay, cross-entropy loss, and random
    horizontal flips (every evidence shape is left-right symmetric). The data
    order and the flips come from one seeded generator.

    Returns:
        The training accuracy during the last epoch.
    """
    order_gen = torch.Generator().manual_seed(args.seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = math.ceil(len(labels) / args.batch_size)
    total = args.epochs * steps_per_epoch
    step = 0
    model.train()
    for epoch in range(args.epochs):
        start, loss_sum, correct = time.perf_counter(), 0.0, 0
        for batch in torch.randperm(len(labels), generator=order_gen).split(args.batch_size):
            x, y = images[batch], labels[batch]
            flip = torch.rand(len(batch), generator=order_gen) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(-1), x)
            for group in optimiser.param_groups:
                group["lr"] = lr_at(step, total, args.lr, warmup=steps_per_epoch // 2)
            logits = model(x.contiguous(memory_format=torch.channels_last))
            loss = nn.functional.cross_entropy(logits, y)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            step += 1
            loss_sum += loss.item() * len(batch)
            correct += (logits.argmax(1) == y).sum().item()
        print(
            f"epoch {epoch + 1}/{args.epochs}: loss {loss_sum / len(labels):.4f}, "
            f"train acc {correct / len(labels):.4f}, {time.perf_counter() - start:.1f} s",
            flush=True,
        )
    model.eval()
    return correct / len(labels)


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
    """Predicted labels (N,) for ``images`` (N, 3, H, W), in eval mode."""
    model.eval()
    return torch.cat(
        [model(x.contiguous(memory_format=torch.channels_last)).argmax(1) for x in images.split(batch_size)]
    )


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of ``images`` (N, 3, H, W) classified as ``labels`` (N,)."""
    return (predict(model, images) == labels).float().mean().item()


def fill(images: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``images`` (N, 3, H, W) with the pixels of ``mask`` (N, H, W) taken from ``source``.

    ``source`` broadcasts against ``images``: (N, 3, H, W) or (N, 3, 1, 1).
    """
    return torch.where(mask[:, None], source, images)


def matched_distractor_mask(scenes: Scenes, n_pixels: torch.Tensor, seed: int) -> torch.Tensor:
    """Pick ``n_pixels[i]`` distractor pixels of each image, object by object.

    Distractors are taken whole in a random order; the last one taken may be
    cut (in raster order) so that the count matches exactly. Images whose
    distractors have fewer pixels give all of them.

    Args:
        scenes: the test scenes.
        n_pixels: long (N,), how many pixels to pick in each image.
        seed: seed of the random object order.

    Returns:
        bool (N, H, W), a subset of ``scenes.distractors``.
    """
    ids = scenes.distractor_ids.long().flatten(1)  # (N, HW), -1 off distractors
    n, hw = ids.shape
    n_slots = int(ids.max().item()) + 1
    gen = torch.Generator().manual_seed(seed)
    slot_rank = torch.rand(n, n_slots, generator=gen).argsort(dim=1).argsort(dim=1)
    rank = slot_rank.gather(1, ids.clamp(min=0))
    keys = torch.where(ids >= 0, rank * hw + torch.arange(hw), torch.full_like(ids, n_slots * hw))
    order = keys.argsort(dim=1)
    chosen = (torch.arange(hw) < n_pixels[:, None]) & (keys.gather(1, order) < n_slots * hw)
    mask = torch.zeros_like(chosen).scatter_(1, order, chosen)
    return mask.view_as(scenes.evidence)


def evidence_checks(model: nn.Module, scenes: Scenes) -> dict[str, Any]:
    """Accuracy after hiding the evidence object, or as many distractor pixels.

    Two ways of hiding pixels: ``erase`` puts back the object-free background
    (with its noise), ``mean`` paints the per-image mean colour (what LIME
    usually does to switch a superpixel off).
    """
    assert scenes.background is not None
    n_evidence = scenes.evidence.flatten(1).sum(1)
    distractor_mask = matched_distractor_mask(scenes, n_evidence, seed=TEST_SEED)
    mean_colour = scenes.images.mean(dim=(2, 3), keepdim=True)
    results: dict[str, Any] = {}
    for name, source in (("erase", scenes.background), ("mean", mean_colour)):
        hidden_evidence = fill(scenes.images, scenes.evidence, source)
        hidden_distractors = fill(scenes.images, distractor_mask, source)
        predicted = predict(model, hidden_evidence)
        results[f"evidence_hidden_{name}"] = (predicted == scenes.labels).float().mean().item()
        results[f"evidence_hidden_{name}_predicted_class_counts"] = torch.bincount(
            predicted, minlength=len(CLASS_NAMES)
        ).tolist()
        results[f"distractors_hidden_{name}"] = accuracy(model, hidden_distractors, scenes.labels)
    matched = distractor_mask.flatten(1).sum(1)
    results["distractor_pixels_over_evidence_pixels"] = (matched.sum() / n_evidence.sum()).item()
    results["images_with_fewer_distractor_than_evidence_pixels"] = (matched < n_evidence).float().mean().item()
    return results


def weights_bytes(model: nn.Module) -> bytes:
    """The serialised state dict, independent of the output file name."""
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    return buffer.getvalue()


def main() -> None:
    """Generate data, train, check, and write the weights and their metadata."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    start = time.perf_counter()

    images, labels, _ = make_images(args.n_train, seed=TRAIN_SEED, size=IMAGE_SIZE)
    test = make_scenes(args.n_test, seed=TEST_SEED, size=IMAGE_SIZE)
    data_seconds = time.perf_counter() - start
    print(f"generated {args.n_train} + {args.n_test} images in {data_seconds:.1f} s", flush=True)

    model = DemoNet().to(memory_format=torch.channels_last)
    last_epoch_accuracy = train(model, images, labels, args)
    train_seconds = time.perf_counter() - start - data_seconds
    model = model.to(memory_format=torch.contiguous_format)

    results = {
        "train_accuracy_last_epoch": last_epoch_accuracy,
        "test_accuracy": accuracy(model, test.images, test.labels),
        **evidence_checks(model, test),
    }
    for key, value in results.items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")

    blob = weights_bytes(model)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / WEIGHTS_FILE).write_bytes(blob)
    metadata = {
        "model": "torchlime.demo.image_models.DemoNet",
        "class_names": list(CLASS_NAMES),
        "image_size": IMAGE_SIZE,
        "train_seed": TRAIN_SEED,
        "test_seed": TEST_SEED,
        "n_train": args.n_train,
        "n_test": args.n_test,
        "seed": args.seed,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "lr": args.lr,
        "threads": args.threads,
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "weights_file": WEIGHTS_FILE,
        "weights_bytes": len(blob),
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        **{key: round(value, 4) if isinstance(value, float) else value for key, value in results.items()},
        "chance_accuracy": round(1.0 / len(CLASS_NAMES), 4),
        "data_seconds": round(data_seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.perf_counter() - start, 1),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }
    text = json.dumps(metadata, indent=2) + "\n"
    (args.out / METADATA_FILE).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
