"""Tables and figures of the veracity study, from its committed JSON results.

``tables`` turns ``results/veracity.json`` (and ``results/veracity_tuning.json``) into the
markdown tables of ``benchmarks/VERACITY.md``; ``plots`` draws the study's Figures 2-4. Both
only read the results, so the report can be rebuilt and checked without rerunning anything:

    python benchmarks/veracity_report.py             # print the tables
    python benchmarks/veracity_report.py --figures   # also redraw the PNGs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional

import torch

RESULTS = Path(__file__).resolve().parent / "results"
DIRECTIONS = (("0", "voice → no_voice"), ("1", "no_voice → voice"))  # key: the attack's target class
KS = ("1", "3", "5")


def plots(payload: dict[str, Any], out: Path, suffix: str = "") -> list[Path]:
    """Figures 2-4 of the study from a ``veracity.json`` payload, as PNGs in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    names = [k for k in payload["global"] if k not in ("norm", "random")]
    ks = list(range(1, 21))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    label = {"norm": "largest ||delta|| segments", "random": "random segments"}
    for i, name in enumerate(names + ["norm", "random"]):
        rec = payload["global"][name]
        ax.plot(ks, rec["rate"], marker="o", ms=3, color=f"C{i}", label=label.get(name, f"LIME: {name}"))
        if name != "random":
            for t, style in (("0", "-"), ("1", "--")):
                if t in rec.get("rate_by_target", {}):
                    ax2.plot(
                        ks,
                        rec["rate_by_target"][t],
                        style,
                        color=f"C{i}",
                        label=f"{label.get(name, name)}: {'voice → no_voice' if t == '0' else 'no_voice → voice'}",
                    )
    for a, title in (
        (ax, f"Global attack, {payload['attack']['success']} adversarial clips"),
        (ax2, "by attack direction"),
    ):
        a.set(
            xlabel="k segments of the perturbation added",
            ylabel="label-flip rate",
            xticks=ks[::2],
            ylim=(-0.02, 1.02),
            title=title,
        )
        a.legend(fontsize=7)
    paths = [out / f"veracity_flip_rate{suffix}.png"]
    fig.savefig(paths[-1], dpi=120)

    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), constrained_layout=True)
    for ax, k in zip(axes, ("1", "3", "5")):
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            rec = payload["localised"][name].get(k)
            if not rec:
                continue
            hist = torch.tensor(rec["histogram"], dtype=torch.float32)
            pos = torch.arange(len(hist)) + (i - (len(names) - 1) / 2) * width
            ax.bar(pos.tolist(), (hist / hist.sum()).tolist(), width, label=f"{name} (n = {rec['n']})")
        ax.set_xticks(range(int(k) + 1))
        ax.set(title=f"k = {k} perturbed segments", xlabel="perturbed segments in LIME's top k", ylabel="share")
        ax.legend(fontsize=7)
    paths.append(out / f"veracity_localised{suffix}.png")
    fig.savefig(paths[-1], dpi=120)

    fig, ax = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    data, labels = [], []
    for name in names:
        g = payload["global"][name]
        loc = payload["localised"][name]
        corr = sum((loc[k]["fidelity_correct"] for k in ("1", "3", "5") if k in loc), [])
        wrong = sum((loc[k]["fidelity_wrong"] for k in ("1", "3", "5") if k in loc), [])
        for vals, lab in (
            (g["fidelity_correct"].get("values", []), "global\ncorrect"),
            (g["fidelity_wrong"].get("values", []), "global\nwrong"),
            (corr, "localised\ncorrect"),
            (wrong, "localised\nwrong"),
        ):
            data.append(vals or [float("nan")])
            labels.append(f"{name}\n{lab}")
    ax.boxplot(data)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    ax.tick_params(axis="x", labelsize=6)
    ax.set(ylabel="fidelity (weighted R²)", title="Fidelity of correct vs wrong explanations")
    paths.append(out / f"veracity_fidelity{suffix}.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close("all")
    return paths


def pct(v: Optional[float]) -> str:
    """A rate in [0, 1] as a percentage, "–" when missing."""
    return "–" if v is None else f"{100 * v:.1f} %"


def quartiles(values: list[float]) -> str:
    """``median [q1, q3] (n)`` of a list, "–" when empty."""
    if not values:
        return "–"
    q = torch.quantile(torch.tensor(values), torch.tensor([0.25, 0.5, 0.75])).tolist()
    return f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}] ({len(values)})"


