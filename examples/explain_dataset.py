"""Explain a whole data set into resumable shards, on one process or under torchrun.

The embedded demo classifier explains ``--n-images`` generated images (64 x 64, the true object known)
for their labels into ``--out``; run the same command again to resume after an interruption.

    python examples/explain_dataset.py --out results/demo --n-images 256
    torchrun --nproc_per_node 2 examples/explain_dataset.py --out results/demo --n-images 256   # one folder, 2 ranks

Every rank explains the shards ``k % world_size == rank`` on ``cuda:LOCAL_RANK`` (or the CPU),
and the folder reads the same as one process's (``torchlime.load_results``).
"""

from __future__ import annotations

import argparse
import os

import torch

import torchlime
from torchlime.demo.image_data import make_images
from torchlime.demo.image_models import load_demo_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="result folder (run again to resume)")
    parser.add_argument("--n-images", type=int, default=256, help="images to explain (default: 256)")
    parser.add_argument("--n-samples", type=int, default=512, help="samples per image (default: 512)")
    parser.add_argument("--shard-size", type=int, default=64, help="explanations per shard (default: 64)")
    args = parser.parse_args()

    images, labels, _ = make_images(args.n_images, seed=2026)
    data = torch.utils.data.TensorDataset(images, labels)
    out = torchlime.explain_dataset(
        load_demo_model(),
        data,
        args.out,
        modality=torchlime.Images(n_segments=50),
        call=torchlime.Call(n_samples=args.n_samples, target="label"),
        shard_size=args.shard_size,
    )
    results = torchlime.load_results(out)
    if os.environ.get("RANK", "0") == "0":  # under torchrun every rank returns once the folder is complete
        print(f"{len(results)} explanations in {out}; mean weighted R² {results.field('score').mean():.3f}")


if __name__ == "__main__":
    main()
