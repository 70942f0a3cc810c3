"""The GPU tables of benchmarks/README.md, generated from the committed ``results/*_cuda.json``.

    python benchmarks/gpu/tables.py            # print the tables (markdown)
    python benchmarks/gpu/tables.py --write    # replace the marked block in benchmarks/README.md and docs/

Every figure comes from a JSON file; a file that is missing leaves its table out (and says so).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "results"
#: the files whose marked block holds the tables
TARGETS = [HERE.parent / "README.md", HERE.parents[1] / "docs" / "benchmarks.md", HERE.parents[1] / "docs" / "gpu.md"]
BEGIN, END = "<!-- gpu-tables: begin (benchmarks/gpu/tables.py --write) -->", "<!-- gpu-tables: end -->"


def load(name: str) -> Optional[dict[str, Any]]:
    """``results/<name>.json`` or None where it is missing."""
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def med(entry: dict[str, Any]) -> float:
    """The median of a ``{"median": ...}`` timing entry."""
    return float(entry["median"])


def source(d: dict[str, Any]) -> str:
    """Where a result comes from: device, torch, commit, whether the tree differed, date."""
    tree = " (the tree differed: `provenance` in its JSON)" if d.get("modified_files") else ""
    return f"{d['device']}, torch {d['torch']}, commit `{d['commit'][:7]}`{tree}, {d['date'][:10]}"


def short(d: dict[str, Any]) -> str:
    """A result's commit, starred where the tree differed from it."""
    return f"`{d['commit'][:7]}`" + ("*" if d.get("modified_files") or d.get("provenance") else "")


def table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def latency(d: dict[str, Any]) -> str:
    rows = []
    for name, v in d["variants"].items():
        s = v["seconds"]
        ok = all(g.get("within_goal", True) for g in v.get("goals", {}).values())
        rows.append(
            [
                f"`{name}`",
                f"{med(s['torchlime']):.3f} s",
                f"{med(s['floor']):.3f} s (chunk {v['floor_chunk']})",
                f"+{v['overhead_seconds'] * 1e3:.1f} ms",
                f"{v['torchlime_over_floor']:.2f}x",
                f"{v['peak_memory_bytes'] / 1e9:.1f} GB",
                "yes" if ok else "no",
            ]
        )
    anchors = ", ".join(
        f"{k} {med(v['seconds']):.2f} s ({v['over_default_torchlime']:.0f}x the default)"
        for k, v in d["anchors"].items()
    )
    return (
        f"**Latency**: one {d['model']} explanation, {d['image_size']}x{d['image_size']}, N={d['n_samples']}, end to "
        f"end (default SLIC: {med(d['segmentation_seconds_torchlime_slic']) * 1e3:.2f} ms of it, goal 3 ms); median of "
        f"{d['repetitions']} interleaved repetitions; {source(d)}.\n\n"
        + table(["variant", "torchlime", "floor", "added", "/ floor", "peak", "goals met"], rows)
        + f"\n\nOn the same GPU in the same run: {anchors}."
    )


def throughput(d: dict[str, Any]) -> str:
    rows = []
    for name, v in d["variants"].items():
        s = v["seconds"]
        rows.append(
            [
                f"`{name}`",
                f"{med(s['torchlime']):.2f} s",
                f"{med(s['floor']):.2f} s (chunk {v['floor_chunk']})",
                f"{v['ratio']:.3f}",
                f"{v['explanations_per_second']:.2f}",
                f"{v['peak_memory_bytes'] / 1e9:.1f} GB (chunk {v['torchlime_chunk']})",
            ]
        )
    return (
        f"**Throughput**: {d.get('images', 32)} images x N={d.get('n_samples', 1000)}, {d.get('model', 'resnet50')}; "
        f"median of {d['repetitions']}; {source(d)}.\n\n"
        + table(["variant", "torchlime", "floor", "floor / torchlime", "explanations/s", "peak"], rows)
    )


def segmentation(d: dict[str, Any]) -> str:
    per = d["median_seconds_per_image"]
    rows = [[k, f"{v * 1e3:.2f} ms"] for k, v in per.items()]
    ari = d["torch_vs_triton_labels"]["adjusted_rand_index"]
    return (
        f"**Segmentation** ({d['image']}, {d['n_segments']} segments; per image): {source(d)}.\n\n"
        + table(["method", "per image"], rows)
        + f"\n\ntorch vs Triton labels: adjusted Rand index mean {ari['mean']:.4f}, min {ari['min']:.4f}."
    )