def separation_auc(right: list[float], wrong: list[float]) -> Optional[float]:
    """P(a right explanation has a higher fidelity than a wrong one), ties count 1/2 (the ROC-AUC of
    fidelity as a detector of right explanations; 0.5 = no information). None if a side is empty.
    """
    if not right or not wrong:
        return None
    a, b = torch.tensor(right).view(-1, 1), torch.tensor(wrong).view(1, -1)
    return float(((a > b).float() + 0.5 * (a == b).float()).mean())


def _settings(payload: dict[str, Any]) -> list[str]:
    return [k for k in payload["global"] if k not in ("norm", "random")]


def _md(header: list[str], rows: list[list[str]]) -> list[str]:
    return (
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(r) + " |" for r in rows]
        + [""]
    )


def _localised_fidelity(loc: dict[str, Any], key: str) -> list[float]:
    return sum((loc[k][key] for k in KS if k in loc), [])


def tables(payload: dict[str, Any], tuning: Optional[dict[str, Any]] = None) -> str:
    """Markdown tables of a ``veracity.json`` payload (and of its settings search, if given)."""
    names, g, loc = _settings(payload), payload["global"], payload["localised"]
    curves = [(f"LIME top k, {n}", g[n]) for n in names] + [
        ("largest perturbation norm", g["norm"]),
        ("random", g["random"]),
    ]
    att = payload["attack"]
    out = [
        f"Global attack: {att['success']} of {att['clips']} clips adversarial (mean ||delta||_2 "
        f"{att['delta_l2_mean']:.2f}, mean max |delta| {att['delta_linf_mean']:.2f}, "
        f"SNR {att['snr_db_mean']:.1f} dB).",
        "",
    ]

    # Figure 2 in numbers
    ks = (1, 2, 3, 4, 5, 6, 8, 10, 15, 19, 20)
    out += _md(
        ["label-flip rate, k segments added"] + [str(k) for k in ks],
        [[lab] + [f"{100 * r['rate'][k - 1]:.0f}" for k in ks] for lab, r in curves],
    )
    # Table 1
    out += _md(
        ["k = 3 segments added", "label-flip rate"] + [d for _, d in DIRECTIONS],
        [
            [lab.replace("top k", "top 3"), pct(r["rate"][2])] + [pct(r["rate_by_target"][t][2]) for t, _ in DIRECTIONS]
            for lab, r in curves
        ],
    )
    # Table 2
    out += _md(
        ["all positively weighted segments", "label-flip rate"] + [d for _, d in DIRECTIONS] + ["segments (mean)"],
        [
            [n, pct(g[n]["all_positive"])]
            + [pct(g[n]["all_positive_by_target"].get(t)) for t, _ in DIRECTIONS]
            + [f"{g[n]['n_positive']:.1f}"]
            for n in names
        ],
    )
    # where the attack's main segment lands
    out += _md(
        ["segment with the largest perturbation norm"]
        + [f"{h}, {d}" for _, d in DIRECTIONS for h in ("LIME rank (1-20)", "negative weight")],
        [
            [n]
            + [
                v
                for t, _ in DIRECTIONS
                for v in (
                    f"{g[n]['largest_norm_segment'][t]['mean_lime_rank']:.1f}",
                    pct(g[n]["largest_norm_segment"][t]["negative_weight"]),
                )
            ]
            for n in names
        ],
    )
    # Figure 3 in numbers
    out += _md(
        ["localised attack", "k", "attacks", "mean recovered of k (chance k²/20)", "all k recovered"],
        [
            [
                n,
                k,
                str(loc[n][k]["n"]),
                f"{loc[n][k]['mean_recovered']:.2f} ({int(k) ** 2 / 20:.2f})",
                pct(loc[n][k]["all_recovered"]),
            ]
            for n in names
            for k in KS
            if k in loc[n]
        ],
    )
    out += [
        "Mean recovered fraction over all localised attacks: "
        + ", ".join(f"{n} {loc[n]['mean_fraction']:.3f}" for n in names)
        + ".",
        "",
    ]
    # Figure 4 in numbers
    rows = []
    for n in names:
        gr, gw = g[n]["fidelity_correct"].get("values", []), g[n]["fidelity_wrong"].get("values", [])
        lr, lw = _localised_fidelity(loc[n], "fidelity_correct"), _localised_fidelity(loc[n], "fidelity_wrong")
        auc = lambda a, b: "–" if separation_auc(a, b) is None else f"{separation_auc(a, b):.2f}"  # noqa: E731
        rows.append([n, quartiles(gr), quartiles(gw), auc(gr, gw), quartiles(lr), quartiles(lw), auc(lr, lw)])
    out += _md(
        [
            "fidelity (weighted R²): median [IQR] (n)",
            "global: top 3 flip",
            "global: no flip",
            "AUC",
            "localised: all k found",
            "localised: not all",
            "AUC",
        ],
        rows,
    )
    out += _md(
        ["setting", "explanations", "seconds", "seconds / explanation"],
        [
            [n, str(t["explanations"]), f"{t['seconds']:.0f}", f"{t['seconds_per_explanation']:.2f}"]
            for n, t in payload["timing"].items()
        ],
    )
    out += _md(
        ["setting", "sampler", "kernel", "surrogate", "hidden content", "explained output", "N"],
        [
            [n] + [cfg[k].strip("'") for k in ("sampler", "kernel", "surrogate", "content", "output", "n_samples")]
            for n, cfg in payload["settings"].items()
        ],
    )
    if tuning is not None:
        out += tuning_table(tuning)
    return "\n".join(out)


