"""The scripts in examples/ run, at small sizes, and print what their docstrings promise.

Each runs as ``__main__`` in its own interpreter (as a user runs it), with unreliable-explanation and
deprecation warnings as errors (``STRICT``); the training scripts (minutes, and they rewrite the
committed weights) are not run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torchlime

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# a -W/PYTHONWARNINGS filter cannot name a category from a package not yet imported: set them, then run
STRICT = (
    "import runpy, sys, warnings; import matplotlib; matplotlib.use('Agg');"
    "from torchlime.engine.quality import UnreliableExplanationWarning;"
    "warnings.simplefilter('error', UnreliableExplanationWarning); warnings.simplefilter('error', DeprecationWarning);"
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def run(script: str, *args: str, cwd: Path) -> str:
    """Run ``examples/<script>`` with ``args``; its stdout (the test fails with its stderr)."""
    command = [sys.executable, "-c", STRICT, str(EXAMPLES / script), *args]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def test_series_planted_ranks_the_planted_feature_first(tmp_path):
    out = run("series_planted.py", str(tmp_path / "s.png"), "--series", "2", "--n-samples", "128", cwd=tmp_path)
    ranks = [line for line in out.splitlines() if "rank of the planted feature" in line]
    assert len(ranks) == 12 and all(line.endswith("[1, 1]") for line in ranks), out  # 3 feature kinds x 4 fills
    assert (tmp_path / "s.png").stat().st_size > 0


def test_explain_audio_writes_its_picture_and_clips(tmp_path):
    out = run("explain_audio.py", "--out", str(tmp_path / "audio"), "--clips", "2", cwd=tmp_path)
    assert "top-3 LIME segments cover" in out, out
    written = {p.name for p in (tmp_path / "audio").iterdir()}
    assert {"explanations.png", "clip0_original.wav", "clip0_top3.wav", "clip0_complement.wav"} <= written


def test_explain_dataset_writes_a_folder_that_loads(tmp_path):
    folder = tmp_path / "ds"
    out = run("explain_dataset.py", "--out", str(folder), "--n-images", "8", "--n-samples", "64", cwd=tmp_path)
    assert out.startswith(f"8 explanations in {folder}"), out
    results = torchlime.load_results(folder)
    assert len(results) == 8 and tuple(results.coef.shape[:2]) == (8, 1)