def modalities() -> str:
    rows = []
    a = load("audio_gpu_cuda")
    if a:
        rows.append(
            [
                "audio spectrogram",
                f"B={a['batch']}, N={a['n_samples']}",
                f"{a['explain_over_floor']:.2f}x",
                f"{a['explanations_per_second']['explain']:.0f} explanations/s",
                short(a),
            ]
        )
        if "explain_waveform_over_floor" in a:
            rows.append(
                [
                    "audio waveform (STFT cells)",
                    f"B={a['batch']}, N={a['n_samples']}",
                    f"{a['explain_waveform_over_floor']:.2f}x",
                    f"{a['explanations_per_second']['explain_waveform']:.0f} explanations/s",
                    short(a),
                ]
            )
    b1 = load("audio_batch1_cuda")
    if b1:
        rows.append(
            [
                "audio, one clip",
                f"N={b1['n_samples']}, chunk {b1['torchlime_chunk']}",
                f"{b1['explain_over_floor']:.2f}x",
                f"batch-1 model calls take {b1['floor_batch1_over_explain']:.0f}x torchlime",
                short(b1),
            ]
        )
    t = load("text_gpu_cuda")
    if t:
        for mode, r in t["ratio_to_floor"].items():
            rows.append(
                [
                    f"text {mode.removeprefix('explain_')}",
                    f"{t['batch']} x {t['length']} tokens, N={t['n_samples']}",
                    f"{r:.2f}x",
                    f"{t['explanations_per_second'][mode]:.2f} explanations/s",
                    short(t),
                ]
            )
    k = load("token_drop_cuda")
    if k:
        s = {n: med(v["seconds"]) for n, v in k["systems"].items()}
        rows.append(
            [
                "ViT-S/16 dropped patch tokens",
                f"N={k['setup']['n_samples']}, keep 0.5",
                f"{k['ratios']['drop_over_floor']:.2f}x (fill {k['ratios']['fill_over_floor']:.2f}x)",
                f"drop {s['drop']:.3f} s, fill floor {s['floor']:.3f} s, captum {s.get('captum', float('nan')):.2f} s",
                short(k),
            ]
        )
    x = load("boxes_cuda")
    if x:
        rows.append(
            [
                "detector boxes (8 images x 3 boxes)",
                f"N={x['setup']['n_samples']}",
                f"{x['small_torchlime_over_floor']:.2f}x",
                f"captum (best) {x['captum_best_over_torchlime']:.0f}x slower",
                short(x),
            ]
        )
    g = load("generation_cuda")
    if g:
        r = g["ratios"]
        rows.append(
            [
                "generated continuation (GPT-2 shape, 4 layers)",
                f"N={g['setup']['n_samples']}",
                f"{r['torchlime_over_floor']:.1f}x",
                f"captum (best) {r['captum_best_over_torchlime']:.0f}x slower",
                short(g),
            ]
        )
    runs = {f"{d['device']}, torch {d['torch']}, {d['date'][:10]}" for d in (a, b1, t, k, x, g) if d}
    return (
        "**Modalities and targets** (torchlime / its own forward floor):\n\n"
        + table(["what", "size", "/ floor", "beside", "commit"], rows)
        + f"\n\nRuns: {'; '.join(sorted(runs))}. `*`: the tree differed from that commit (`modified_files` and "
        "`provenance` in the JSON say how)."
    )


def probe(d: dict[str, Any]) -> str:
    det = d["reproducibility"]["deterministic_algorithms"]["plain_vs_probe"]["bit_identical"]
    return (
        f"**Training-loop probe** ({d['setup']['probe_images']} images x N={d['setup']['n_samples']}): "
        f"{d['overhead_per_probe_call_seconds'] * 1e3:.1f} ms a call = "
        f"{d['overhead_per_probe_call_in_training_steps']:.1f} training steps; every "
        f"{d['amortised_overhead_fraction']['every']} steps {d['amortised_overhead_fraction']['fraction'] * 100:.1f}% "
        f"of training time; under deterministic algorithms training with the probe is "
        f"{'bit-identical' if det else 'NOT bit-identical'} to training without it. {source(d)}."
    )


def memory(d: dict[str, Any]) -> str:
    runs = d.get("runs") or d.get("results") or []
    ratios = [r["measured_over_estimate"] for r in runs if "measured_over_estimate" in r]
    span = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "n/a"
    cells = f"{len(ratios)} (image size, chunk) cells"
    return f"**Chunk memory**: measured peak / the engine's estimate {span} over {cells}. {source(d)}."