def tuning_table(tuning: dict[str, Any], top: int = 6) -> list[str]:
    """The best ``top`` candidates of the settings search and lime's defaults, by objective."""
    ranked = sorted(tuning["candidates"], key=lambda r: -r["objective"])
    rows = [dict(r, rank=str(i + 1)) for i, r in enumerate(ranked)]
    lime = next(
        r for r in rows if all(r[k] == tuning["lime_default"][k] for k in ("sampler", "content", "kernel", "output"))
    )
    shown = rows[:top] + ([lime] if int(lime["rank"]) > top else [])
    return [
        f"Settings search: {len(ranked)} candidates on {tuning['n_clips']} other clips "
        f"({tuning['n_global']} global, {tuning['n_localised']} localised adversarial examples), "
        f"N = {tuning['n_samples']}; objective = {tuning['objective']}.",
        "",
    ] + _md(
        [
            "rank",
            "sampler",
            "hidden content",
            "kernel",
            "output",
            "flip rate k=3",
            "localised recovery",
            "objective",
            "mean R²",
        ],
        [
            [
                r["rank"],
                r["sampler"],
                r["content"],
                r["kernel"],
                r["output"],
                pct(r["flip_k3"]),
                f"{r['recovery']:.3f}",
                f"{r['objective']:.3f}",
                f"{r['fidelity']:.3f}",
            ]
            for r in shown
        ],
    )


def load(name: str) -> Optional[dict[str, Any]]:
    """A committed result of ``results/``, None when absent."""
    path = RESULTS / name
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--figures", action="store_true", help="also redraw the PNGs in results/")
    args = parser.parse_args()
    payload = load("veracity.json")
    if payload is None:
        sys.exit("results/veracity.json not found: run benchmarks/veracity.py first")
    print(tables(payload, load("veracity_tuning.json")))
    if args.figures:
        print("\n".join(map(str, plots(payload, RESULTS))))


if __name__ == "__main__":
    main()
