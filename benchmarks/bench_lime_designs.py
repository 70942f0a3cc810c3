"""LIME coefficient error per mask design and ridge penalty at N = 250, 500, 1000.

For every model, a reference explanation at N = 16 384 (Bernoulli(1/2) masks, ``Ridge(alpha=1)``, its
own seed) gives beta_ref per input. Each design (Bernoulli, Sobol, antithetic, stratified) then explains
the same inputs at N = 1000 with ``return_samples=True`` under several seeds, all inputs in one engine
call per (design, seed); ``Explanation.refit`` fits the first N = 250, 500, 1000 samples again with every
ridge penalty of ``ALPHAS`` without calling the model (bit for bit a call at that N). The error of an input
is ||beta_N - beta_ref|| / ||beta_ref|| (the explained class's coefficients); a cell's figure is the median
over inputs and seeds. Alpha rules: a fixed alpha, and alpha per sample (alpha = c * N / 1000).

Models: ``bench_sample_efficiency``'s five (a planted sparse linear model over image cells, the demo CNN,
the demo spectrogram CNN, the demo TextCNN, a random-weight mobilenet_v3_small at 64 x 64) and an MLP
trained here on scikit-learn's digits (seeded, a few seconds), explained over 16 cells of 2 x 2 pixels.
Plots of error against model calls (one line per design) go to docs/_static/figures/.

    python benchmarks/bench_lime_designs.py                     # every model, about 10 minutes per model on 2 cores
    python benchmarks/bench_lime_designs.py --models digits_mlp --resume
    python benchmarks/bench_lime_designs.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import statistics
import time
import warnings

import torch

from torchlime import explain
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.designs import AntitheticSampler, FactorialSampler, SobolSampler, StratifiedSampler
from torchlime.stages.features import cell_ids
from torchlime.stages.sampling import BernoulliSampler
from torchlime.stages.surrogate import Ridge

from benchmarks.bench_sample_efficiency import DEFAULT_MODELS, cases
from benchmarks.common import common_args, header, write

DESIGNS = {
    "bernoulli": BernoulliSampler(),
    "sobol": SobolSampler(),
    "antithetic": AntitheticSampler(),
    "stratified": StratifiedSampler(),
    "factorial": FactorialSampler(),
}
SIZES = [250, 500, 1000]
ALPHAS = [0.0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]
#: alpha rules: name -> alpha at N (each value in ALPHAS at every N of SIZES)
RULES = {
    "alpha=1": lambda n: 1.0,
    "alpha=0.1": lambda n: 0.1,
    "alpha=0.01": lambda n: 0.01,
    "alpha=0": lambda n: 0.0,
    "alpha=N/1000": lambda n: n / 1000,
    "alpha=0.1*N/1000": lambda n: 0.1 * n / 1000,
}
MODELS = [*DEFAULT_MODELS, "digits_mlp"]


def digits_case(n_inputs: int) -> tuple:
    """An MLP (64-64-10) trained on scikit-learn's digits (seeded), its held-out inputs and 16 cells of 2 x 2."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32).view(-1, 1, 8, 8) / 16
    y = torch.tensor(y)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, test = perm[:1400], perm[1400:]
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-2)
    for _ in range(300):  # full-batch epochs
        opt.zero_grad()
        torch.nn.functional.cross_entropy(mlp(x[train]), y[train]).backward()
        opt.step()
    mlp.eval()
    with torch.no_grad():
        accuracy = (mlp(x[test]).argmax(1) == y[test]).float().mean().item()
    return mlp.requires_grad_(False), x[test[:n_inputs]], cell_ids((8, 8), (4, 4)).view(1, 1, 8, 8), {}, accuracy


def coefficients(exp) -> torch.Tensor:
    """Float64 (B, F): the explained class's coefficients (padded features 0)."""
    return exp.coef[:, 0].double().nan_to_num(0.0)


def relative_errors(coef: torch.Tensor, ref: torch.Tensor) -> list[float]:
    """||coef - ref|| / ||ref|| per input."""
    return ((coef - ref).norm(dim=1) / ref.norm(dim=1).clamp_min(1e-12)).tolist()


