"""``benchmarks/README.md``'s sample-efficiency table says what ``results/sample_efficiency_cpu.json``
says, and the JSON is a full run: at least 50 inputs per model, an N = 20000 reference, the planted
models and a real architecture."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import bench_sample_efficiency

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


RESULT = BENCH / "results" / "sample_efficiency_cpu.json"


def test_the_readme_table_is_the_json():
    payload = json.loads(RESULT.read_text())
    assert bench_sample_efficiency.table(payload) in (BENCH / "README.md").read_text()


def test_the_json_is_a_full_run():
    payload = json.loads(RESULT.read_text())
    assert not payload["quick"] and payload["n_reference"] == 20000
    models = {r["model"]: r for r in payload["results"]}
    assert {"planted_linear", "mobilenet_v3_small_64px"} <= set(models)
    for r in models.values():
        assert r["inputs"] >= 50 and r["n_reference"] == 20000
        assert set(r["designs"]) == {"bernoulli", "stratified", "antithetic", "sobol"}
        assert all(len(d["samples_needed"]) == r["inputs"] for d in r["designs"].values())
        assert len(r["auto_bernoulli"]["samples_used"]) == r["inputs"]
