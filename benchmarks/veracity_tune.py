"""Settings search and figures of ``veracity.py``.

``tune`` explains the global and localised adversarial examples of separate
clips once per (sampler, content) pair with ``return_samples=True`` and refits
every (kernel, explained output) combination on the same samples, so each
candidate costs one batched pass. The objective is the mean of the global
flip rate over k = 1..10 and the localised recovery fraction.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from torchlime.sampling import BernoulliSampler, ShapleySampler, UniformCountSampler
from torchlime.surrogate import Ridge
from torchlime.weighting import ExponentialKernel, UniformKernel
from veracity_lib import ATTACK, N_SAMPLES, adversarials, explain_many, flip_curve, localised_recovery, refit

CONTENTS = ("zero", "mean", "noise", "shuffle", "blur")  # "min" equals "zero" on log1p spectrograms
SAMPLERS = (BernoulliSampler(0.75), UniformCountSampler(), ShapleySampler())
KERNELS = (ExponentialKernel(width=0.25), ExponentialKernel(width=0.1), UniformKernel())
OUTPUTS = ("prob", "margin")


def tune(model: torch.nn.Module, specs: torch.Tensor, labels: torch.Tensor, seed: int = 0,
         n_samples: int = N_SAMPLES, log: Any = print) -> dict[str, Any]:
    """Two-stage search: every content with Bernoulli(1/2), then other samplers with the best content."""
    adv = adversarials(model, specs, labels, ATTACK, seed)
    n_g = len(adv["x"])
    x_all = torch.cat([adv["x"] + adv["delta"], adv["l_x"] + adv["l_delta"]])
    t_all = torch.cat([adv["target"], adv["l_target"]])
    log(f"tuning on {len(specs)} clips: {n_g} global and {len(adv['l_x'])} localised adversarial examples")
    records: list[dict[str, Any]] = []

    def evaluate(sampler: Any, content: str) -> None:
        t0 = time.perf_counter()
        cfg = dict(sampler=sampler, content=content, kernel=KERNELS[0], surrogate=Ridge(1.0),
                   output="margin", n_samples=n_samples)
        exp = explain_many(model, x_all, t_all, cfg, seed, return_samples=True)
        secs = time.perf_counter() - t0
        for kernel in KERNELS:
            for output in OUTPUTS:
                coef, score = refit(exp, kernel, Ridge(1.0), output)
                rate = flip_curve(model, adv["x"], adv["delta"], adv["seg"],
                                  coef[:n_g].argsort(1, descending=True), adv["target"])["rate"]
                rec = localised_recovery(coef[n_g:], score[n_g:], adv["region_ids"], adv["ks"])["mean_fraction"]
                objective = 0.5 * sum(rate[:10]) / 10 + 0.5 * (rec or 0.0)
                records.append(dict(sampler=repr(sampler), content=content, kernel=repr(kernel), output=output,
                                    flip_rate=rate, flip_k3=rate[2], recovery=rec, objective=objective,
                                    fidelity=float(score.mean()), seconds_pass=secs))
                log(f"  {records[-1]['sampler']:<32} {content:<8} {records[-1]['kernel']:<60} {output:<6} "
                    f"k3 {rate[2]:.3f} rec {rec:.3f} obj {objective:.3f}")

    for content in CONTENTS:
        evaluate(BernoulliSampler(0.5), content)
    best_content = max(records, key=lambda r: r["objective"])["content"]
    for sampler in SAMPLERS:
        evaluate(sampler, best_content)
    best = max(records, key=lambda r: r["objective"])
    lime = next(r for r in records if r["sampler"] == repr(BernoulliSampler(0.5)) and r["content"] == "zero"
                and r["kernel"] == repr(KERNELS[0]) and r["output"] == "prob")
    return dict(n_clips=len(specs), n_global=n_g, n_localised=len(adv["l_x"]), attack=adv["stats"],
                objective="0.5 * mean flip rate over k=1..10 + 0.5 * localised recovery fraction",
                lime_default=lime, best=best, candidates=records)


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
                    ax2.plot(ks, rec["rate_by_target"][t], style, color=f"C{i}",
                             label=f"{label.get(name, name)}: {'voice → no_voice' if t == '0' else 'no_voice → voice'}")
    for a, title in ((ax, f"Global attack, {payload['attack']['success']} adversarial clips"),
                     (ax2, "by attack direction")):
        a.set(xlabel="k segments of the perturbation added", ylabel="label-flip rate", xticks=ks[::2],
              ylim=(-0.02, 1.02), title=title)
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
        for vals, lab in ((g["fidelity_correct"].get("values", []), "global\ncorrect"),
                          (g["fidelity_wrong"].get("values", []), "global\nwrong"),
                          (corr, "localised\ncorrect"), (wrong, "localised\nwrong")):
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


def tables(payload: dict[str, Any]) -> str:
    """Markdown tables (Table 1, Table 2, localised recovery, fidelity, timing) of a ``veracity.json`` payload."""
    names = [k for k in payload["global"] if k not in ("norm", "random")]
    g, loc = payload["global"], payload["localised"]
    pct = lambda v: "–" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    lines = [f"Global attack: {payload['attack']['success']} of {payload['attack']['clips']} clips adversarial.", "",
             "| segments added (k = 3) | label-flip rate |", "|---|---|"]
    by = lambda r, t: pct(r["rate_by_target"][t][2]) if t in r["rate_by_target"] else "–"  # noqa: E731
    lines[2:4] = ["| segments added (k = 3) | label-flip rate | voice → no_voice | no_voice → voice |",
                  "|---|---|---|---|"]
    rows = [(f"LIME top 3, {n}", g[n]) for n in names] + [("largest perturbation norm", g["norm"]),
                                                          ("random", g["random"])]
    lines += [f"| {lab} | {pct(r['rate'][2])} | {by(r, '0')} | {by(r, '1')} |" for lab, r in rows]
    lines += ["", "| all positively weighted segments | label-flip rate | voice → no_voice | no_voice → voice "
              "| segments (mean) |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {pct(g[n]['all_positive'])} | {pct(g[n]['all_positive_by_target'].get('0'))} | "
              f"{pct(g[n]['all_positive_by_target'].get('1'))} | {g[n]['n_positive']:.1f} |" for n in names]
    lines += ["", "| segment with the largest perturbation norm | LIME rank (1-20), voice → no_voice "
              "| negative weight | LIME rank, no_voice → voice | negative weight |", "|---|---|---|---|---|"]
    for n in names:
        m = g[n].get("largest_norm_segment", {})
        cell = lambda t: (f"{m[t]['mean_lime_rank']:.1f} | {pct(m[t]['negative_weight'])}"  # noqa: E731
                          if t in m else "– | –")
        lines.append(f"| {n} | {cell('0')} | {cell('1')} |")
    lines += ["", "| localised attack | k | attacks | mean recovered of k (chance k²/20) | all k recovered |",
              "|---|---|---|---|---|"]
    for n in names:
        for k in ("1", "3", "5"):
            if k in loc[n]:
                r = loc[n][k]
                lines.append(f"| {n} | {k} | {r['n']} | {r['mean_recovered']:.2f} ({int(k) ** 2 / 20:.2f}) | "
                             f"{pct(r['all_recovered'])} |")
    lines += ["", "| fidelity (weighted R²), median [IQR] (n) | global: top 3 flip | global: no flip "
              "| localised: all k found | localised: not all found |", "|---|---|---|---|---|"]

    def fmt(values: list[float]) -> str:
        if not values:
            return "–"
        q = torch.quantile(torch.tensor(values), torch.tensor([0.25, 0.5, 0.75])).tolist()
        return f"{q[1]:.3f} [{q[0]:.3f}, {q[2]:.3f}] ({len(values)})"

    for n in names:
        found = sum((loc[n][k]["fidelity_correct"] for k in ("1", "3", "5") if k in loc[n]), [])
        missed = sum((loc[n][k]["fidelity_wrong"] for k in ("1", "3", "5") if k in loc[n]), [])
        lines.append(f"| {n} | {fmt(g[n]['fidelity_correct'].get('values', []))} | "
                     f"{fmt(g[n]['fidelity_wrong'].get('values', []))} | {fmt(found)} | {fmt(missed)} |")
    lines += ["", "| setting | explanations | seconds | seconds / explanation |", "|---|---|---|---|"]
    lines += [f"| {n} | {t['explanations']} | {t['seconds']:.0f} | {t['seconds_per_explanation']:.2f} |"
              for n, t in payload["timing"].items()]
    return "\n".join(lines) + "\n"
