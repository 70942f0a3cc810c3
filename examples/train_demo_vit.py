"""Train the demo vision transformer on the planted-object images (as the demo CNN was trained).

The same data (training seed 0, held-out seed 1), the same schedule code and the same evidence checks
as ``examples/train_demo_model.py``; the model is :func:`torchlime.demo.image_vit.demo_vit`. Writes

* ``<out>/demo_vit.pt``: the state dict, and
* ``<out>/demo_vit.json``: seeds, hyper-parameters, accuracies, timing and the sha256 of the weights.

Usage:
    python examples/train_demo_vit.py --out DIR [--epochs N]

Re-running with the same arguments (and the same torch build and thread count) reproduces the
weights bit for bit; compare ``weights_sha256`` in the JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the CNN's training script, beside this one

from train_demo_model import IMAGE_SIZE, TEST_SEED, TRAIN_SEED, accuracy, evidence_checks, train, weights_bytes  # noqa: E402

from torchlime.demo.image_data import CLASS_NAMES, make_images, make_scenes  # noqa: E402
from torchlime.demo.image_vit import VIT_CONFIG, VIT_METADATA_FILE, VIT_WEIGHTS_FILE, demo_vit  # noqa: E402

MEAN, STD = 0.5, 0.25  # the images are centred for training; the saved patch embedding takes them as they are


class Centred(nn.Module):
    """The ViT on ``(x - MEAN) / STD`` (a plain ViT trains poorly on uncentred [0, 1] pixels)."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self.vit = vit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit((x - MEAN) / STD)


@torch.no_grad()
def fold_centring(vit: nn.Module) -> None:
    """Fold ``(x - MEAN) / STD`` into the patch embedding (a linear map), in place: the ViT then takes [0, 1] pixels."""
    conv = vit.conv_proj
    conv.bias -= conv.weight.sum((1, 2, 3)) * MEAN / STD
    conv.weight /= STD


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder (committed: torchlime/demo/weights/)")
    parser.add_argument("--epochs", type=int, default=12, help="passes over the training set")
    parser.add_argument("--n-train", type=int, default=30_000, help="training images")
    parser.add_argument("--n-test", type=int, default=2_000, help="held-out test images")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1.5e-3, help="peak learning rate")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and data order")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the weights may depend on it)")
    return parser.parse_args()


def main() -> None:
    """Generate data, train, check, and write the weights and their metadata."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    images, labels, _ = make_images(args.n_train, seed=TRAIN_SEED, size=IMAGE_SIZE)
    test = make_scenes(args.n_test, seed=TEST_SEED, size=IMAGE_SIZE)
    data_seconds = time.perf_counter() - start
    vit = demo_vit(len(CLASS_NAMES))
    last_epoch_accuracy = train(Centred(vit), images, labels, args)
    train_seconds = time.perf_counter() - start - data_seconds
    fold_centring(vit)
    model = vit
    results = {
        "train_accuracy_last_epoch": last_epoch_accuracy,
        "test_accuracy": accuracy(model, test.images, test.labels),
        **evidence_checks(model, test),
    }
    for key, value in results.items():
        print(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}")
    blob = weights_bytes(model)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / VIT_WEIGHTS_FILE).write_bytes(blob)
    metadata = {
        "model": "torchlime.demo.image_vit.demo_vit",
        "config": VIT_CONFIG,
        "class_names": list(CLASS_NAMES),
        "train_seed": TRAIN_SEED,
        "test_seed": TEST_SEED,
        **{k: getattr(args, k) for k in ("n_train", "n_test", "seed", "epochs", "batch_size", "lr", "threads")},
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "weights_file": VIT_WEIGHTS_FILE,
        "weights_bytes": len(blob),
        "weights_sha256": hashlib.sha256(blob).hexdigest(),
        **{key: round(value, 4) if isinstance(value, float) else value for key, value in results.items()},
        "data_seconds": round(data_seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }
    text = json.dumps(metadata, indent=2) + "\n"
    (args.out / VIT_METADATA_FILE).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