def call_profile(d: dict[str, Any]) -> str:
    """One call split by torchlime's profiler ranges, per case (``bench_call_profile.py``)."""
    stages = ("prepare", "plan", "masks", "blend", "model", "rows", "fit", "assemble")
    rows = []
    for name, c in d["cases"].items():
        ranges = c.get("ranges", {})
        busy = c.get("device_busy_ms")
        found = c.get("host_syncs") or {}
        syncs = found.get("in_call", found.get("total"))  # results before in_call counted the reader's read too
        rows.append(
            [
                f"`{name}`",
                f"{med(c['seconds']) * 1e3:.1f} ms",
                f"{med(c['floor_seconds']) * 1e3:.1f} ms",
                f"{c['beyond_floor_ms']:+.1f} ms",
                "n/a" if busy is None else f"{busy:.1f} ms of {c['profiled_wall_ms']:.1f}",
                "n/a" if syncs is None else f"{syncs} (budget {c['goals']['host_syncs']['limit']})",
                " / ".join(f"{ranges[k]['wall_ms']:.1f}" if k in ranges else "-" for k in stages),
            ]
        )
    head = ["variant / segments", "call", "floor", "added", "device busy (profiled call)", "host syncs"]
    return (
        f"**One call, profiled**: {d['model']} {d['image_size']}x{d['image_size']}, N={d['n_samples']} "
        f"(median of {d['repetitions']}; ranges from one profiled call, host ms, exclusive of nested ranges). "
        f"{source(d)}.\n\n" + table(head + [" / ".join(stages) + " (ms)"], rows)
    )


def captum_switch(d: dict[str, Any]) -> str:
    """captum's ``Lime`` against ``torchlime.compat.captum`` on the same model (``bench_captum_switch.py``)."""
    st, sy = d["setup"], d["systems"]
    secs = {k: med(v["seconds"]) for k, v in sy.items()}
    rows = [
        [f"`{k}`", f"{t * 1e3:.1f} ms", str(sy[k]["model_calls"]), f"{secs['captum'] / t:.1f}x"]
        for k, t in secs.items()
    ]
    head = (
        f"**captum switch** ({st['images']} images {st['size']}x{st['size']}, {st['features']} features, N="
        f"{st['n_samples']}, `{st['model']}`; captum's `Lime` vs `torchlime.compat.captum.Lime`, median of "
        f"{st['reps']}): {source(d)}."
    )
    return head + "\n\n" + table(["system", "time", "model calls", "captum / this"], rows)


def shap_kernel(d: dict[str, Any]) -> str:
    """shap's ``KernelExplainer`` against ``torchlime.compat.shap`` (``bench_shap_kernel.py``)."""
    rows = []
    for name, sc in d["scenarios"].items():
        st, secs = sc["setup"], {k: med(v["seconds"]) for k, v in sc["systems"].items()}
        agree = max(a["max_abs_diff"] for a in sc["agreement_with_shap"].values())
        for k, t in secs.items():
            if k != "shap":
                rows.append(
                    [name, st["model"], f"`{k}`", f"{t * 1e3:.1f} ms", f"{secs['shap'] / t:.1f}x", f"{agree:.1e}"]
                )
    head = f"**shap KernelExplainer** (shap {d['shap']}, median of {d['reps']}): {source(d)}."
    return head + "\n\n" + table(["case", "model", "system", "time", "shap / this", "max diff to shap"], rows)


#: tables shown when their JSON is committed, otherwise named as not yet run
OPTIONAL: list[tuple[str, Callable[[dict[str, Any]], str], str]] = [
    ("call_profile_cuda", call_profile, "benchmarks/bench_call_profile.py"),
    ("captum_switch_cuda", captum_switch, "benchmarks/bench_captum_switch.py"),
    ("shap_kernel_cuda", shap_kernel, "benchmarks/bench_shap_kernel.py"),
]

PARTS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("gpu_latency_cuda", latency),
    ("gpu_throughput_cuda", throughput),
    ("segmentation_cuda", segmentation),
    ("probe_overhead_cuda", probe),
    ("chunk_memory_cuda", memory),
]


def tables() -> str:
    """Every GPU table, in the README's order."""
    out, missing = [], []
    for name, fn in PARTS:
        d = load(name)
        if d is None:
            missing.append(name)
        else:
            out.append(fn(d))
    out.insert(2, modalities())
    for name, fn, script in OPTIONAL:
        d = load(name)
        out.append(fn(d) if d is not None else f"Not yet run on a GPU: `{script}` (`results/{name}.json`).")
    if missing:
        out.append("Not yet measured on a GPU: " + ", ".join(f"`results/{m}.json`" for m in missing) + ".")
    return "\n\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the marked block of each file that has one")
    args = parser.parse_args()
    text = tables()
    if not args.write:
        print(text)
        return
    for path in TARGETS:
        page = path.read_text()
        if BEGIN not in page:
            continue
        start, stop = page.index(BEGIN) + len(BEGIN), page.index(END)
        path.write_text(page[:start] + "\n" + text + "\n" + page[stop:])
        print(f"wrote {path.relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    main()
