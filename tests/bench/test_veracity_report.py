"""``benchmarks/VERACITY.md`` says what the committed veracity results say.

Every table and summary line that ``benchmarks/veracity_report.py`` builds from
``results/veracity.json`` and ``results/veracity_tuning.json`` must appear verbatim in the
report, so a rerun that changes a figure fails here until the report is updated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import veracity_report

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def payloads():
    payload, tuning = veracity_report.load("veracity.json"), veracity_report.load("veracity_tuning.json")
    assert payload is not None and tuning is not None, "committed veracity results are missing"
    return payload, tuning


def test_every_generated_table_is_in_the_report(payloads):
    report = (BENCH / "VERACITY.md").read_text()
    blocks = veracity_report.tables(*payloads).strip().split("\n\n")
    assert len(blocks) >= 10
    missing = [b.splitlines()[0] for b in blocks if b not in report]
    assert not missing, f"VERACITY.md disagrees with the JSON in: {missing}"


def test_results_come_from_a_clean_tree_and_the_study_settings(payloads):
    payload, tuning = payloads
    assert payload["uncommitted_changes"] == [] and tuning["uncommitted_changes"] == []
    assert {cfg["n_samples"] for cfg in payload["settings"].values()} == {"8192"}
    assert payload["attack"]["success"] == payload["n_clips"] == 96
    assert tuning["clip_seed"] != payload["clip_seed"]  # settings chosen on other clips


def test_separation_auc_against_counting():
    right, wrong = [0.9, 0.5, 0.7], [0.6, 0.7]
    # pairs: (0.9 > both) 2, (0.5 > none) 0, (0.7 > 0.6, = 0.7) 1.5 -> 3.5 / 6
    assert veracity_report.separation_auc(right, wrong) == pytest.approx(3.5 / 6)
    assert veracity_report.separation_auc([], wrong) is None
