"""Samples needed for a stable explanation: i.i.d. Bernoulli masks vs the efficient designs.

For every model and input, a reference explanation at N = 20 000 (Bernoulli(1/2), its own
seed) gives the reference top-5 features. Each design then explains the same inputs with
another seed at N = 32, 64, ..., 8192; the samples an input needs is the smallest N from
which its top-5 set has a Jaccard index >= 0.9 with the reference (for 5-sets: the same set)
at every larger N of the grid. ``n_samples="auto"`` runs once per input, and its samples used
and Jaccard are recorded. Models: a planted sparse linear model over image segments, the
embedded demo CNN (images), the embedded SpecNet (spectrograms), the embedded TextCNN
(tokens) and a torchvision mobilenet_v3_small with random weights at 64 x 64 (a real architecture).
``--max-n`` stops a run's grid earlier (an input that needs more counts as unresolved; each result
records its own grid); ``--resume`` keeps the models already written and runs the others;
``--table`` prints benchmarks/README.md's table from the JSON.

    python benchmarks/bench_sample_efficiency.py          # about an hour on 2 CPU cores
    python benchmarks/bench_sample_efficiency.py --quick --out /tmp/quick
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
from torchlime.image.segments import slic
from torchlime.methods.adaptive import Adaptive
from torchlime.methods.designs import AntitheticSampler, SobolSampler, StratifiedSampler
from torchlime.stages.features import cell_ids
from torchlime.stages.sampling import BernoulliSampler

from benchmarks.common import common_args, header, vision_model, write

DESIGNS = {
    "bernoulli": BernoulliSampler(),
    "stratified": StratifiedSampler(),
    "antithetic": AntitheticSampler(),
    "sobol": SobolSampler(),
}
TOP_K, THRESHOLD = 5, 0.9
GRID = [32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
DEFAULT_MODELS = ["planted_linear", "demo_cnn", "spectrogram_cnn", "text_cnn", "mobilenet_v3_small_64px"]


def cases(n_inputs: int) -> dict:
    """(model, inputs, features, explain keywords) of every model."""
    from torchlime.demo.audio_data import log_spectrogram, make_clips
    from torchlime.demo.audio_models import load_audio_model
    from torchlime.demo.image_data import make_images
    from torchlime.demo.image_models import load_demo_model
    from torchlime.demo.text_data import CLS, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model

    images, _, _ = make_images(n_inputs, seed=2026)
    seg = slic(images, n_segments=40)
    g = torch.Generator().manual_seed(0)
    weights = torch.zeros(40, 2)
    hot = torch.randperm(40, generator=g)[:8]
    weights[hot, 1] = torch.randn(8, generator=g).abs() + 0.5  # a sparse linear model over 8 of 40 segments
    grid16 = cell_ids((64, 64), (8, 8)).expand(n_inputs, 1, 64, 64)

    def planted(x):
        means = (
            torch.zeros(x.shape[0], 64, dtype=x.dtype).scatter_add_(
                1, grid16[:1, 0].reshape(1, -1).expand(x.shape[0], -1), x.mean(1).reshape(x.shape[0], -1)
            )
            / 64
        )
        return means[:, :40] @ weights

    specs = log_spectrogram(make_clips(n_inputs, seed=7).waves)
    text_model, _ = load_text_model()
    text = make_text_dataset(n_inputs, seed=3)
    feats_text = torch.where(
        (text.attention_mask != 0) & (text.input_ids != CLS) & (text.input_ids != SEP),
        torch.arange(text.input_ids.shape[1]),
        -1,
    )

    def text_call(packed_ids):
        return text_model(packed_ids, (packed_ids != 0).long())

    mobilenet = vision_model("mobilenet_v3_small", torch.device("cpu"))
    return {
        "planted_linear": (planted, images, grid16, {}),
        "demo_cnn": (load_demo_model(), images, seg.unsqueeze(1), dict(baseline="mean")),
        "spectrogram_cnn": (
            load_audio_model(),
            specs,
            cell_ids(specs.shape[-2:], (4, 5)).view(1, *specs.shape[-2:]),
            {},
        ),
        "text_cnn": (text_call, text.input_ids, feats_text, dict(baseline=0)),
        "mobilenet_v3_small_64px": (mobilenet, images, seg.unsqueeze(1), dict(baseline="mean")),
    }


def top_sets(exp) -> list[set]:
    idx, _ = exp.top_features(TOP_K)
    return [set(row.tolist()) for row in idx[:, 0]]


def jaccard(a: set, b: set) -> float:
    return len(a & b) / max(len(a | b), 1)


def run(name, model, x, f, kw, grid_n, n_ref, log) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        t0 = time.perf_counter()
        ref = top_sets(explain(model, x, f, n_samples=n_ref, generator=12345, **kw))
        out = dict(
            model=name, inputs=x.shape[0], n_reference=n_ref, reference_seconds=time.perf_counter() - t0, designs={}
        )
        for design, sampler in DESIGNS.items():
            jac = {
                n: [
                    jaccard(s, r)
                    for s, r in zip(
                        top_sets(explain(model, x, f, n_samples=n, sampler=sampler, generator=1, **kw)), ref
                    )
                ]
                for n in grid_n
            }
            needed = []
            for i in range(x.shape[0]):
                ok = [all(jac[m][i] >= THRESHOLD for m in grid_n if m >= n) for n in grid_n]
                needed.append(next((n for n, good in zip(grid_n, ok) if good), None))
            out["designs"][design] = dict(
                mean_jaccard={str(n): statistics.mean(v) for n, v in jac.items()}, samples_needed=needed
            )
            log(f"{name} {design}: stable at N for {stable_fraction(needed, grid_n)} of the inputs")
        for design in ("bernoulli", "sobol"):
            rule = Adaptive(start=64, cap=grid_n[-1], rule="top_k")  # the rule its results were measured with
            auto = explain(model, x, f, n_samples=rule, sampler=DESIGNS[design], generator=1, **kw)
            jac = [jaccard(s, r) for s, r in zip(top_sets(auto), ref)]
            out[f"auto_{design}"] = dict(
                samples_used=auto.meta["samples_used"],
                jaccard=jac,
                mean_samples=statistics.mean(auto.meta["samples_used"]),
                fraction_at_threshold=sum(j >= THRESHOLD for j in jac) / len(jac),
            )
            log(
                f"{name} auto ({design}): mean samples {out[f'auto_{design}']['mean_samples']:.0f}, "
                f"top-5 equal to the reference for {100 * out[f'auto_{design}']['fraction_at_threshold']:.0f}%"
            )
    return summarise(dict(out, grid=grid_n))


def stable_fraction(needed: list, grid_n: list) -> dict[str, float]:
    """For every N of the grid, the fraction of inputs whose top 5 equals the reference's from N on."""
    return {str(n): sum(m is not None and m <= n for m in needed) / len(needed) for n in grid_n}


