"""Amortized explanations against LIME, side by side in one run, on an image and a tabular model.

Two models are trained here on bundled scikit-learn data: a small CNN on the digits (8x8 upsampled to
16x16, features a grid of 4x4 cells of 4x4 pixels: F = 16) and an MLP on the breast-cancer table
(standardised, features its 30 columns, the fill 0 = the column means). Both explain probabilities
(a softmax after the model). For each, on held-out inputs (the test split):

* the reference: LIME (the engine's defaults) at N = 4096;
* for every label N of ``--label-samples``: the labels' own rank correlation with the reference (LIME at
  that N), and the head trained on them (``AmortizedExplainer.fit`` on the training split);
* the rank correlation (Spearman over the features, median over the inputs) and the deletion AUC
  (``torchlime.metrics.deletion``, lower is better) of each, against the reference's;
* the time per explanation of the head of the default N (``DEFAULT_SAMPLES`` for the digits,
  ``TABLE_SAMPLES`` for the table; batch 256, one forward of the head and one of the model for the top
  class) against LIME at N = 1000 (batch 256), in the same run, and the whole cost (labels + training)
  against explaining the training split with LIME at N = 1000 directly.

Goals: median rank correlation >= 0.8 and above LIME at N = 32; deletion AUC at most 1.1x
LIME's; >= 50x faster than LIME at N = 1000 on the CPU.

    python benchmarks/bench_amortized.py                      # writes results/amortized_cpu.json
    python benchmarks/bench_amortized.py --device cuda
    python benchmarks/bench_amortized.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import statistics
import time

import torch

import torchlime
from torchlime.amortized import DEFAULT_SAMPLES, TABLE_SAMPLES, AmortizedExplainer, spearman
from torchlime.metrics import deletion

from benchmarks.common import common_args, device_arg, goal, header, load_average, sync, write


def digits(device: torch.device, quick: bool):
    """Digits upsampled to 16x16 and a small CNN trained on them; 16 grid features."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16
    x = torch.nn.functional.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False)
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the initial weights
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 10),
    )  # fmt: skip
    cells = (torch.arange(16).view(16, 1) // 4 * 4 + torch.arange(16).view(1, 16) // 4).view(1, 1, 16, 16)
    return train(cnn, x, y, g, device, epochs=1 if quick else 4), x, y, cells


def cancer(device: torch.device, quick: bool):
    """The breast-cancer table, standardised, and an MLP trained on it; 30 column features."""
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x = torch.tensor(d.data, dtype=torch.float32)
    x = (x - x.mean(0)) / x.std(0)
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the initial weights
    mlp = torch.nn.Sequential(torch.nn.Linear(30, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    return train(mlp, x, y, g, device, epochs=5 if quick else 60), x, y, torch.arange(30).view(1, 30)


def train(net, x, y, g, device, epochs: int):
    """Train ``net`` with Adam on (x, y); returns it with a softmax after it, in eval mode, on ``device``."""
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(epochs):
        for idx in torch.randperm(x.shape[0], generator=g).split(64):
            loss = torch.nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return torch.nn.Sequential(net, torch.nn.Softmax(-1)).eval().to(device)


def rank(coef: torch.Tensor, ref: torch.Tensor) -> float:
    """Median Spearman correlation of (B, 1, F) coefficients with the reference's."""
    return float(spearman(coef[:, 0], ref[:, 0]).nanmedian())


def auc(model, x, exp) -> float:
    """Mean deletion AUC (the plain blend with the fill 0, for every explanation alike)."""
    import dataclasses

    return float(deletion(model, x, dataclasses.replace(exp, perturbation=None), baseline=0.0).mean())


def timed_median(fn, device, reps: int) -> float:
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def case(name, model, x, feats, device, args) -> dict:
    """Every figure of one model (see the module)."""
    g = torch.Generator().manual_seed(1)
    order = torch.randperm(x.shape[0], generator=g)
    n_eval = 32 if args.quick else 100
    test, trainset = x[order[:n_eval]].to(device), x[order[n_eval:]].to(device)
    lime = torchlime.Explainer()
    top = model(test).argmax(-1, keepdim=True)
    ref = lime.explain(model, test, feats, target=top, n_samples=args.reference, generator=7)
    out: dict = dict(model=name, eval_inputs=n_eval, train_inputs=trainset.shape[0], features=int(feats.max()) + 1)
    out["reference"] = dict(n_samples=args.reference, deletion_auc=auc(model, test, ref))
    default_n = args.default_n or (TABLE_SAMPLES if name == "cancer" else DEFAULT_SAMPLES)
    out["default_label_samples"] = default_n
    rows = []
    for n in sorted({*args.label_samples, default_n}):
        labels = lime.explain(model, test, feats, target=top, n_samples=n, generator=3)
        t0 = time.perf_counter()
        amort = AmortizedExplainer.fit(
            model, trainset, modality=feats, n_samples=n, epochs=args.epochs, generator=0, report_samples=None
        )
        sync(device)
        fit_seconds = time.perf_counter() - t0
        head = amort.explain(test, top)
        rows.append(
            dict(
                label_samples=n,
                fit_seconds=fit_seconds,
                head_rank_correlation=rank(head.coef, ref.coef),
                lime_rank_correlation=rank(labels.coef, ref.coef),
                head_deletion_auc=auc(model, test, head),
                lime_deletion_auc=auc(model, test, labels),
                flagged_out_of_distribution=len(head.meta["quality"]["out_of_distribution"]),
            )
        )
        print(name, rows[-1], flush=True)
    out["by_label_samples"] = rows
    lime32 = lime.explain(model, test, feats, target=top, n_samples=32, generator=3)
    out["lime_32"] = dict(rank_correlation=rank(lime32.coef, ref.coef), deletion_auc=auc(model, test, lime32))
    # time per explanation at batch 256, the head (of the default N) against LIME at N=1000, in this run
    batch = trainset[:256]
    amort = AmortizedExplainer.fit(
        model, trainset, modality=feats, n_samples=default_n, epochs=args.epochs, generator=0, report_samples=None
    )
    head_s = timed_median(lambda: amort.explain(batch), device, args.reps)
    lime_s = timed_median(lambda: lime.explain(model, batch, feats, n_samples=args.lime_n), device, 1)
    chosen = next(r for r in rows if r["label_samples"] == default_n)
    direct = lime_s / batch.shape[0] * trainset.shape[0]
    out["speed"] = dict(
        batch=batch.shape[0],
        head_seconds_per_batch=head_s,
        lime_seconds_per_batch=lime_s,
        lime_n_samples=args.lime_n,
        speedup=lime_s / head_s,
        whole_cost_seconds=chosen["fit_seconds"],
        direct_lime_seconds_estimated=direct,
        whole_cost_ratio=chosen["fit_seconds"] / direct,
    )
    chosen_auc = chosen["head_deletion_auc"] / out["reference"]["deletion_auc"]
    corr = chosen["head_rank_correlation"]
    out["goals"] = [
        goal("head rank correlation with LIME at N=4096 (median)", corr, 0.8, ">=", args.quick),
        goal(
            "head rank correlation minus LIME's at N=32",
            corr - out["lime_32"]["rank_correlation"],
            0.0,
            ">=",
            args.quick,
        ),
        goal("head deletion AUC / LIME N=4096's", chosen_auc, 1.1, "<=", args.quick),
        goal("speedup over LIME at N=1000, batch 256", out["speed"]["speedup"], 50.0, ">=", args.quick),
    ]
    print(name, out["speed"], flush=True)
    return out


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    ap.add_argument(
        "--label-samples", type=int, nargs="+", default=None, help="label N of the heads trained (default 16 64 256)"
    )
    ap.add_argument("--default-n", type=int, default=None, help="the label N timed (default: fit's own by model)")
    ap.add_argument("--epochs", type=int, default=None, help="training epochs of the head (default 30; quick 3)")
    ap.add_argument("--reference", type=int, default=None, help="N of the reference LIME (default 4096; quick 256)")
    ap.add_argument("--lime-n", type=int, default=None, help="N of the timed LIME (default 1000; quick 100)")
    ap.add_argument("--reps", type=int, default=5, help="repetitions of the head's timing")
    ap.add_argument("--models", nargs="+", default=["digits", "cancer"], choices=["digits", "cancer"])
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args()
    device = device_arg(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    q = args.quick
    args.label_samples = args.label_samples or ([16, 64] if q else [16, 64, 256])
    args.epochs = args.epochs or (3 if q else 30)
    args.reference = args.reference or (256 if q else 4096)
    args.lime_n = args.lime_n or (100 if q else 1000)
    result = header(device)
    result.update(
        benchmark="amortized", quick=q, threads=torch.get_num_threads(), load_average_1_5_15_start=load_average()
    )
    t0 = time.perf_counter()
    cases = []
    for name in args.models:
        model, x, _, feats = (digits if name == "digits" else cancer)(device, q)
        cases.append(case(name, model, x, feats.to(device), device, args))
    result.update(cases=cases, seconds=time.perf_counter() - t0, load_average_1_5_15_end=load_average())
    suffix = "_quick" if q else ""
    path = write(f"amortized_{device.type}{suffix}.json", result, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
