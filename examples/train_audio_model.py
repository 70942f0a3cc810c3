"""Train the committed audio CNN (``torchlime/demo/weights/audio_cnn.pt``) deterministically on the CPU.

The clips come from ``torchlime.demo.audio_data.make_clips`` (training seed 1,
held-out seed 2, never used for training or model selection); the script
prints the held-out accuracy and writes the weights (< 1 MB) and a JSON
metadata file. A few minutes on a 2-core CPU.

    python examples/train_audio_model.py --out torchlime/demo/weights   # replaces the committed weights
    python examples/train_audio_model.py --out /tmp/m    # somewhere else
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from torchlime.demo import audio_data
from torchlime.demo.audio_models import METADATA, WEIGHTS, SpecNet


def accuracy(model: SpecNet, specs: torch.Tensor, labels: torch.Tensor, batch: int = 500) -> float:
    """Fraction of correct argmax predictions over (n, Fr, Tm) spectrograms."""
    model.eval()
    with torch.inference_mode():
        pred = torch.cat([model(specs[i : i + batch]).argmax(1) for i in range(0, len(specs), batch)])
    return float((pred == labels).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out", type=Path, required=True, help="output folder (the committed weights live in torchlime/demo/weights/)"
    )
    parser.add_argument("--train", type=int, default=4000, help="training clips")
    parser.add_argument("--val", type=int, default=1000, help="held-out clips")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    t0 = time.perf_counter()
    train = audio_data.make_clips(args.train, seed=1)
    val = audio_data.make_clips(args.val, seed=2)
    x_train, x_val = audio_data.log_spectrogram(train.waves), audio_data.log_spectrogram(val.waves)
    print(
        f"data: {args.train} + {args.val} clips, spectrograms {tuple(x_train.shape[1:])} "
        f"({time.perf_counter() - t0:.1f} s)"
    )

    model = SpecNet()
    model.offset.fill_(float(x_train.mean()))
    model.scale.fill_(float(1.0 / x_train.std()))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps = args.epochs * (args.train // args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    order_gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(args.train, generator=order_gen)
        total = 0.0
        for i in range(args.train // args.batch):
            idx = order[i * args.batch : (i + 1) * args.batch]
            loss = F.cross_entropy(model(x_train[idx]), train.labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss.detach())
        print(
            f"epoch {epoch + 1:2d}: loss {total / (args.train // args.batch):.4f}  "
            f"train acc {accuracy(model, x_train[:1000], train.labels[:1000]):.4f}  "
            f"({time.perf_counter() - t0:.0f} s)"
        )
    acc = accuracy(model, x_val, val.labels)
    print(f"held-out accuracy: {acc:.4f} on {args.val} clips")

    args.out.mkdir(parents=True, exist_ok=True)
    weights = args.out / WEIGHTS
    torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, weights)
    info = dict(
        model="SpecNet",
        channels=[8, 16, 32],
        class_names=list(audio_data.CLASS_NAMES),
        sample_rate=audio_data.SAMPLE_RATE,
        duration=audio_data.DURATION,
        n_fft=audio_data.N_FFT,
        hop_length=audio_data.HOP_LENGTH,
        input="log1p(|STFT|), Hann window, centred frames",
        input_shape=list(x_val.shape[1:]),
        heldout_accuracy=acc,
        heldout_clips=args.val,
        heldout_seed=2,
        train_clips=args.train,
        train_seed=1,
        epochs=args.epochs,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        parameters=sum(p.numel() for p in model.parameters()),
        sha256=hashlib.sha256(weights.read_bytes()).hexdigest(),
        torch=torch.__version__,
        seconds=round(time.perf_counter() - t0, 1),
    )
    (args.out / METADATA).write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {weights} ({weights.stat().st_size} bytes) and {args.out / METADATA}")


if __name__ == "__main__":
    main()
