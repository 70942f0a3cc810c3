"""The GPU tables in the docs are the ones benchmarks/gpu/tables.py makes from the committed JSON."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("gpu_tables", ROOT / "benchmarks" / "gpu" / "tables.py")
assert SPEC is not None and SPEC.loader is not None
tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(tables)


def test_every_marked_block_is_current():
    text = tables.tables()
    marked = [p for p in tables.TARGETS if tables.BEGIN in p.read_text()]
    assert len(marked) == 3, marked
    for path in marked:
        page = path.read_text()
        block = page[page.index(tables.BEGIN) + len(tables.BEGIN) : page.index(tables.END)]
        assert block.strip() == text.strip(), f"{path.name}: run python benchmarks/gpu/tables.py --write"


def test_tables_state_the_json_figures():
    latency = json.loads((ROOT / "benchmarks" / "results" / "gpu_latency_cuda.json").read_text())
    default = latency["variants"]["default"]
    text = tables.tables()
    assert f"{default['torchlime_over_floor']:.2f}x" in text and latency["device"] in text
    assert "Not yet measured" not in text  # every GPU result the tables read is committed


def test_call_profile_table_from_a_result():
    case = dict(
        seconds=dict(median=0.2041),
        floor_seconds=dict(median=0.1770),
        beyond_floor_ms=27.1,
        profiled_wall_ms=230.4,
        device_busy_ms=181.2,
        host_syncs=dict(total=5, by_line={}),
        goals=dict(host_syncs=dict(limit=6)),
        ranges={"prepare": dict(wall_ms=6.6), "model": dict(wall_ms=180.2)},
    )
    d = dict(model="inception_v3", image_size=299, n_samples=1000, repetitions=5, cases={"default/slic": case})
    d.update(device="GPU", torch="2", commit="0123456789", date="2026-01-01")
    text = tables.call_profile(d)
    row = "| `default/slic` | 204.1 ms | 177.0 ms | +27.1 ms | 181.2 ms of 230.4 | 5 (budget 6) | "
    row += "6.6 / - / - / - / 180.2 / - / - / - |"
    assert row in text


def test_compat_tables_state_their_json():
    captum = json.loads((ROOT / "benchmarks" / "results" / "captum_switch_cuda.json").read_text())
    shap = json.loads((ROOT / "benchmarks" / "results" / "shap_kernel_cuda.json").read_text())
    text = tables.tables()
    ratio = captum["ratios"]["captum_over_compat_default"]
    assert f"| `compat_default` | {captum['systems']['compat_default']['seconds']['median'] * 1e3:.1f} ms |" in text
    assert f"| {ratio:.1f}x |" in text
    front = shap["scenarios"]["front_page"]
    assert f"| {front['shap_over']['torchlime']:.1f}x |" in text and f"shap {shap['shap']}" in text
