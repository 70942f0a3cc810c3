"""``benchmarks/QUALITY.md`` says what the committed quality results say.

Every generated block of the report (``benchmarks/quality_report.py``) is rebuilt from
``results/quality.json`` and must equal the document's text between its markers; the
hand-written parts may quote no measured figure that the generated tables do not hold; the
report links the veracity and rationale studies; the JSON records the state of the source tree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import quality_report

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


# results/quality.json must come from a clean tree (no uncommitted change in torchlime/ or the study's
# scripts at the start and at the end of the run), so its figures belong to a commit
REQUIRE_CLEAN_TREE = True

# Decimal constants the hand-written text may use although no table holds them: settings of the
# methods and thresholds of the package, not measurements.
CONSTANTS = {
    "0.5": "chance level of an AUC; Bernoulli(1/2)",
    "0.25": "lime's kernel width",
    "0.1": "torchlime.engine.quality's R² threshold",
    "0.01": "the Lasso's alpha",
}


@pytest.fixture(scope="module")
def payload():
    data = quality_report.load()
    assert data is not None, "benchmarks/results/quality.json is missing: run benchmarks/quality.py"
    return data


@pytest.fixture(scope="module")
def document():
    return (BENCH / "QUALITY.md").read_text()


def test_every_generated_block_matches_the_json(payload, document):
    generated = quality_report.blocks(payload)
    present = quality_report.document_blocks(document)
    assert set(generated) <= set(present), f"QUALITY.md lacks the blocks {sorted(set(generated) - set(present))}"
    stale = [name for name, body in generated.items() if present[name] != body]
    assert not stale, f"QUALITY.md disagrees with results/quality.json in {stale}: run benchmarks/quality_report.py"
    assert quality_report.render(document, generated) == document


def test_hand_written_figures_come_from_the_tables(payload, document):
    generated = "\n".join(quality_report.blocks(payload).values())
    prose = quality_report.BLOCK.sub("", document)
    numbers = set(re.findall(r"(?<![\w.])\d+\.\d+(?![\w.])", generated))
    quoted = set(re.findall(r"(?<![\w.`])\d+\.\d+(?![\w.`])", prose))
    unknown = sorted(q for q in quoted if q not in numbers and q not in CONSTANTS)
    assert not unknown, f"QUALITY.md quotes figures that no generated table holds: {unknown}"


def test_links_to_the_other_studies(document):
    assert "](VERACITY.md)" in document and "](TEXT.md)" in document


def test_results_record_the_source_tree_and_the_protocol(payload):
    assert "uncommitted_changes" in payload and "commit" in payload
    assert isinstance(payload["uncommitted_changes"], list)
    if REQUIRE_CLEAN_TREE:
        assert payload["uncommitted_changes"] == [], payload["uncommitted_changes"]
        assert payload.get("uncommitted_changes_end") == [], payload.get("uncommitted_changes_end")
    assert not payload["quick"]
    assert not payload["torchlime_file"].startswith("/"), "the JSON names a path of the machine that ran it"
    assert payload["n_inputs"] >= 32 and len(payload["seeds"]) >= 3
    assert set(payload["modalities"]) >= {"image", "audio", "text"}
    for mod, rec in payload["modalities"].items():
        assert rec["n_inputs"] >= 32, mod
        for name, m in rec["methods"].items():
            assert m["metrics"]["roc_auc"]["n"] >= 32, (mod, name)
            if name != "auto":  # every fixed-budget method spends the same model rows
                assert m["model_rows_per_input"] == payload["budget"], (mod, name)


def test_statistics_helpers():
    assert quality_report.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert quality_report.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert quality_report.spearman([1, None, 3], [1, 2, 3]) is None  # fewer than 3 pairs
    # pairs: (0.9 > both) 2, (0.5 > none) 0, (0.7 > 0.6, = 0.7) 1.5 -> 3.5 / 6
    assert quality_report.separation_auc([0.9, 0.5, 0.7], [0.6, 0.7]) == pytest.approx(3.5 / 6)
    assert quality_report.separation_auc([], [0.6]) is None


def test_render_replaces_only_marked_blocks():
    doc = "intro 1.5\n<!-- begin: a -->\nold\n<!-- end: a -->\ntail\n"
    assert quality_report.render(doc, {"a": "new"}) == "intro 1.5\n<!-- begin: a -->\nnew\n<!-- end: a -->\ntail\n"
    with pytest.raises(ValueError, match="markers"):
        quality_report.render(doc, {"b": "x"})
