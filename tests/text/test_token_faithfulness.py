"""``benchmarks/token_faithfulness.py`` runs, and ``benchmarks/TABULAR.md``'s token tables say what
``benchmarks/results/token_faithfulness.json`` says.

The script runs end to end with ``--quick`` (a few seconds) and writes a JSON of the committed
layout; every result row of the committed JSON must appear, rendered as below, in the section
"The same protocol on tokens", so a table left behind by a new run fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import pct, with_sem

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULT = BENCH / "results" / "token_faithfulness.json"
DOC = BENCH / "TABULAR.md"
SECTION = "## The same protocol on tokens"
METHODS = ("torchlime_ridge", "torchlime_klasso")


def recall_rows(payload: dict) -> list[str]:
    """The token section's main table: recall (%) of the gold words among the top 10."""
    out = []
    for r in payload["results"]:
        lime = with_sem(r["lime"]) if "lime" in r else "–"
        same = with_sem(r["torchlime_ridge_same_inputs"]) if "lime" in r else "–"
        out.append(
            f"| {r['description']} | {pct(r['accuracy'])} | {r['torchlime_ridge']['n']} ({r['skipped']}) | "
            f"{r['tokens_mean']:.1f} | {r['gold_mean']:.2f} / {r['gold_max']} | "
            f"{with_sem(r['torchlime_ridge'])} | {with_sem(r['torchlime_klasso'])} | {lime} | {same} | "
            f"{with_sem(r['random'])} | {pct(r['random_expected'])} |"
        )
    return out


def detail_rows(payload: dict) -> list[str]:
    """The second table: recall among the top g features (g = gold tokens), median R², gold weights."""
    out = []
    for r in payload["results"]:
        weights = (
            ", ".join(f"{w['word']} {w['weight']:+.3f}" for w in r["gold_weights"]) if r.get("gold_weights") else "–"
        )
        ridge, klasso = r["torchlime_ridge"], r["torchlime_klasso"]
        out.append(
            f"| {r['model']} | {r['gold_tokens_mean']:.2f} | {with_sem(ridge['top_gold_tokens'])} | "
            f"{with_sem(klasso['top_gold_tokens'])} | {ridge['r2_median']:.2f} | "
            f"{klasso['r2_median']:.2f} | {weights} |"
        )
    return out


def check_layout(payload: dict, quick: bool) -> None:
    """The keys the document and the tables read, for both models."""
    assert payload["benchmark"] == "token_faithfulness" and payload["quick"] is quick and payload["device"]
    assert payload["top_k"] == 10 and payload["max_gold"] == 10
    assert [r["model"] for r in payload["results"]] == ["L1 logistic regression", "decision tree"]
    for r in payload["results"]:
        assert 1 <= r["gold_max"] <= 10 and r["gold_mean"] >= 1 and r["skipped"] >= 0
        assert 0 < r["random_expected"] <= 1
        for method in METHODS:
            rec = r[method]
            assert rec["n"] == payload["n_test"] and 0 <= rec["mean"] <= 1 and rec["sem"] >= 0
            assert 0 <= rec["top_gold_tokens"]["mean"] <= rec["mean"] + 1e-12
        assert r["random"]["n"] == payload["n_test"]
        if payload["lime"] is not None:
            assert r["lime"]["n"] == r["torchlime_ridge_same_inputs"]["n"] == payload["lime_inputs"]
    assert payload["results"][0]["gold_weights"] and len(payload["results"][0]["gold_weights"]) <= 10


@pytest.fixture(scope="module")
def payload() -> dict:
    assert RESULT.is_file(), "benchmarks/results/token_faithfulness.json is missing: run the benchmark"
    return json.loads(RESULT.read_text())


@pytest.fixture(scope="module")
def section() -> str:
    text = DOC.read_text()
    assert SECTION in text, f"TABULAR.md has no section {SECTION!r}"
    return text.split(SECTION, 1)[1]


def test_benchmark_runs_quick(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "benchmarks/token_faithfulness.py", "--quick", "--out", str(out)],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert sorted(p.name for p in out.iterdir()) == ["token_faithfulness_quick.json"]
    result = json.loads((out / "token_faithfulness_quick.json").read_text())
    check_layout(result, quick=True)
    assert result["device_type"] == "cpu" and result["threads"] == 1


def test_result_is_a_full_run_of_the_protocol(payload):
    check_layout(payload, quick=False)
    assert payload["n_samples"] >= 5000 and payload["n_test"] >= 100 and payload["lime_inputs"] >= 20


def test_every_row_of_the_json_is_in_the_document(payload, section):
    lines = set(section.splitlines())
    missing = [row for row in recall_rows(payload) + detail_rows(payload) if row not in lines]
    assert not missing, (
        "TABULAR.md's token tables disagree with results/token_faithfulness.json; expected rows:\n" + "\n".join(missing)
    )


def test_the_prose_quotes_the_json(payload, section):
    assert f"N = {payload['n_samples']}" in section
    assert f"{payload['n_test']} inputs" in section
    assert f"first {payload['lime_inputs']} inputs" in section
    assert f"{payload['n_train']} training sentences" in section
    assert f"{payload['n_pool']} held-out sentences" in section
