"""Tables of the explanation-quality study, from its committed JSON result.

``blocks`` turns ``results/quality.json`` (written by ``benchmarks/quality.py``) into the
generated parts of ``benchmarks/QUALITY.md``: markdown between ``<!-- begin: NAME -->`` and
``<!-- end: NAME -->`` markers. Everything outside the markers is written by hand. Only the
JSON is read, so the report can be rebuilt and checked without rerunning the study:

    python benchmarks/quality_report.py           # rewrite the generated blocks of QUALITY.md
    python benchmarks/quality_report.py --print   # print the blocks instead
    python benchmarks/quality_report.py --check   # exit 1 if QUALITY.md disagrees with the JSON

``tests/test_quality_report.py`` runs the check.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

import torch

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
DOCUMENT = BENCH / "QUALITY.md"
MODALITY_NAMES = dict(planted="planted linear model (images)", image="images", audio="spectrograms", text="tokens")
METHOD_NAMES = dict(
    lime="lime defaults",
    stratified="stratified",
    antithetic="antithetic",
    sobol="Sobol",
    lasso="Lasso",
    klasso="K-Lasso",
    bayes="BayLIME",
    uniform="uniform kernel",
    smile="SMILE (Wasserstein)",
    auto="top-5 rule (Adaptive(rule='top_k'))",
    kernel_shap="KernelSHAP preset",
)
BLOCK = re.compile(r"<!-- begin: (?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- end: (?P=name) -->", re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a literal pipe inside a table cell


def _md(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(map(_cell, header)) + " |", "|" + "---|" * len(header)]
        + ["| " + " | ".join(map(_cell, r)) + " |" for r in rows]
    )


def fmt(v: Optional[float], digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def pct(v: Optional[float]) -> str:
    return "–" if v is None else f"{100 * v:.1f} %"


def mean_sd(s: dict[str, Any], digits: int = 3) -> str:
    """``mean ± sd`` of a stats record ("–" when it has no values)."""
    if not s or s.get("mean") is None:
        return "–"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"


def quartiles(s: dict[str, Any], digits: int = 3) -> str:
    """``median [q1, q3]`` of a stats record."""
    if not s or s.get("median") is None:
        return "–"
    return f"{s['median']:.{digits}f} [{s['q1']:.{digits}f}, {s['q3']:.{digits}f}]"


def spearman(a: list[Optional[float]], b: list[Optional[float]]) -> Optional[float]:
    """Spearman's rank correlation of the pairs where both values exist (ties: average ranks)."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(pairs) < 3:
        return None
    x, y = (torch.tensor(v, dtype=torch.float64) for v in zip(*pairs))

    def ranks(v: torch.Tensor) -> torch.Tensor:
        greater = (v.unsqueeze(0) < v.unsqueeze(1)).sum(1).double()
        equal = (v.unsqueeze(0) == v.unsqueeze(1)).sum(1).double()
        return greater + (equal + 1) / 2

    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = (rx.norm() * ry.norm()).item()
    return None if den == 0 else float((rx * ry).sum() / den)


def separation_auc(right: list[float], wrong: list[float]) -> Optional[float]:
    """P(a right explanation has a higher R² than a wrong one), ties 1/2; None if a side is empty."""
    if not right or not wrong:
        return None
    a, b = torch.tensor(right).view(-1, 1), torch.tensor(wrong).view(1, -1)
    return float(((a > b).float() + 0.5 * (a == b).float()).mean())


