"""Calls ``Adaptive(se=s)`` and ``n_samples="auto"`` spend with the default design to reach Bernoulli's N=1000 error.

The models, inputs, reference and error of ``bench_lime_designs`` (point (b)): per model a reference
explanation at N = ``n_ref`` (Bernoulli(1/2) masks, ``Ridge(alpha=1)``, generator 12345); an explanation's
error is ||beta - beta_ref|| / ||beta_ref|| over the explained class's coefficients; a setting's figures are
the median error and the median model calls per input over inputs and seeds. The target is the median error of
lime's design (Bernoulli masks, ``Ridge(alpha=1)``) at N = 1000.

Every rule is measured on the engine's default design (factorial masks, ``Ridge(alpha=0.01)``): one call per seed at
N = the run's cap with ``return_samples=True``; the masks of sample s do not depend on N (counter-based), so the
first m samples are the samples any call at N >= m draws, and an adaptive call that stopped an input after m samples
fitted exactly those. For every start of ``STARTS`` and every round m = start, 2 start, ... the first m samples are
fitted as the engine fits them (``engine.fit.fit_samples``; and the first start // 2, which the "lime" rule compares
its first round with) and ``Adaptive.stable`` says which inputs each rule stops there: the "lime" rule of
``n_samples="auto"`` (``Adaptive()``: start 250, cap 8192, as precise as lime's design at N = 1000), the former
top-k rule (``TOP_K``) and the se rule for every s of ``SE_GRID``. An input not settled by the run's cap is censored
(counted as more calls than any figure; a median that falls on one is None). On the cheapest models the engine's own
adaptive calls are run beside and compared (``engine_check``: the same samples per input, and the coefficients'
largest relative gap).

Per model the JSON holds the reference's and lime's errors, the default design at N = 250, 500, 1000 with the
coverage of its 95 % intervals at N = 1000 (against the reference refitted with the default's penalty, and against
the reference itself; for the digits MLP also a lasso's bootstrap intervals against the lasso's N = n_ref answer,
reported, not required), the calls and error of ``n_samples="auto"`` and of the top-k rule, and per (start, s) the
se rule's median calls and error; ``decision`` says on which models ``n_samples="auto"`` and the top-k rule meet the
goal (the target within ``GOAL_CALLS`` median calls) and which (start, s) meet it on every model (``decide``).
``--redo-default`` with a cache calls the model again for the default design's runs only, after the default changed.

    python benchmarks/bench_adaptive_se.py                    # 15-60 minutes on 2 shared CPU cores
    python benchmarks/bench_adaptive_se.py --models digits_mlp --resume
    python benchmarks/bench_adaptive_se.py --cache DIR    # keep the model calls; a rerun with DIR calls nothing
    python benchmarks/bench_adaptive_se.py --table        # the docs table of the JSON
    python benchmarks/bench_adaptive_se.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import math
import statistics
import time
import warnings

import torch

from torchlime import explain
from torchlime.engine.fit import fit_samples
from torchlime.engine.presets import ENGINE
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.adaptive import Adaptive
from torchlime.methods.lime_precision import Earlier
from torchlime.stages.sampling import BernoulliSampler
from torchlime.stages.surrogate import Ridge

from benchmarks.bench_lime_designs import coefficients, digits_case, relative_errors
from benchmarks.common import common_args, header, write

FIXED = [250, 500, 1000]
SE_GRID = [0.5, 0.25, 0.12, 0.08, 0.05, 0.035, 0.025, 0.018, 0.012, 0.008]
STARTS = [125, 250, 256]
#: the former rule of n_samples="auto", measured beside it
TOP_K = Adaptive(start=256, rule="top_k")
ADAPTIVE_CAP = 8192
GOAL_CALLS = 500  # the goal for n_samples="auto" at lime's N=1000 error
#: the models, cheapest first, and per model: inputs, reference N, the default run's cap, seeds (bench_lime_designs'
#: inputs and seeds; everything an input of the planted model needs is its first round, so its run stops at 4096)
PLAN = {
    "digits_mlp": (16, 16384, 8192, [1, 2, 3]),
    "text_cnn": (16, 16384, 8192, [1, 2, 3]),
    "planted_linear": (16, 16384, 4096, [1, 2, 3]),
    "spectrogram_cnn": (8, 16384, 8192, [1, 2]),
    "demo_cnn": (8, 16384, 8192, [1, 2]),
    "mobilenet_v3_small_64px": (8, 16384, 8192, [1, 2]),
}
QUICK = (3, 2048, 1024, [1])
#: the columns of the docs table: the se rule at this start and these s
TABLE_START, TABLE_SE = 250, [0.05, 0.025, 0.018, 0.012]
CHECKED = {"digits_mlp", "text_cnn"}  # the engine's own adaptive calls run beside the simulation


def rounds(start: int, cap: int) -> list[int]:
    """The sample counts an adaptive call fits: start, 2 start, ... and the cap."""
    out = [min(start, cap)]
    while out[-1] < cap:
        out.append(min(2 * out[-1], cap))
    return out


def stops(rule: Adaptive, prefix, run_cap: int) -> list:
    """Per input, the samples ``rule`` gives it (None: not settled by ``run_cap``, censored)."""
    used: list = [None] * prefix["batch"]
    before = max(1, rule.start // 2)  # the "lime" rule's first round compares with the first half
    for m in rounds(rule.start, rule.cap):
        if m > run_cap:
            break
        normal, fit, valid = prefix[m]
        earlier = Earlier(prefix[before][1].coef, before) if rule.needs_earlier else None
        settled = rule.stable(normal, fit, valid, ENGINE["surrogate"].alpha, earlier, m).tolist()
        before = m
        for b in range(prefix["batch"]):
            if used[b] is None and (settled[b] or m == rule.cap):
                used[b] = m
    return used


def censored_median(values: list) -> float | None:
    """The median with None above every number (None where the median falls on one)."""
    key = sorted(values, key=lambda v: math.inf if v is None else v)
    n = len(key)
    lo, hi = key[(n - 1) // 2], key[n // 2]
    return None if lo is None or hi is None else (lo + hi) / 2


def rule_figures(rule: Adaptive, runs: list, run_cap: int) -> dict:
    """Calls per input and the median calls and error of ``rule`` over the runs (seeds)."""
    calls: list = []
    errs: list = []
    for prefix in runs:
        used = stops(rule, prefix, run_cap)
        calls += used
        for b, m in enumerate(used):
            errs.append(None if m is None else prefix["errors"][m][b])
    return dict(median_calls=censored_median(calls), median_error=censored_median(errs), calls=calls)


def rules_checked() -> list[Adaptive]:
    """The adaptive calls the engine runs beside the simulation (``CHECKED`` models)."""
    return [Adaptive(), TOP_K, Adaptive(start=250, se=0.05), Adaptive(start=125, se=0.25)]


def measure(model, x, f, kw: dict, n_ref: int, run_cap: int, seeds: list, check: bool, lasso: bool) -> dict:
    """Every model call of one model: the reference (refitted with the default's penalty too), lime's design at
    N = 1000 and the default design at N = run_cap per seed (samples kept), the engine's adaptive calls
    (``check``) and a lasso's bootstrap intervals (``lasso``)."""
    lime_design = dict(sampler=BernoulliSampler(), surrogate=Ridge(alpha=1.0))
    t0 = time.perf_counter()
    ref = explain(model, x, f, n_samples=n_ref, generator=12345, return_samples=True, **lime_design, **kw)
    data: dict = dict(ref=coefficients(ref), lime={}, default={}, engine={})
    data["ref_default_alpha"] = coefficients(ref.refit(surrogate=ENGINE["surrogate"]))
    data["reference_seconds"] = time.perf_counter() - t0
    del ref
    for seed in seeds:
        full = explain(model, x, f, n_samples=max(FIXED), generator=seed, return_samples=True, **lime_design, **kw)
        data["lime"][seed] = {n: coefficients(full.refit(n_samples=n)) for n in FIXED}
    default_runs(model, x, f, kw, (n_ref, run_cap), seeds, (check, lasso), data)
    data["seconds"] = time.perf_counter() - t0
    return data


def default_runs(model, x, f, kw: dict, sizes: tuple, seeds: list, which: tuple, data: dict) -> None:
    """What depends on the default design, into ``data`` (the reference and lime's calls do not): its call at
    N = run_cap per seed (samples kept; ``sizes`` = (n_ref, run_cap)), and with ``which`` = (check, lasso) the
    engine's adaptive calls and a lasso's bootstrap intervals at N = 1000 against the lasso's N = n_ref answer."""
    (n_ref, run_cap), (check, lasso) = sizes, which
    data["default"], data["engine"] = {}, {}
    for seed in seeds:
        exp = explain(model, x, f, n_samples=run_cap, generator=seed, return_samples=True, **kw)
        at_1000 = exp.refit(n_samples=1000)
        data["default"][seed] = dict(
            samples=exp.samples,
            outputs=exp.outputs,
            valid=exp.valid,
            coef_1000=at_1000.coef,
            coef_se_1000=at_1000.coef_se,
            score_1000=at_1000.score[:, 0],
        )
    if check:
        for rule in rules_checked():
            exp = explain(model, x, f, n_samples=rule, generator=seeds[0], **kw)
            data["engine"][repr(rule)] = dict(samples_used=exp.run.samples_used, coef=exp.coef)
    if lasso:
        lasso_ref = explain(model, x, f, n_samples=n_ref, generator=12345, surrogate="lasso", **kw)
        exp = explain(model, x, f, n_samples=1000, generator=seeds[0], surrogate="lasso", return_samples=True, **kw)
        run = dict(coef_1000=exp.coef, coef_se_1000=exp.coef_se, valid=exp.valid)
        data["lasso_bootstrap_coverage"] = coverage(run, coefficients(lasso_ref))


def prefixes(run: dict, ref: torch.Tensor, run_cap: int, starts: tuple = (*STARTS, 256)) -> dict:
    """The default design's first m samples fitted as the engine fits them, for every round's m of ``starts``
    (the top-k rule's 256 included), every start's half (the "lime" rule's first comparison) and FIXED."""
    sizes = sorted(
        {m for s in starts for m in rounds(s, ADAPTIVE_CAP) if m <= run_cap} | {s // 2 for s in starts} | set(FIXED)
    )
    prefix: dict = dict(batch=run["samples"].shape[0], errors={})
    kernel, surrogate = ENGINE["kernel"], ENGINE["surrogate"]
    for m in sizes:
        normal, fit, _ = fit_samples(run["samples"][:, :m], run["outputs"][:, :m], kernel, surrogate, run["valid"])
        prefix[m] = (normal, fit, run["valid"])
        prefix["errors"][m] = relative_errors(fit.coef[:, 0].double().nan_to_num(0.0), ref)
    prefix["refit_matches_fit"] = torch.equal(run["coef_1000"], prefix[1000][1].coef.to(run["coef_1000"].dtype))
    return prefix


def coverage(run: dict, ref: torch.Tensor) -> tuple[int, int]:
    """Valid coefficients at N = 1000 whose ``coef ± 1.96 coef_se`` holds ``ref``'s, and how many there are."""
    coef, se = run["coef_1000"][:, 0].double(), run["coef_se_1000"][:, 0].double()
    hit = (coef - ref).abs() <= 1.96 * se
    return int(hit[run["valid"]].sum()), int(run["valid"].sum())


def engine_check(data: dict, first: dict, run_cap: int) -> dict:
    """The engine's adaptive calls against the simulation: the same samples per input, and the largest relative
    gap of coefficients (float32 sums over rounds against one pass)."""
    out = {}
    for rule in rules_checked():
        engine, sim = data["engine"][repr(rule)], stops(rule, first, run_cap)
        gaps = [
            float((engine["coef"][b].double() - first[m][1].coef[b].double()).norm() / first[m][1].coef[b].norm())
            for b, m in enumerate(sim)
            if m is not None
        ]
        out[repr(rule)] = dict(
            same_samples=engine["samples_used"] == sim,
            max_relative_coef_gap=max(gaps) if gaps else None,
            engine=engine["samples_used"],
        )
    return out


def analyse(name: str, data: dict, n_ref: int, run_cap: int, seeds: list) -> dict:
    """The figures of one model from its model calls (``measure``); no model calls."""
    ref = data["ref"]
    out: dict = dict(model=name, inputs=ref.shape[0], n_reference=n_ref, run_cap=run_cap, seeds=seeds)
    out["reference_seconds"], out["seconds"] = data["reference_seconds"], data["seconds"]
    lime = {n: [e for seed in seeds for e in relative_errors(data["lime"][seed][n], ref)] for n in FIXED}
    out["lime_design"] = {str(n): statistics.median(e) for n, e in lime.items()}
    out["target_error"] = out["lime_design"][str(max(FIXED))]
    runs = [prefixes(data["default"][seed], ref, run_cap) for seed in seeds]
    out["default_fixed"] = {str(n): statistics.median([e for p in runs for e in p["errors"][n]]) for n in FIXED}
    for key, against in (("", data["ref_default_alpha"]), ("_alpha1_reference", ref)):
        hits, total = (sum(coverage(data["default"][seed], against)[i] for seed in seeds) for i in (0, 1))
        out[f"default_coverage_95_at_1000{key}"] = hits / total
    scores = [v for seed in seeds for v in data["default"][seed]["score_1000"].tolist()]
    out["default_median_score_at_1000"] = statistics.median(scores)
    out["refit_matches_fit"] = all(p["refit_matches_fit"] for p in runs)
    out["auto"] = rule_figures(Adaptive(), runs, run_cap)
    out["top_k"] = rule_figures(TOP_K, runs, run_cap)
    out["se_rule"] = {
        f"start={start} se={s}": dict(
            start=start, se=s, **rule_figures(Adaptive(start=start, cap=ADAPTIVE_CAP, se=s), runs, run_cap)
        )
        for start in STARTS
        for s in SE_GRID
    }
    if data["engine"]:
        out["engine_check"] = engine_check(data, runs[0], run_cap)
    if "lasso_bootstrap_coverage" in data:
        hits, total = data["lasso_bootstrap_coverage"]
        out["lasso_bootstrap_coverage_95_at_1000"] = hits / total
    return summarise(out)


def reaches(fig: dict, target: float) -> bool:
    return fig["median_error"] is not None and fig["median_error"] <= target


def summarise(out: dict) -> dict:
    """The cheapest se rule that reaches the target, and whether the top-k rule does."""
    target = out["target_error"]
    ok = [v for v in out["se_rule"].values() if reaches(v, target) and v["median_calls"] is not None]
    best = min(ok, key=lambda v: (v["median_calls"], -v["se"])) if ok else None
    out["se_rule_at_target"] = None if best is None else {k: best[k] for k in ("start", "se", "median_calls")}
    out["auto_reaches_target"] = reaches(out["auto"], target)
    out["top_k_reaches_target"] = reaches(out["top_k"], target)
    return out


def decide(results: list) -> dict:
    """Whether ``n_samples="auto"`` meets the goal (the target within ``GOAL_CALLS`` median calls) on each model,
    whether the former top-k rule does, and which (start, s) of the se rule do on every model. A rule that stops
    every input of every model at its first round is a fixed N (the default at N = start), not a stopping rule,
    and is left out; the rest are listed by the fewest median calls on the worst model, then the smallest s."""
    candidates = []
    for key in results[0]["se_rule"]:
        figs = [r["se_rule"][key] for r in results]
        calls = [v["median_calls"] for v in figs]
        if not all(reaches(v, r["target_error"]) for v, r in zip(figs, results)) or None in calls:
            continue
        start = figs[0]["start"]
        if all(c == start for v in figs for c in v["calls"]):
            continue  # a fixed N
        if max(calls) <= GOAL_CALLS:
            candidates.append(dict(rule=key, se=figs[0]["se"], start=start, median_calls_per_model=calls))
    candidates.sort(key=lambda c: (max(c["median_calls_per_model"]), c["se"], c["start"]))

    def meets(r: dict, key: str) -> bool:
        calls = r[key]["median_calls"]
        return bool(r[f"{key}_reaches_target"] and calls is not None and calls <= GOAL_CALLS)

    auto_ok = {r["model"]: meets(r, "auto") for r in results}
    return dict(
        models=[r["model"] for r in results],
        auto_meets_goal_per_model=auto_ok,
        auto_meets_goal=all(auto_ok.values()),
        top_k_meets_goal_per_model={r["model"]: meets(r, "top_k") for r in results},
        se_rules_meeting_goal=candidates,
    )


def table(payload: dict) -> str:
    """The markdown table of docs/choosing-n.md and benchmarks/README.md, from the JSON."""

    def cell(fig: dict) -> str:
        calls, err = fig["median_calls"], fig["median_error"]
        return "censored" if calls is None or err is None else f"{calls:.0f}, {err:.4f}"

    head = [
        "model (inputs x seeds)",
        "lime N=1000 (target)",
        "default N=250 / 500 / 1000",
        "`auto`: calls, error",
        "top-5 rule: calls, error",
        *[f"se={s}: calls, error" for s in TABLE_SE],
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in payload["results"]:
        cells = [
            f"{r['model']} ({r['inputs']} x {len(r['seeds'])})",
            f"{r['target_error']:.4f}",
            " / ".join(f"{r['default_fixed'][str(n)]:.4f}" for n in FIXED),
            cell(r["auto"]),
            cell(r["top_k"]),
            *[cell(r["se_rule"][f"start={TABLE_START} se={s}"]) for s in TABLE_SE],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: list, folder: _Path) -> str:
    """One panel per model: median error against median calls of the se rule (start ``TABLE_START``, every s),
    the default design and lime's at fixed N, ``n_samples="auto"``, the target and the goal. Returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    cols = 3
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.7 * rows), squeeze=False)
    for ax, r in zip(axes.flat, results):
        figs = [r["se_rule"][f"start={TABLE_START} se={s}"] for s in SE_GRID]
        pts = sorted((v["median_calls"], v["median_error"]) for v in figs if v["median_calls"] and v["median_error"])
        ax.plot(*zip(*pts), marker="o", ms=3, label=f"Adaptive(start={TABLE_START}, se=s)")
        ax.plot(FIXED, [r["default_fixed"][str(n)] for n in FIXED], marker="s", ms=3, label="default, fixed N")
        ax.plot(FIXED, [r["lime_design"][str(n)] for n in FIXED], "k--", marker="x", ms=3, label="lime, fixed N")
        if r["auto"]["median_calls"] and r["auto"]["median_error"]:
            ax.plot([r["auto"]["median_calls"]], [r["auto"]["median_error"]], "r*", ms=8, label='"auto"')
        if r["top_k"]["median_calls"] and r["top_k"]["median_error"]:
            ax.plot([r["top_k"]["median_calls"]], [r["top_k"]["median_error"]], "mv", ms=6, label="top-5 rule")
        ax.axhline(r["target_error"], color="grey", lw=0.8, label="target: lime at N=1000")
        ax.axvline(GOAL_CALLS, color="grey", lw=0.8, ls=":", label=f"goal: {GOAL_CALLS} calls")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = [n for n in (250, 500, 1000, 2000, 4000, 8000) if n <= 1.5 * ax.get_xlim()[1]]
        ax.set_xticks(ticks, [str(n) for n in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(r["model"], fontsize=9)
        ax.set_xlabel("median model calls per input", fontsize=8)
        ax.set_ylabel("median relative error", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(results) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    folder.mkdir(parents=True, exist_ok=True)
    name = "adaptive_se.png"
    fig.savefig(folder / name, dpi=80)
    plt.close(fig)
    return name


def load(name: str, n_inputs: int) -> tuple:
    if name == "digits_mlp":
        return digits_case(n_inputs)[:4]
    from benchmarks.bench_sample_efficiency import cases

    return cases(n_inputs)[name]


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--models", nargs="+", default=None, choices=list(PLAN))
    ap.add_argument("--resume", action="store_true", help="keep the models already in the JSON and run the others")
    ap.add_argument(
        "--cache", type=_Path, default=None, help="keep each model's calls here (torch.save) and reuse them"
    )
    ap.add_argument("--figures", type=_Path, default=_Path(__file__).resolve().parents[1] / "docs/_static/figures")
    ap.add_argument("--table", action="store_true", help="print the docs table of the JSON under --out, run nothing")
    ap.add_argument(
        "--redo-default",
        action="store_true",
        help="with --cache: call the model again for the default design's runs only (the reference and lime's kept)",
    )
    args = ap.parse_args()
    if args.table:
        print(table(json.loads((args.out / "adaptive_se_cpu.json").read_text())))
        return
    names = args.models or (["digits_mlp", "text_cnn"] if args.quick else list(PLAN))
    file = "adaptive_se_cpu_quick.json" if args.quick else "adaptive_se_cpu.json"
    path = args.out / file
    out = dict(
        header(torch.device("cpu")),
        benchmark="bench_adaptive_se",
        quick=args.quick,
        design="the engine's default: factorial masks (Bernoulli beyond sobol_width), Ridge(alpha=0.01)",
        target="lime's design (Bernoulli masks, Ridge(alpha=1)) at N=1000, median error",
        fixed=FIXED,
        se_grid=SE_GRID,
        starts=STARTS,
        adaptive_cap=ADAPTIVE_CAP,
        goal_calls=GOAL_CALLS,
        plan={k: dict(inputs=v[0], n_reference=v[1], run_cap=v[2], seeds=v[3]) for k, v in PLAN.items()},
        note=(
            "The inputs and seeds of bench_lime_designs (plan); rules are simulated on prefixes of one default-design "
            "call per seed (the engine fits exactly those samples), checked against the engine's own adaptive calls "
            "on the digits MLP and the TextCNN (engine_check); inputs not settled by the run cap are censored (None)."
        ),
        results=[],
    )
    if args.resume and path.exists():
        before = json.loads(path.read_text())
        out["results"] = [{"commit": before["commit"], **r} for r in before["results"]]  # kept: measured there
    done = {r["model"] for r in out["results"]}
    for name in names:
        if name in done:
            print(f"{name}: already in {path}, kept")
            continue
        n_inputs, n_ref, run_cap, seeds = QUICK if args.quick else PLAN[name]
        cached = None if args.cache is None else args.cache / f"{name}{'_quick' if args.quick else ''}.pt"
        if cached is not None and cached.exists():
            data = torch.load(cached, weights_only=True)
            if args.redo_default:  # the default design changed: its calls again, the reference's kept
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UnreliableExplanationWarning)
                    which = (name in CHECKED, name == "digits_mlp")
                    default_runs(*load(name, n_inputs), (n_ref, run_cap), seeds, which, data)
                torch.save(data, cached)
        else:
            model, x, f, kw = load(name, n_inputs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UnreliableExplanationWarning)
                data = measure(model, x, f, kw, n_ref, run_cap, seeds, name in CHECKED, name == "digits_mlp")
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                torch.save(data, cached)
        result = analyse(name, data, n_ref, run_cap, seeds)
        print(
            f"{name}: target {result['target_error']:.4f}; default {result['default_fixed']}; se rule "
            f"{result['se_rule_at_target']}; auto {result['auto']['median_calls']} calls, error "
            f"{result['auto']['median_error']}; {result['seconds']:.0f} s",
            flush=True,
        )
        out["results"].append({"commit": out["commit"], **result})
        out["results"].sort(key=lambda r: list(PLAN).index(r["model"]))
        out["decision"] = decide(out["results"])
        path = write(file, out, args.out)  # after every model: a cut run keeps its models
    figures = args.out if args.quick else args.figures  # a smoke run's plot stays beside its JSON
    out["figures"] = [plot(out["results"], figures)]
    path = write(file, out, args.out)
    print(json.dumps(out.get("decision"), indent=1))
    print(f"wrote {path} and {figures / out['figures'][0]}")


if __name__ == "__main__":
    main()
