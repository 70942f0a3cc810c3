"""Type checkers see every option of the metrics (``**options: Unpack[ScoreOptions]``), as they saw keywords."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: calls of the metrics: the lines marked ``# error`` must be mypy's errors, and only they
SNIPPET = """\
import torch

import torchlime
from torchlime import metrics

model = torch.nn.Linear(4, 2)
x = torch.rand(3, 4)
exp = torchlime.explain(model, x, n_samples=8)
metrics.deletion(model, x, exp, steps=2, batch_size=4, output=0, softmax=True, progress=False)
metrics.label_flip(model, x, exp, k=2, batch_size=None)
metrics.infidelity(model, x, exp, perturbations=metrics.UniformNoise(0.1, n=4), softmax=None)
metrics.max_sensitivity(model, x, lambda m, v: v, perturbations=metrics.GaussianNoise(n=2))
metrics.deletion(model, x, exp, batchsize=4)  # error: a misspelt option
metrics.label_flip(model, x, exp, k=2, softmax=True)  # error: an option the metric does not take
metrics.faithfulness_correlation(model, x, exp, progress="yes")  # error: an option of the wrong type
metrics.infidelity(model, x, exp, n_perturb=4)  # error: a keyword that is gone (perturbations=)
"""


@pytest.mark.slow  # a few seconds after the package's own mypy run (its cache), a minute without
def test_type_checkers_see_every_option(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    (tmp_path / "calls.py").write_text(SNIPPET)
    monkeypatch.chdir(ROOT)  # the package's mypy configuration and cache
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    out, _, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(tmp_path / "calls.py")])
    errors = {
        int(line.split("calls.py:")[1].split(":")[0])
        for line in out.splitlines()
        if "calls.py:" in line and ": error:" in line
    }
    marked = {i for i, line in enumerate(SNIPPET.splitlines(), 1) if "# error" in line}
    assert errors == marked, out
    assert 'Unexpected keyword argument "batchsize" for "deletion"' in out
