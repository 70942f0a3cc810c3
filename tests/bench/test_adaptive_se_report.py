"""``benchmarks/bench_adaptive_se.py``: its simulation of the stopping rules is what the engine's adaptive calls
do, the tables of ``benchmarks/README.md`` and ``docs/choosing-n.md`` say what ``results/adaptive_se_cpu.json``
says, and the JSON is a full run whose decision follows from its figures."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from torchlime import explain
from torchlime.methods.adaptive import Adaptive

from benchmarks import bench_adaptive_se as bench

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "benchmarks" / "results" / "adaptive_se_cpu.json"


def test_the_simulated_rules_stop_where_the_engine_stops():
    """Rules fitted on prefixes of one call stop every input where the engine's own adaptive call does, with its
    coefficients (float32 sums over rounds against one pass: 1e-5 apart at most)."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, generator=g)

    def model(v: torch.Tensor) -> torch.Tensor:  # linear plus a pairwise term and input-dependent noise
        return (v @ w + 0.6 * v[:, 0] * v[:, 1] + 0.3 * torch.sin(40 * v.sum(1)) * v[:, 2]).unsqueeze(1)

    x, f = torch.rand(4, 8, generator=g) + 0.5, torch.arange(8).view(1, 8)
    ref = torch.zeros(4, 8, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain(model, x, f, n_samples=1024, generator=3, return_samples=True)
        at_1000 = exp.refit(n_samples=1000)
        run = dict(samples=exp.samples, outputs=exp.outputs, valid=exp.valid, coef_1000=at_1000.coef)
        prefix = bench.prefixes(run, ref, 1024, starts=(64, 32, 250))
        assert prefix["refit_matches_fit"]
        rules = (Adaptive(start=64, cap=1024, rule="top_k"), Adaptive(start=32, cap=1024, se=0.02), Adaptive(cap=1024))
        for rule in rules:
            engine = explain(model, x, f, n_samples=rule, generator=3)
            used = bench.stops(rule, prefix, 1024)
            assert engine.run.samples_used == used
            for b, m in enumerate(used):
                torch.testing.assert_close(engine.coef[b], prefix[m][1].coef[b], rtol=1e-5, atol=1e-6)
    assert bench.stops(Adaptive(start=64, cap=4096, se=1e-9), prefix, 1024) == [None] * 4  # censored past the run


def test_censored_median_and_rounds():
    assert bench.censored_median([250, None, 500]) == 500
    assert bench.censored_median([250, None, None]) is None
    assert bench.censored_median([250, 500, 1000, None]) == 750
    assert bench.rounds(250, 8192) == [250, 500, 1000, 2000, 4000, 8000, 8192]


def test_the_tables_are_the_json_and_the_json_is_a_full_run():
    payload = json.loads(RESULT.read_text())
    table = bench.table(payload)
    assert table in (ROOT / "benchmarks" / "README.md").read_text()
    assert table in (ROOT / "docs" / "choosing-n.md").read_text()
    assert not payload["quick"]
    models = [r["model"] for r in payload["results"]]
    assert models == list(bench.PLAN)
    for r in payload["results"]:
        inputs, n_ref, run_cap, seeds = bench.PLAN[r["model"]]
        assert (r["inputs"], r["n_reference"], r["run_cap"], r["seeds"]) == (inputs, n_ref, run_cap, seeds)
        assert r["refit_matches_fit"]
        for check in r.get("engine_check", {}).values():
            assert check["same_samples"] and check["max_relative_coef_gap"] <= 1e-5
    assert payload["decision"] == json.loads(json.dumps(bench.decide(payload["results"])))
