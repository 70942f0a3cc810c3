"""``benchmarks/bench_design_effect.py``: its design-effect estimate sees the design (about 1 for independent
masks, well below 1 where the Sobol design cancels the interactions), its stopping rule stops an exact fit in
the first round, and the table of ``docs/choosing-n.md`` is what ``results/design_effect_cpu.json`` says."""

from __future__ import annotations

import json
import statistics
import warnings
from pathlib import Path

import torch

from torchlime import explain

from benchmarks import bench_design_effect as bench
from benchmarks import design_effect_lib as lib

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "benchmarks" / "results" / "design_effect_cpu.json"


def _run(model, sampler: str, n: int = 1024) -> dict:
    x, f = torch.rand(16, 8, generator=torch.Generator().manual_seed(0)) + 0.5, torch.arange(8).view(1, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain(model, x, f, n_samples=n, generator=2, return_samples=True, sampler=sampler)
    return dict(samples=exp.samples, outputs=exp.outputs, valid=exp.valid)


def _pairwise(v: torch.Tensor) -> torch.Tensor:  # linear plus pairwise interactions, which Sobol masks cancel
    w = torch.linspace(-1.0, 1.0, 8)
    return (v @ w + 0.8 * v[:, 0] * v[:, 1] - 0.6 * v[:, 2] * v[:, 5] + 0.5 * v[:, 3] * v[:, 7]).unsqueeze(1)


def test_the_pooled_design_effect_sees_the_design():
    deffs = {}
    for sampler in ("bernoulli", "sobol"):
        run = _run(_pairwise, sampler)
        chain = lib.halvings(run["samples"], run["outputs"], run["valid"], 1024)
        deff, dof, pooled = lib.pooled_design_effect(chain, run["valid"])
        assert bool(pooled.all()) and bool((dof > 1).all())
        deffs[sampler] = statistics.median(deff.tolist())
    assert 0.5 <= deffs["bernoulli"] <= 2.0  # independent masks: the i.i.d. formula is right
    assert deffs["sobol"] <= 0.3 * deffs["bernoulli"]  # the design's fold-over cancels the pairwise terms


def test_the_rule_stops_an_exact_fit_in_the_first_round_and_a_noisy_one_later():
    w = torch.linspace(-1.0, 1.0, 8)
    exact = _run(lambda v: (v @ w).unsqueeze(1), "sobol")
    assert lib.lime_rule_stops(exact["samples"], exact["outputs"], exact["valid"], 128, 1024, 3) == [128] * 16
    noisy = _run(lambda v: (v @ w + 2.0 * torch.sin(40 * v.sum(1))).unsqueeze(1), "bernoulli")
    used = lib.lime_rule_stops(noisy["samples"], noisy["outputs"], noisy["valid"], 128, 1024, 3)
    assert all(u is None or u > 128 for u in used)


def test_the_table_is_the_json_and_the_json_is_a_full_run():
    payload = json.loads(RESULT.read_text())
    assert not payload["quick"]
    assert all(set(r["designs"]) == set(bench.DESIGNS) for r in payload["mlp"])
    assert [r["model"] for r in payload["mlp"]] == [
        f"mlp_f{f}_seed{s}" for f in bench.FEATURES for s in bench.MODEL_SEEDS
    ]
    assert bench.table(payload) in (ROOT / "docs" / "choosing-n.md").read_text()
