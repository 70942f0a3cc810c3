"""Where the mask designs gain less, and what design-aware standard errors and stopping would give there.

The engine's mask designs (Sobol's, and the factorial one that is the default, with ``Ridge(alpha=0.01)``) are
much more accurate than lime's Bernoulli masks at equal N on ``bench_lime_designs``' trained and real models.
This benchmark measures them on a second family, random tanh MLPs (F = 12, 16, 24, 40 features, two weight
seeds each, 16 inputs in [0, 2]^F, one output; a feature hidden is 0), and asks whether the standard errors
and ``n_samples="auto"`` should read the default design's own error from nested prefixes of one call
(``design_effect_lib``) instead of the i.i.d. formula:

For each of ``DESIGNS`` (Sobol's and the factorial masks):

1. accuracy: median relative error ||β - β_ref|| / ||β_ref|| against lime's design at N = 16384 (Bernoulli,
   ``Ridge(alpha=1)``, generator 12345) at N = 250, 500, 1000, beside lime's design at N = 1000, over inputs and
   ``SEEDS``; ``ratio_250`` is the design's at 250 over lime's at 1000 (the goal of 4x fewer calls is <= 1);
2. coverage: the share of 95 % intervals at N = 250 ... 2000 that hold the design's own answer at N = 65536
   (generator 999): ``coef ± 1.96 se`` with the i.i.d. se, the pooled design effect's t intervals, and the
   library's ``coef_se`` (``stages.design_error`` for the factorial masks, the i.i.d. se for Sobol's); 90-98 % is
   calibrated;
3. stopping: an "as precise as lime at 1000" rule (rounds 250, 500, ..., ``RUN``) with the design effect of
   the last round's movement (``levels=1``) or pooled over three halvings: median calls and median error
   against the reference, beside lime's N = 1000 error (the target).

With ``--cache DIR`` (the model calls ``bench_adaptive_se.py --cache DIR`` keeps) the same coverage and stopping
figures are added for its six models, with the default design; their intervals are checked against its N = 16384
reference with the reference's own i.i.d. variance added (half that of the N = 8192 default fit), since no long
default run is kept there.

    python benchmarks/bench_design_effect.py                  # about 10 minutes on 2 cores
    python benchmarks/bench_design_effect.py --cache DIR      # plus bench_adaptive_se's six models
    python benchmarks/bench_design_effect.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import statistics
import warnings

import torch

from torchlime import explain
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.stages.sampling import BernoulliSampler
from torchlime.stages.surrogate import Ridge

from benchmarks import design_effect_lib as lib
from benchmarks.bench_lime_designs import relative_errors
from benchmarks.common import common_args, header, write

FEATURES, MODEL_SEEDS, INPUTS, SEEDS = [12, 16, 24, 40], [0, 1], 16, [1, 2, 3, 4, 5, 6]
N_REF, N_EXACT, RUN = 16384, 65536, 2048
FIXED, COVER, START = [250, 500, 1000], [250, 500, 1000, 2000], 250
QUICK = dict(features=[12], model_seeds=[0], inputs=4, seeds=[1, 2], n_ref=2048, n_exact=4096, run=1024)
LIME = dict(sampler=BernoulliSampler(), surrogate=Ridge(alpha=1.0))
#: the designs measured on the MLPs (the default is the factorial one; the six models of --cache: the default)
DESIGNS = ("sobol", "factorial")


def mlp(f: int, seed: int, inputs: int) -> tuple:
    """A random tanh MLP (f -> 32 -> 1), its inputs (inputs, f) in [0, 2] and one feature per column."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(f, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).requires_grad_(False)
    x = torch.rand(inputs, f, generator=torch.Generator().manual_seed(seed)) * 2
    return model, x, torch.arange(f).view(1, f)