def run(name, model, x, f, kw, n_ref, seeds, log, designs: tuple = tuple(DESIGNS)) -> dict:
    """One model: the reference, then every design (of ``designs``) and seed at the largest N, refitted at each N
    and alpha."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        t0 = time.perf_counter()
        ref = coefficients(
            explain(
                model,
                x,
                f,
                n_samples=n_ref,
                sampler=BernoulliSampler(),
                surrogate=Ridge(alpha=1.0),
                generator=12345,
                **kw,
            )
        )
        out = dict(model=name, inputs=x.shape[0], n_reference=n_ref, seeds=seeds, errors={})
        out["reference_seconds"] = time.perf_counter() - t0
        for design in designs:
            sampler = DESIGNS[design]
            errs = {str(n): {str(a): [] for a in ALPHAS} for n in SIZES}
            for seed in seeds:
                full = explain(
                    model, x, f, n_samples=max(SIZES), sampler=sampler, generator=seed, return_samples=True, **kw
                )
                for n in SIZES:
                    for a in ALPHAS:
                        coef = coefficients(full.refit(surrogate=Ridge(alpha=a), n_samples=n))
                        errs[str(n)][str(a)] += relative_errors(coef, ref)
            out["errors"][design] = errs
            med = {n: statistics.median(errs[n]["1.0"]) for n in errs}
            log(f"{name} {design}: median error at alpha=1 {med}")
        out["seconds"] = time.perf_counter() - t0
    return summarise(out) if set(designs) == set(DESIGNS) else out


def summarise(result: dict) -> dict:
    """Median errors per design, rule and N, and which (design, rule) beats Bernoulli at alpha=1 at equal N.

    ``median``: design -> rule -> N -> the median error over inputs and seeds. ``beats_bernoulli``: design ->
    rule -> whether its median error is below Bernoulli's (alpha=1) at every N; ``beats_bernoulli_same_rule``
    the same against Bernoulli under the same rule (the design alone).
    """
    med: dict = {}
    for design, errs in result["errors"].items():
        med[design] = {
            rule: {str(n): statistics.median(errs[str(n)][str(alpha(n))]) for n in SIZES}
            for rule, alpha in RULES.items()
        }
    base = med["bernoulli"]["alpha=1"]
    result["median"] = med
    result["beats_bernoulli"] = {
        d: {rule: all(m[rule][str(n)] < base[str(n)] for n in SIZES) for rule in RULES} for d, m in med.items()
    }
    result["beats_bernoulli_same_rule"] = {
        d: {rule: all(m[rule][str(n)] < med["bernoulli"][rule][str(n)] for n in SIZES) for rule in RULES}
        for d, m in med.items()
        if d != "bernoulli"
    }
    result["bernoulli_1000_alpha1"] = base[str(max(SIZES))]
    return result


def verdict(results: list[dict]) -> dict:
    """Per (design, rule): on how many models it beats Bernoulli (alpha=1) at every N, and the error ratios."""
    out: dict = {}
    for design in DESIGNS:
        for rule in RULES:
            wins = [r["model"] for r in results if r["beats_bernoulli"][design][rule]]
            ratio_250 = [
                r["median"][design][rule]["250"] / r["bernoulli_1000_alpha1"] for r in results
            ]  # <= 1: N = 250 as accurate as Bernoulli at N = 1000
            out[f"{design} {rule}"] = dict(
                models_beating_bernoulli=wins,
                count=len(wins),
                error_250_over_bernoulli_1000=dict(zip([r["model"] for r in results], ratio_250)),
            )
    return out


def table(payload: dict, rule: str = "alpha=0.01") -> str:
    """The markdown table of docs/choosing-n.md, from the JSON: median errors of Bernoulli with alpha=1 (the
    former default) and of every design under ``rule``, at each N."""
    designs = list(DESIGNS)
    head = ["model", "Bernoulli, alpha=1"] + [f"{d.capitalize()}, {rule}" for d in designs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in payload["results"]:
        cells = [f"{r['model']} ({r['inputs']} inputs x {len(r['seeds'])} seeds)"]
        cells.append(" / ".join(f"{r['median']['bernoulli']['alpha=1'][str(n)]:.4f}" for n in SIZES))
        for d in designs:
            cells.append(" / ".join(f"{r['median'][d][rule][str(n)]:.4f}" for n in SIZES))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list[dict], rule: str, folder: _Path) -> list[str]:
    """One PNG per model: median error against model calls, one line per design (``rule``'s alpha),
    and Bernoulli with alpha=1 (the former default) dashed. Returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    n_models = len(results)
    cols = 3
    rows = -(-n_models // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results):
        for design in DESIGNS:
            ys = [r["median"][design][rule][str(n)] for n in SIZES]
            ax.plot(SIZES, ys, marker="o", label=f"{design} ({rule})")
        ys = [r["median"]["bernoulli"]["alpha=1"][str(n)] for n in SIZES]
        ax.plot(SIZES, ys, "k--", marker="x", label="bernoulli (alpha=1)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(SIZES, [str(n) for n in SIZES])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # only the three N labelled
        ax.set_title(r["model"], fontsize=9)
        ax.set_xlabel("model calls per input (N)", fontsize=8)
        ax.set_ylabel("median relative error", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n_models:]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    folder.mkdir(parents=True, exist_ok=True)
    name = "lime_designs.png"
    fig.savefig(folder / name, dpi=80)
    plt.close(fig)
    return [name]


def add_design(design: str, path: _Path, models, rule: str, figures: _Path) -> None:
    """Measure ``design`` on the models of the JSON at ``path`` (all, or ``models``) and write it back."""
    payload = json.loads(path.read_text())
    for r in payload["results"]:
        if models and r["model"] not in models:
            continue
        if r["model"] == "digits_mlp":
            model, x, f, kw, _ = digits_case(r["inputs"])
        else:
            model, x, f, kw = cases(r["inputs"])[r["model"]]
        added = run(r["model"], model, x, f, kw, r["n_reference"], r["seeds"], print, (design,))
        r["errors"][design] = added["errors"][design]
        r.setdefault("added", {})[design] = dict(seconds=added["seconds"], **header(torch.device("cpu")))
        summarise(r)
        path = write(path.name, payload, path.parent)
        print(f"added {design} to {r['model']} in {path}", flush=True)
    if all(design in r["errors"] for r in payload["results"]):
        payload["verdict"] = verdict(payload["results"])
        payload["figures"] = plot(payload["results"], rule, figures)
        write(path.name, payload, path.parent)


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--inputs", type=int, default=16)
    ap.add_argument("--reference", type=int, default=16384)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=None, choices=MODELS)
    ap.add_argument("--rule", default="alpha=0.01", choices=list(RULES), help="the alpha rule the plot draws")
    ap.add_argument("--figures", type=_Path, default=_Path(__file__).resolve().parents[1] / "docs/_static/figures")
    ap.add_argument("--resume", action="store_true", help="keep the models already in the JSON; run the others")
    ap.add_argument("--table", action="store_true", help="print the docs table of the JSON under --out, run nothing")
    ap.add_argument(
        "--add",
        choices=list(DESIGNS),
        default=None,
        help="measure this design on the models of the JSON under --out (their inputs and seeds) and add it; the "
        "reference is made again (the same seed makes the same one)",
    )
    args = ap.parse_args()
    if args.table:
        print(table(json.loads((args.out / "lime_designs_cpu.json").read_text()), args.rule))
        return
    torch.set_num_threads(max(1, torch.get_num_threads()))
    if args.add is not None:
        add_design(args.add, args.out / "lime_designs_cpu.json", args.models, args.rule, args.figures)
        return
    n_inputs, n_ref, seeds = (
        (3, 2048, [1]) if args.quick else (args.inputs, args.reference, list(range(1, 1 + args.seeds)))
    )
    names = args.models or (["planted_linear", "digits_mlp"] if args.quick else MODELS)
    file = "lime_designs_cpu_quick.json" if args.quick else "lime_designs_cpu.json"
    path = args.out / file
    out = dict(
        header(torch.device("cpu")),
        benchmark="bench_lime_designs",
        quick=args.quick,
        sizes=SIZES,
        alphas=ALPHAS,
        rules=list(RULES),
        n_reference=n_ref,
        results=[],
    )
    if args.resume and path.exists():
        out["results"] = [summarise(r) for r in json.loads(path.read_text())["results"]]
    done = {r["model"] for r in out["results"]}
    shared = cases(n_inputs) if any(n in DEFAULT_MODELS and n not in done for n in names) else {}
    for name in names:
        if name in done:
            print(f"{name}: already in {path}, kept")
            continue
        if name == "digits_mlp":
            model, x, f, kw, accuracy = digits_case(n_inputs)
            print(f"digits MLP: held-out accuracy {accuracy:.3f}")
        else:
            (model, x, f, kw), accuracy = shared[name], None
        result = run(name, model, x, f, kw, n_ref, seeds, print)
        if accuracy is not None:
            result["model_accuracy"] = accuracy
        out["results"].append(result)
        out["results"].sort(key=lambda r: MODELS.index(r["model"]))
        out["verdict"] = verdict(out["results"])
        path = write(file, out, args.out)
        print(f"wrote {path} ({name})")
    figures = args.out if args.quick else args.figures  # a smoke run's plot stays beside its JSON
    out["figures"] = plot(out["results"], args.rule, figures)
    write(file, out, args.out)
    print(f"plots: {', '.join(str(figures / f) for f in out['figures'])}")
    best = sorted(out["verdict"].items(), key=lambda kv: -kv[1]["count"])[:6]
    print(json.dumps({k: v["count"] for k, v in best}))


if __name__ == "__main__":
    main()
