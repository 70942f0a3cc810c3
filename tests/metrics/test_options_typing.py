"""Type checkers see every option of the metrics (``**options: Unpack[ScoreOptions]``), as they saw keywords."""

from __future__ import annotations

import pytest

from tests.helpers.typing_check import marked_lines, mypy_errors

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
    errors, out = mypy_errors(SNIPPET, tmp_path, monkeypatch)
    assert errors == marked_lines(SNIPPET), out
    assert 'Unexpected keyword argument "batchsize" for "deletion"' in out