def coverage(
    runs: list[dict], truth: torch.Tensor, extra_var: list[torch.Tensor], sizes: list[int], designed: bool = True
) -> dict:
    """Per N: the share of valid coefficients whose i.i.d., pooled and library 95 % intervals hold ``truth`` (B, F),
    and the library's over the i.i.d. width (median over coefficients, inputs and seeds).

    ``library``: ``coef ± 1.96 coef_se`` as the library gives it: scaled by ``design_factor`` for a ``designed``
    call (the factorial masks), the i.i.d. one otherwise.
    """
    out = {}
    for n in sizes:
        hits = dict(iid=0, pooled=0, library=0)
        total, factors = 0, []
        for run, extra in zip(runs, extra_var):
            x, y, valid = run["samples"], run["outputs"], run["valid"]
            chain = lib.halvings(x, y, valid, n)
            now = chain[0]
            deff, dof, _ = lib.pooled_design_effect(chain, valid)
            gap = (now.coef - truth).abs()
            iid = gap <= 1.96 * (now.se**2 + extra).sqrt()
            t = lib.quantile("t", dof, 0.975).unsqueeze(1)
            pooled = gap <= t * (deff.unsqueeze(1) * now.se**2 + extra).sqrt()
            se = lib.library_se(chain, valid) if designed else now.se
            factors.append((se / now.se)[valid & (now.se > 0)])
            library = gap <= 1.96 * (se**2 + extra).sqrt()
            hits["library"] += int(library[valid].sum())
            hits["iid"] += int(iid[valid].sum())
            hits["pooled"] += int(pooled[valid].sum())
            total += int(valid.sum())
        out[str(n)] = {k: v / total for k, v in hits.items()}
        out[str(n)]["library_width"] = float(torch.cat(factors).median())  # over the i.i.d. one, median coefficient
    return out


def rules(runs: list[dict], ref: torch.Tensor, cap: int, lime: list[list[float]]) -> dict:
    """Median calls and error (against ``ref``) of the rule with one level and with pooled levels, and the share
    of inputs whose root mean squared error over the runs is at most that of lime's N = 1000 (``lime``: per run,
    per input)."""
    out = {}
    lime_rms = torch.tensor(lime).pow(2).mean(0).sqrt()
    for name, levels in (("last_round", 1), ("pooled", lib.LEVELS)):
        calls: list = []
        errs: list = []
        for run in runs:
            x, y, valid = run["samples"], run["outputs"], run["valid"]
            used = lib.lime_rule_stops(x, y, valid, START, cap, levels)
            for b, m in enumerate(used):
                calls.append(cap if m is None else m)
                errs.append(relative_errors(lib.prefix_fit(x, y, valid, calls[-1]).coef[b : b + 1], ref[b : b + 1])[0])
        rms = torch.tensor(errs).view(len(runs), -1).pow(2).mean(0).sqrt()
        out[name] = dict(
            median_calls=statistics.median(calls),
            median_error=statistics.median(errs),
            inputs_as_precise_as_lime=float((rms <= lime_rms).double().mean()),
        )
    return out


def run_mlp(f: int, seed: int, cfg: dict) -> dict:
    """Every figure of one random MLP, for each of ``DESIGNS``."""
    model, x, feats = mlp(f, seed, cfg["inputs"])
    ref = explain(model, x, feats, n_samples=cfg["n_ref"], generator=12345, **LIME).coef[:, 0].double()
    lime_err = [
        relative_errors(explain(model, x, feats, n_samples=1000, generator=s, **LIME).coef[:, 0], ref)
        for s in cfg["seeds"]
    ]
    out = dict(model=f"mlp_f{f}_seed{seed}", features=f, inputs=cfg["inputs"], seeds=cfg["seeds"])
    out["lime_1000"] = statistics.median([e for run in lime_err for e in run])
    out["designs"] = {}
    for design in DESIGNS:
        truth = explain(model, x, feats, n_samples=cfg["n_exact"], generator=999, sampler=design).coef[:, 0].double()
        runs, errors = [], {n: [] for n in FIXED}
        for s in cfg["seeds"]:
            exp = explain(model, x, feats, n_samples=cfg["run"], generator=s, sampler=design, return_samples=True)
            runs.append(dict(samples=exp.samples, outputs=exp.outputs, valid=exp.valid))
            for n in FIXED:
                errors[n] += relative_errors(exp.refit(n_samples=n).coef[:, 0], ref)
        fig: dict = dict(errors={str(n): statistics.median(e) for n, e in errors.items()})
        fig["ratio_250"] = fig["errors"]["250"] / out["lime_1000"]
        sizes = [n for n in COVER if n <= cfg["run"]]
        fig["coverage"] = coverage(runs, truth, [torch.zeros(()) for _ in runs], sizes, design == "factorial")
        fig["rules"] = rules(runs, ref, cfg["run"], lime_err)
        out["designs"][design] = fig
    return out