def summarise(result: dict) -> dict:
    """The comparison of one model's designs, from the per-input samples needed (None: above the grid).

    ``stable_fraction``: per design and N, the fraction of inputs stable from N on; ``median_needed``:
    the median over all inputs (None when more than half are above the grid). ``calls_ratio``: for
    every fraction of stable inputs that Bernoulli masks reach (keyed by the first N reaching it),
    that N divided by the smallest N at which the design makes at least as many inputs stable (None:
    never on the grid); > 1 means fewer model calls for the same stability. ``bernoulli_over_best``
    is the ratio at Bernoulli's highest fraction for the design with the largest one there
    (``best_design``).
    """
    grid_n = result["grid"]
    designs = result["designs"]
    for rec in designs.values():
        needed = rec["samples_needed"]
        rec["stable_fraction"] = stable_fraction(needed, grid_n)
        ordered = sorted(float("inf") if m is None else m for m in needed)
        median = ordered[(len(ordered) - 1) // 2]
        rec["median_needed"] = None if median == float("inf") else median
        rec["unresolved"] = needed.count(None)
    base = designs["bernoulli"]["stable_fraction"]
    for name, rec in designs.items():
        if name == "bernoulli":
            continue
        ratio, reached = {}, 0.0
        for n in grid_n:
            if base[str(n)] > reached:
                reached = base[str(n)]
                first = next((m for m in grid_n if rec["stable_fraction"][str(m)] >= base[str(n)]), None)
                ratio[str(n)] = n / first if first else None
        rec["calls_ratio"] = ratio
    scored = {
        d: list(r["calls_ratio"].values())[-1] if r["calls_ratio"] else None
        for d, r in designs.items()
        if d != "bernoulli"
    }
    best = max(scored, key=lambda d: scored[d] or 0.0)
    result["best_design"], result["bernoulli_over_best"] = best, scored[best]
    return result


def table(payload: dict) -> str:
    """The markdown table of benchmarks/README.md ("Sample efficiency"), from the JSON."""
    lines = [
        "| model | inputs | grid up to | Bernoulli masks: inputs stable (from N) | calls saved for that: "
        'stratified | antithetic | Sobol | `n_samples="auto"`: mean samples, top 5 = reference |',
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        fractions = r["designs"]["bernoulli"]["stable_fraction"]
        top = max(fractions.values())
        first = next(n for n, f in fractions.items() if f == top)
        cells = []
        for design in ("stratified", "antithetic", "sobol"):
            ratio = list(r["designs"][design]["calls_ratio"].values())[-1] if top > 0 else None
            cells.append("never" if ratio is None else f"{ratio:g}x")
        auto = r["auto_bernoulli"]
        auto_cell = f"{auto['mean_samples']:.0f}, {100 * auto['fraction_at_threshold']:.0f} %"
        lines.append(
            f"| {r['model']} | {r['inputs']} | {r['grid'][-1]} | {100 * top:.0f} % (N = {first}) | "
            + " | ".join(cells)
            + f" | {auto_cell} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--inputs", type=int, default=50)
    ap.add_argument("--reference", type=int, default=20000)
    ap.add_argument("--models", nargs="+", default=None)
    ap.add_argument("--max-n", type=int, default=8192, help="largest N of the grid for the models of this run")
    ap.add_argument("--table", action="store_true", help="print the README table of the JSON under --out, run nothing")
    ap.add_argument(
        "--resume", action="store_true", help="keep the models already in the JSON under --out and run only the others"
    )
    args = ap.parse_args()
    if args.table:
        print(table(json.loads((args.out / "sample_efficiency_cpu.json").read_text())))
        return
    torch.set_num_threads(max(1, torch.get_num_threads()))
    n_inputs, n_ref = (3, 500) if args.quick else (args.inputs, args.reference)
    grid_n = [32, 64, 128] if args.quick else [n for n in GRID if n <= args.max_n]
    all_cases = cases(n_inputs)
    names = args.models or (["planted_linear", "demo_cnn"] if args.quick else DEFAULT_MODELS)
    out = dict(
        header(torch.device("cpu")),
        benchmark="bench_sample_efficiency",
        quick=args.quick,
        top_k=TOP_K,
        threshold=THRESHOLD,
        n_reference=n_ref,
        results=[],
    )
    file = "sample_efficiency_cpu_quick.json" if args.quick else "sample_efficiency_cpu.json"
    path = args.out / file
    if args.resume and path.exists():
        previous = json.loads(path.read_text())
        out["results"] = [summarise(dict(r, grid=r.get("grid", previous.get("grid")))) for r in previous["results"]]
    done = {r["model"] for r in out["results"]}
    for name in names:
        if name in done:
            print(f"{name}: already in {path}, kept")
            continue
        model, x, f, kw = all_cases[name]
        out["results"].append(run(name, model, x, f, kw, grid_n, n_ref, print))
        path = write(file, out, args.out)  # after every model: a cut run keeps its models
        print(f"wrote {path} ({name})")
    print(json.dumps({r["model"]: r["bernoulli_over_best"] for r in out["results"]}))


if __name__ == "__main__":
    main()
