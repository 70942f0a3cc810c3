"""Dropped patch tokens vs fills on a vision transformer: ``explain_image(baseline="drop")``.

A ViT-S/16-sized torchvision ``VisionTransformer`` (224x224, 16x16 patches, 12 layers, 6 heads, width
384, MLP 1536, 1000 classes; random weights), one random image, the 14 x 14 patch grid as features
(196), Bernoulli(1/2) masks (keep probability 0.5), N samples, the same seed for every call.
Interleaved repetitions (medians reported) of:

* ``drop``: ``explain_image(model, x, baseline="drop")`` (hidden patches leave the sequence);
* ``fill``: ``explain_image(model, x, segments=patch grid, baseline=0.5)`` (grey patches);
* ``floor``: no explanation, the model on the N grey-filled rows (built beforehand) in the chunk size
  the ``fill`` call chose: the fill-based forward floor;
* ``captum``: ``captum.attr.Lime(model).attribute(x, target, feature_mask=patch grid, n_samples=N,
  baselines=0.5)`` at captum's defaults (one row per model call).

Goal (the issue's): drop <= 0.6x the fill-based forward floor. The drop call's outputs are also
checked against the fill-free batch-1 reference on a few rows (``agreement``).

    python benchmarks/bench_token_drop.py                      # results/token_drop_cpu.json (N=250)
    python benchmarks/bench_token_drop.py --device cuda        # results/token_drop_cuda.json (N=1000)
    python benchmarks/bench_token_drop.py --quick --out /tmp/q # smoke run (a tiny ViT)
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

from torchlime.image import explain_image, grid
from torchlime.image.drop import vit_family

from benchmarks.common import (
    common_args,
    device_arg,
    forward_rows,
    goal,
    header,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    write,
)

SEED = 1234
FULL = dict(image_size=224, patch_size=16, num_layers=12, num_heads=6, hidden_dim=384, mlp_dim=1536)
TINY = dict(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64)


def vit(config: dict, device: torch.device) -> torch.nn.Module:
    """The torchvision ViT of ``config`` with random weights, 1000 classes, in eval mode."""
    from torchvision.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    return VisionTransformer(**config, num_classes=1000).eval().to(device)


def grey_rows(x: torch.Tensor, labels: torch.Tensor, n: int) -> torch.Tensor:
    """N rows of ``x`` (1, C, H, W) with Bernoulli(1/2) patches grey (0.5); row 0 whole."""
    g = torch.Generator().manual_seed(SEED)
    masks = torch.rand(n, int(labels.max()) + 1, generator=g) < 0.5
    masks[0] = True
    keep = masks.to(x.device)[:, labels.reshape(-1)].view(n, 1, *x.shape[-2:])
    return torch.where(keep, x, torch.full_like(x, 0.5))


def systems(model, x, labels, n: int, captum, store: dict) -> dict[str, Callable[[], object]]:
    """The calls to time; ``store`` receives the fill call's chosen chunk size."""

    def quiet(fn: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return fn()

        return run

    def fill() -> object:
        exp = explain_image(model, x, segments=labels, baseline=0.5, n_samples=n, generator=SEED)
        store["chunk"] = exp.meta["batch_size"]
        return exp

    out = {
        "drop": quiet(lambda: explain_image(model, x, baseline="drop", n_samples=n, generator=SEED)),
        "fill": quiet(fill),
    }
    rows = grey_rows(x, labels, n)
    out["floor"] = lambda: forward_rows(model, rows, store.get("chunk") or n)()
    if captum is not None:
        with torch.inference_mode():
            target = int(model(x).argmax(1))
        mask = labels.view(1, 1, *labels.shape[-2:])
        out["captum"] = quiet(
            lambda: captum.Lime(model).attribute(x, target=target, feature_mask=mask, n_samples=n, baselines=0.5)
        )
    return out


def agreement(model, x: torch.Tensor, rows: int = 6) -> float:
    """Max |drop output - batch-1 reference| over a few samples of a drop call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain_image(model, x, baseline="drop", n_samples=rows, generator=SEED, return_samples=True)
    fam = vit_family(model)
    p = fam.patch
    worst = 0.0
    with torch.inference_mode():
        tokens = fam.embed(x)
        cols = exp.features[0, 0, ::p, ::p].reshape(-1)
        for s in range(rows):
            kept = exp.samples[0, s][cols].nonzero()[:, 0] + fam.n_prefix
            idx = torch.cat([torch.arange(fam.n_prefix, device=x.device), kept])
            ref = fam.encode(tokens[:, idx])[0, exp.target[0]].float().cpu()
            worst = max(worst, float((ref - exp.outputs[0, s].cpu()).abs().max()))
    return worst


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--n-samples", type=int, default=None, help="N (default: 250 on CPU, 1000 on CUDA)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, quick 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = size_defaults(parser.parse_args(), dict(reps=(1, 3)))
    device = device_arg(args.device)
    if args.n_samples is None:
        args.n_samples = 24 if args.quick else 1000 if device.type == "cuda" else 250
    smoke_threads(args, device)
    load_before = load_average()
    captum, captum_missing = optional_module("captum.attr")
    config = TINY if args.quick else FULL
    model = vit(config, device)
    size, patch = config["image_size"], config["patch_size"]
    x = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(0)).to(device)
    labels = grid(x, size // patch, size // patch)[0]
    store: dict = {}
    fns = systems(model, x, labels, args.n_samples, captum, store)
    fns["fill"]()  # the fill call first (also its warm-up): the floor runs in its chunk size
    fns["drop"]()  # warm-up; the floor and captum are plain model calls, warmed up by these
    times: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(args.reps):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {f"{k}_over_floor": med[k] / med["floor"] for k in med if k != "floor"}
    result = dict(
        header(device),
        threads=torch.get_num_threads() if device.type == "cpu" else None,
        load_average_1_5_15=load_average(),
        load_average_1_5_15_at_start=load_before,
        quick=args.quick,
        captum_missing=captum_missing,
        setup=dict(
            model="torchvision VisionTransformer " + ("(ViT-S/16 shape)" if not args.quick else "(tiny)"),
            config=config,
            features=(size // patch) ** 2,
            keep_probability=0.5,
            n_samples=args.n_samples,
            reps=args.reps,
            seed=SEED,
            fill_chunk=store.get("chunk"),
        ),
        systems={k: dict(seconds=summary(v)) for k, v in times.items()},
        ratios=ratios,
        goals=dict(
            drop_over_floor=goal(
                "drop <= 0.6x the fill-based forward floor", ratios["drop_over_floor"], 0.6, quick=args.quick
            )
        ),
        drop_vs_batch1_reference_max_abs=agreement(model, x),
    )
    print({k: round(v, 3) for k, v in med.items()}, {k: round(v, 3) for k, v in ratios.items()})
    name = f"token_drop_{device.type}{'_quick' if args.quick else ''}.json"
    print("wrote", write(name, result, args.out))


if __name__ == "__main__":
    main()