def run_cached(name: str, path: _Path) -> dict:
    """Coverage (against the reference, its variance added) and the rules on one model of bench_adaptive_se."""
    data = torch.load(path, weights_only=True)
    ref = data["ref"].double()
    runs = [dict(samples=r["samples"], outputs=r["outputs"], valid=r["valid"]) for r in data["default"].values()]
    cap = runs[0]["samples"].shape[1]
    ref_var = [lib.prefix_fit(r["samples"], r["outputs"], r["valid"], cap).var * (cap / 16384) for r in runs]
    lime = [relative_errors(data["lime"][seed][1000], ref) for seed in data["default"]]
    out = dict(model=name, inputs=ref.shape[0], seeds=list(data["default"]))
    out["lime_1000"] = statistics.median([e for run in lime for e in run])
    out["coverage"] = coverage(runs, data["ref_default_alpha"].double(), ref_var, COVER)
    out["rules"] = rules(runs, ref, cap, lime)
    return out


def table(payload: dict) -> str:
    """The markdown table of docs/choosing-n.md, from the JSON: one row per model and design."""

    def cov(fig: dict, kind: str) -> str:
        return " / ".join(f"{fig['coverage'][str(n)][kind]:.2f}" for n in COVER if str(n) in fig["coverage"])

    def rule(fig: dict, name: str) -> str:
        r = fig["rules"][name]
        return f"{r['median_calls']:.0f}, {r['median_error']:.4f}, {100 * r['inputs_as_precise_as_lime']:.0f} %"

    head = [
        "model",
        "masks",
        "N=250 error over lime's at N=1000",
        "95 % intervals, i.i.d. (N=250 / 500 / 1000 / 2000)",
        "pooled design effect",
        "coef_se (the library's)",
        "lime N=1000 error (target)",
        "rule, last round: calls, error, inputs as precise as lime",
        "rule, pooled: calls, error, inputs as precise as lime",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    rows = [(r, d, fig) for r in payload["mlp"] for d, fig in r["designs"].items()]
    rows += [(r, "factorial (default)", r) for r in payload["cached"]]
    for r, design, fig in rows:
        ratio = f"{fig['ratio_250']:.2f}" if "ratio_250" in fig else "-"
        cells = [r["model"], design, ratio, cov(fig, "iid"), cov(fig, "pooled"), cov(fig, "library")]
        cells.append(f"{r['lime_1000']:.4f}")
        lines.append("| " + " | ".join([*cells, rule(fig, "last_round"), rule(fig, "pooled")]) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--cache", type=_Path, default=None, help="bench_adaptive_se's --cache folder: add its models")
    ap.add_argument("--table", action="store_true", help="print the docs table of the JSON under --out, run nothing")
    args = ap.parse_args()
    if args.table:
        print(table(json.loads((args.out / "design_effect_cpu.json").read_text())))
        return
    torch.set_num_threads(max(1, torch.get_num_threads()))
    cfg = (
        QUICK
        if args.quick
        else dict(
            features=FEATURES,
            model_seeds=MODEL_SEEDS,
            inputs=INPUTS,
            seeds=SEEDS,
            n_ref=N_REF,
            n_exact=N_EXACT,
            run=RUN,
        )
    )
    file = "design_effect_cpu_quick.json" if args.quick else "design_effect_cpu.json"
    out = dict(
        header(torch.device("cpu")), benchmark="bench_design_effect", quick=args.quick, plan=cfg, mlp=[], cached=[]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        for f in cfg["features"]:
            for seed in cfg["model_seeds"]:
                r = run_mlp(f, seed, cfg)
                out["mlp"].append(r)
                print(
                    f"{r['model']}: {r['designs']}",
                    flush=True,
                )
                write(file, out, args.out)
        if args.cache is not None and not args.quick:
            for path in sorted(args.cache.glob("*.pt")):
                if path.stem.endswith("_quick"):
                    continue
                r = run_cached(path.stem, path)
                out["cached"].append(r)
                print(
                    f"{r['model']}: coverage {r['coverage']} rules {r['rules']} target {r['lime_1000']:.4f}", flush=True
                )
                write(file, out, args.out)
    print(f"wrote {write(file, out, args.out)}")


if __name__ == "__main__":
    main()