def _methods(payload: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for rec in payload["modalities"].values():
        seen += [m for m in rec["methods"] if m not in seen]
    return seen


def machine(payload: dict[str, Any]) -> str:
    changes = payload.get("uncommitted_changes")
    if changes is None:
        tree = "source state not recorded"
    elif changes:
        names = ", ".join(f"`{c}`" for c in changes[:4]) + (f" and {len(changes) - 4} more" if len(changes) > 4 else "")
        tree = (
            f"**not a clean tree**: uncommitted changes in {names} (`uncommitted_changes` in the JSON, diff hash "
            f"`{(payload.get('diff_sha256') or '')[:12]}`)"
        )
        if payload.get("diff_sha256_end", payload.get("diff_sha256")) != payload.get("diff_sha256"):
            tree += ", and the tree changed during the run (`uncommitted_changes_end`)"
    else:
        tree = "clean tree (no uncommitted change in `torchlime/` or the study's scripts)"
    load = payload.get("load_average_start")
    load_txt = f", load average {load[0]:.1f} at the start" if load else ""
    return (
        f"Machine: {payload['device']}{load_txt}; torch "
        f"{payload['torch']}, Python {payload['python']}; commit `{payload['commit'][:10]}`, "
        f"{payload['date']}; {tree}. The whole run took {payload['seconds'] / 60:.1f} min. "
        f"{payload['n_inputs']} inputs per modality, budget N = {payload['budget']} model rows per input, "
        f"seeds {', '.join(map(str, payload['seeds']))}."
    )


def setup(payload: dict[str, Any]) -> str:
    rows = []
    for mod, rec in payload["modalities"].items():
        pool = ""
        if "pool_correct" in rec:
            pool = (
                f"; the first {rec['n_inputs']} usable of {rec['pool']} ({rec['pool_correct']} classified "
                f"correctly"
                + (f", {rec['pool_without_gold']} without a gold segment" if "pool_without_gold" in rec else "")
                + ")"
            )
        rows.append(
            [
                MODALITY_NAMES.get(mod, mod),
                rec["model"],
                rec["data"] + pool,
                str(rec["n_inputs"]),
                rec["feature_map"],
                f"{rec['n_features']['mean']:.1f}",
                f"{rec['gold_features']['mean']:.2f}",
                rec["gold_rule"],
                rec["fill"],
            ]
        )
    return _md(
        [
            "modality",
            "model",
            "inputs",
            "n",
            "features",
            "features per input (mean)",
            "gold features (mean)",
            "gold rule",
            "fill of hidden features",
        ],
        rows,
    )


def _setting(text: str) -> str:
    return text.strip("'\"")


def methods(payload: dict[str, Any]) -> str:
    """One row per method; a setting that differs between modalities is given per modality."""
    fields = ("sampler", "kernel", "surrogate", "n_samples")
    rows = []
    for name in _methods(payload):
        row = [METHOD_NAMES.get(name, name)]
        for key in fields:
            by_value: dict[str, list[str]] = {}
            for mod, rec in payload["modalities"].items():
                if name in rec["methods"]:
                    value = _setting(rec["methods"][name]["settings"][key])
                    by_value.setdefault(value, []).append(MODALITY_NAMES.get(mod, mod))
            common, *others = sorted(by_value, key=lambda v: -len(by_value[v]))  # the most common value first
            row.append(" ".join([common] + [f"({', '.join(by_value[v])}: {v})" for v in others]))
        rows.append(row)
    ks = payload["kernel_shap"]
    note = (
        ""
        if ks["available"]
        else f'\n\nKernelSHAP (`preset="kernel_shap"`): {ks["note"]} when this run was made; not measured.'
    )
    return _md(["method", *fields], rows) + note


def modality_table(payload: dict[str, Any], mod: str) -> str:
    rec = payload["modalities"][mod]
    planted = mod == "planted"
    header = [
        "method",
        "samples / input",
        "deletion AUC ↓",
        "insertion AUC ↑",
        "label flip, top 3",
        "gold recall @ #gold",
        "gold recall @ 3",
        "ROC-AUC vs gold",
        f"Jaccard top 5, {len(payload['seeds'])} seeds",
        "weighted R²",
        "flagged",
    ]
    header += ["coefficient error"] if planted else []
    rows = []
    for name, m in rec["methods"].items():
        met = m["metrics"]
        rows.append(
            [
                METHOD_NAMES.get(name, name),
                f"{m['model_rows_per_input']:.0f}",
                mean_sd(met["deletion_auc"], 2),
                mean_sd(met["insertion_auc"], 2),
                pct(met["label_flip_top3"]["mean"]),
                mean_sd(met["gold_recall_at_gold"], 2),
                mean_sd(met["gold_recall_top3"], 2),
                mean_sd(met["roc_auc"]),
                mean_sd(met["jaccard_top5"], 2),
                mean_sd(met["r2"]),
                pct(met["flagged"]["mean"]),
            ]
            + ([mean_sd(met.get("coef_error"), 3)] if planted else [])
        )
    n = rec["n_inputs"]
    return (
        f"{MODALITY_NAMES.get(mod, mod).capitalize()}: {n} inputs, mean ± standard deviation over the "
        f"inputs of the per-input mean over {len(payload['seeds'])} seeds.\n\n" + _md(header, rows)
    )


def headline(payload: dict[str, Any]) -> str:
    mods = list(payload["modalities"])
    rows = []
    for name in _methods(payload):
        row = [METHOD_NAMES.get(name, name)]
        for mod in mods:
            m = payload["modalities"][mod]["methods"].get(name)
            row.append(
                "–"
                if m is None
                else f"{fmt(m['metrics']['roc_auc']['mean'])} / {fmt(m['metrics']['gold_recall_at_gold']['mean'], 2)}"
                f" / {fmt(m['metrics']['jaccard_top5']['mean'], 2)}"
            )
        rows.append(row)
    return _md(
        ["ROC-AUC / gold recall @ #gold / Jaccard top 5 (means)"] + [MODALITY_NAMES.get(m, m) for m in mods], rows
    )


def spread(payload: dict[str, Any]) -> str:
    mods = list(payload["modalities"])
    rows = [
        [METHOD_NAMES.get(name, name)]
        + [
            "–"
            if name not in payload["modalities"][mod]["methods"]
            else quartiles(payload["modalities"][mod]["methods"][name]["metrics"]["roc_auc"])
            for mod in mods
        ]
        for name in _methods(payload)
    ]
    return _md(["ROC-AUC vs gold: median [q1, q3]"] + [MODALITY_NAMES.get(m, m) for m in mods], rows)


def fidelity(payload: dict[str, Any]) -> str:
    """Does R² tell good explanations from bad ones? Per modality and method, over the inputs:
    Spearman's ρ between R² and ROC-AUC, and the AUC of R² separating the inputs whose
    explanations found all gold features in their top #gold (every seed) from the others.
    """
    mods = [m for m in payload["modalities"] if m != "planted"]
    rows = []
    for name in _methods(payload):
        row = [METHOD_NAMES.get(name, name)]
        for mod in mods:
            m = payload["modalities"][mod]["methods"].get(name)
            if m is None:
                row.append("–")
                continue
            per = m["per_input"]
            rho = spearman(per["r2"], per["roc_auc"])
            pairs = [(r, g) for r, g in zip(per["r2"], per["gold_recall_at_gold"]) if r is not None and g is not None]
            right = [r for r, g in pairs if g >= 0.999]
            wrong = [r for r, g in pairs if g < 0.999]
            row.append(f"{fmt(rho, 2)} / {fmt(separation_auc(right, wrong), 2)} ({len(right)} / {len(wrong)})")
        rows.append(row)
    return _md(
        ["Spearman ρ (R², ROC-AUC) / AUC of R² (all gold found / not)"] + [MODALITY_NAMES.get(m, m) for m in mods], rows
    )


def auto_samples(payload: dict[str, Any]) -> str:
    rows = []
    for mod, rec in payload["modalities"].items():
        m = rec["methods"].get("auto")
        if m is None:
            continue
        s = m["metrics"]["samples_used"]
        rows.append(
            [
                MODALITY_NAMES.get(mod, mod),
                f"{s['mean']:.0f}",
                f"{s['median']:.0f} [{s['q1']:.0f}, {s['q3']:.0f}]",
                f"{payload['budget']}",
            ]
        )
    return _md(["top-5 rule", "mean samples / input", "median [q1, q3]", "fixed budget of the others"], rows)


def flags(payload: dict[str, Any]) -> str:
    """Which ``torchlime.engine.quality`` flags were raised, per modality and method (inputs per seed)."""
    lines = []
    for mod, rec in payload["modalities"].items():
        for name, m in rec["methods"].items():
            raised = {k: v for k, v in m["flag_counts"].items() if any(v)}
            if raised:
                lines.append(
                    f"* {MODALITY_NAMES.get(mod, mod)}, {METHOD_NAMES.get(name, name)}: "
                    + "; ".join(
                        f"`{k}` for {', '.join(map(str, v))} of {rec['n_inputs']} inputs" for k, v in raised.items()
                    )
                    + f" (seeds {', '.join(map(str, payload['seeds']))}); {m['unreliable_calls']} of "
                    f"{len(payload['seeds'])} calls warned"
                )
    total = sum(len(r["methods"]) for r in payload["modalities"].values())
    head = (
        f"`torchlime.engine.quality` flags raised, over {total} (modality, method) pairs:"
        if lines
        else f"`torchlime.engine.quality` raised no flag in any of the {total} (modality, method) pairs."
    )
    return "\n".join([head, ""] + lines if lines else [head])


def blocks(payload: dict[str, Any]) -> dict[str, str]:
    """Every generated block of QUALITY.md, by name."""
    out = dict(
        machine=machine(payload),
        setup=setup(payload),
        methods=methods(payload),
        headline=headline(payload),
        auto=auto_samples(payload),
    )
    for mod in payload["modalities"]:
        out[f"table-{mod}"] = modality_table(payload, mod)
    out.update(spread=spread(payload), flags=flags(payload), fidelity=fidelity(payload))
    return out


def render(document: str, generated: dict[str, str]) -> str:
    """``document`` with the body of every marked block replaced by its generated text.

    Raises:
        ValueError: a generated block without its markers in the document.
    """
    missing = [name for name in generated if f"<!-- begin: {name} -->" not in document]
    if missing:
        raise ValueError(f"QUALITY.md lacks the markers of {missing}")
    return BLOCK.sub(
        lambda m: (
            f"<!-- begin: {m['name']} -->\n{generated.get(m['name'], m['body'].rstrip())}\n<!-- end: {m['name']} -->"
        ),
        document,
    )


def document_blocks(document: str) -> dict[str, str]:
    """The bodies of the marked blocks of a document, by name."""
    return {m["name"]: m["body"].rstrip("\n") for m in BLOCK.finditer(document)}


def load(path: Path = RESULTS / "quality.json") -> Optional[dict[str, Any]]:
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, default=RESULTS / "quality.json")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--print", action="store_true", help="print the blocks, change nothing")
    group.add_argument("--check", action="store_true", help="exit 1 if QUALITY.md disagrees with the JSON")
    args = parser.parse_args()
    payload = load(args.json)
    if payload is None:
        sys.exit(f"{args.json} not found: run benchmarks/quality.py first")
    generated = blocks(payload)
    if args.print:
        for name, body in generated.items():
            print(f"<!-- begin: {name} -->\n{body}\n<!-- end: {name} -->\n")
        return
    document = DOCUMENT.read_text()
    updated = render(document, generated)
    if args.check:
        stale = [n for n, b in generated.items() if document_blocks(document).get(n) != b]
        if stale:
            sys.exit(f"QUALITY.md disagrees with {args.json} in: {stale}")
        print("QUALITY.md agrees with the JSON")
        return
    DOCUMENT.write_text(updated)
    print(f"rewrote the generated blocks of {DOCUMENT}")


if __name__ == "__main__":
    main()
