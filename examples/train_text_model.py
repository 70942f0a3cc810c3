"""Train the synthetic-sentiment CNN deterministically on CPU and commit its weights.

    python examples/train_text_model.py --out DIR  # writes DIR/text_cnn.pt + DIR/text_vocab.json

Data: ``torchlime.demo.text_data.make_text_dataset`` (train seed 0, held-out seed 1).
Filler words are randomly masked ([MASK]), deleted or swapped for other filler
words during training, so that the perturbations LIME applies stay close to
what the model has seen (the label never depends on filler). The script fails
unless held-out accuracy is at least 95 %. 1-4 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from torchlime.demo.text_data import FILLER_IDS, MASK, PAD, VOCAB, make_text_dataset
from torchlime.demo.text_models import VOCAB_FILE, WEIGHTS, TextCNN
from torchlime.text.edits import delete_tokens


def augment(ids: torch.Tensor, attn: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask (15 %), swap (10 %) and delete (15 %) filler tokens of a batch (c, L)."""
    filler = torch.isin(ids, FILLER_IDS) & (attn != 0)
    u = torch.rand(ids.shape, generator=g)
    swap = FILLER_IDS[torch.randint(0, len(FILLER_IDS), ids.shape, generator=g)]
    ids = torch.where(filler & (u < 0.15), torch.full_like(ids, MASK), ids)
    ids = torch.where(filler & (u >= 0.15) & (u < 0.25), swap, ids)
    return delete_tokens(ids, attn, ~(filler & (u >= 0.25) & (u < 0.40)), PAD)


def accuracy(model: TextCNN, ids: torch.Tensor, attn: torch.Tensor, labels: torch.Tensor) -> float:
    with torch.inference_mode():
        return float((model(ids, attn).argmax(1) == labels).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=6000)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder (the committed weights live in torchlime/demo/weights/)"
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    g = torch.Generator().manual_seed(0)
    train = make_text_dataset(args.n_train, seed=0)
    held = make_text_dataset(2000, seed=1)
    model = TextCNN(len(VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=args.epochs * ((args.n_train + 63) // 64))
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(args.n_train, generator=g)
        for lo in range(0, args.n_train, 64):
            idx = order[lo : lo + 64]
            ids, attn = augment(train.input_ids[idx], train.attention_mask[idx], g)
            loss = torch.nn.functional.cross_entropy(model(ids, attn), train.labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        model.eval()
        acc = accuracy(model, held.input_ids, held.attention_mask, held.labels)
        print(
            f"epoch {epoch + 1:2d}  loss {loss.item():.4f}  held-out accuracy {acc:.4f}  "
            f"({time.perf_counter() - t0:.0f}s)"
        )
    if acc < 0.95:
        raise SystemExit(f"held-out accuracy {acc:.4f} < 0.95: not saving")
    args.out.mkdir(parents=True, exist_ok=True)
    weights, vocab_out = args.out / WEIGHTS.name, args.out / VOCAB_FILE.name
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    torch.save({"config": model.config, "state_dict": state, "held_out_accuracy": acc}, weights)
    vocab_out.write_text(
        json.dumps(
            {"tokens": list(VOCAB), "pad_id": PAD, "mask_id": MASK, "max_length": int(train.input_ids.shape[1])},
            indent=0,
        )
    )
    print(f"saved {weights} ({weights.stat().st_size / 1024:.0f} KiB) and {vocab_out}")


if __name__ == "__main__":
    main()
