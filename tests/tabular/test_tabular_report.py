"""``benchmarks/TABULAR.md`` says what ``benchmarks/results/tabular_faithfulness.json`` says.

Every result row of the JSON must appear, rendered as below, in the document's tables; the
settings the prose quotes (N, inputs, lime's inputs) are the JSON's; the prose quotes no other
decimal figure than the tables'. The benchmark script itself runs end to end with ``--quick``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import pct, with_sem

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
RESULT = BENCH / "results" / "tabular_faithfulness.json"
DOC = BENCH / "TABULAR.md"
CONSTANTS = {
    "0.75": "lime's kernel width factor",
    "0.1": "torchlime.engine.quality's R² threshold",
    "5.2": "the LIME paper's section",
}


def recall_rows(payload: dict) -> list[str]:
    """The main table's rows: recall (%) of the gold columns among the top 10."""
    out = []
    for r in payload["results"]:
        lime = with_sem(r["lime"]) if "lime" in r else "–"
        same = with_sem(r["torchlime_ridge_same_inputs"]) if "lime" in r else "–"
        out.append(
            f"| `{r['dataset']}` | {r['n_features']} | {r['description']} | {pct(r['accuracy'])} | "
            f"{r['gold_mean']:.1f} / {r['gold_max']} | {with_sem(r['torchlime_ridge'])} | "
            f"{with_sem(r['torchlime_klasso'])} | {lime} | {same} | {with_sem(r['random'])} | "
            f"{pct(r['random_expected'])} |"
        )
    return out


def detail_rows(payload: dict) -> list[str]:
    """The second table's rows: the surrogates' median R² and the gold weights of the linear models."""
    out = []
    for r in payload["results"]:
        weights = ", ".join(f"{w:.3f}" for w in r["gold_weights"]) if r.get("gold_weights") else "–"
        out.append(
            f"| `{r['dataset']}` | {r['model']} | {r['torchlime_ridge']['r2_median']:.2f} | "
            f"{r['torchlime_klasso']['r2_median']:.2f} | {weights} |"
        )
    return out


@pytest.fixture(scope="module")
def payload() -> dict:
    assert RESULT.is_file(), "benchmarks/results/tabular_faithfulness.json is missing: run the benchmark"
    return json.loads(RESULT.read_text())


@pytest.fixture(scope="module")
def document() -> str:
    return DOC.read_text()


def test_result_is_a_full_run_of_the_protocol(payload):
    assert not payload["quick"] and payload["device"]
    assert payload["top_k"] == 10 and payload["max_gold"] == 10 and payload["n_samples"] >= 5000
    assert {r["dataset"] for r in payload["results"]} == {"breast_cancer", "make_classification_50"}
    assert min(r["n_features"] for r in payload["results"]) >= 30
    for r in payload["results"]:
        assert r["gold_max"] <= 10 and r["torchlime_ridge"]["n"] >= 100 and r["lime"]["n"] >= 20


def test_every_row_of_the_json_is_in_the_document(payload, document):
    lines = set(document.splitlines())
    missing = [row for row in recall_rows(payload) + detail_rows(payload) if row not in lines]
    assert not missing, "TABULAR.md disagrees with results/tabular_faithfulness.json; expected rows:\n" + "\n".join(
        missing
    )


def test_the_prose_quotes_the_json(payload, document):
    assert f"N = {payload['n_samples']}" in document
    assert f"{payload['n_test']} held-out inputs" in document
    assert f"first {payload['lime_inputs']} inputs" in document
    tables = "\n".join(recall_rows(payload) + detail_rows(payload))
    numbers = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", tables))
    prose = "\n".join(line for line in document.splitlines() if not line.startswith("|"))
    quoted = set(re.findall(r"(?<![\w.`])\d+\.\d+(?![\w.`])", prose))
    unknown = sorted(q for q in quoted if q not in numbers and q not in CONSTANTS)
    assert not unknown, f"TABULAR.md quotes figures that its tables do not hold: {unknown}"


@pytest.mark.slow
def test_benchmark_runs_quick(tmp_path):
    pytest.importorskip("sklearn")
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "benchmarks/tabular_faithfulness.py", "--quick", "--out", str(out)],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads((out / "tabular_faithfulness_quick.json").read_text())
    assert result["quick"] is True and result["device_type"] == "cpu" and len(result["results"]) == 4
    assert sorted(p.name for p in out.iterdir()) == ["tabular_faithfulness_quick.json"]
