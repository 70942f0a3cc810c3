"""``progress=True`` on every metric that runs a model: a tqdm bar on stderr named after the metric, and
bit-identical values to ``progress=False``."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.metrics import (
    GaussianNoise,
    UniformNoise,
    deletion,
    faithfulness_correlation,
    infidelity,
    insertion,
    label_flip,
    max_sensitivity,
    region_perturbation,
)

from tests.helpers import grid_labels


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x = torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    feats = grid_labels(4, 4, 2, 2).view(1, 1, 4, 4).expand(3, 1, 4, 4)
    exp = explain(model, x, feats, target="top2", n_samples=64)
    return model, x, exp, feats


METRICS = {
    "deletion": lambda m, x, e, f, **kw: deletion(m, x, e, batch_size=5, **kw),
    "insertion": lambda m, x, e, f, **kw: insertion(m, x, e, steps=2, return_curves=True, **kw).curves,
    "region_perturbation": lambda m, x, e, f, **kw: region_perturbation(m, x, e, order="lerf", **kw).score,
    "label_flip": lambda m, x, e, f, **kw: label_flip(m, x, e, k=2, **kw),
    "faithfulness_correlation": lambda m, x, e, f, **kw: faithfulness_correlation(m, x, e, n_subsets=8, **kw),
    "infidelity": lambda m, x, e, f, **kw: infidelity(m, x, e, perturbations=GaussianNoise(n=4), batch_size=4, **kw),
    "max_sensitivity": lambda m, x, e, f, **kw: max_sensitivity(
        m,
        x,
        lambda mm, z: explain(
            mm, z, f[:1].expand(z.shape[0], 1, 4, 4), target=0, n_samples=32, index=torch.arange(len(z))
        ),
        perturbations=UniformNoise(n=2),
        inputs_per_step=2,
        **kw,
    ),
}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_progress_writes_a_bar_and_changes_no_value(case, capsys, name):
    model, x, exp, feats = case
    quiet = METRICS[name](model, x, exp, feats, progress=False)
    assert capsys.readouterr().err == ""
    shown = METRICS[name](model, x, exp, feats, progress=True)
    err = capsys.readouterr().err
    assert f"{name}:" in err and "%|" in err, err
    assert quiet.dtype == shown.dtype and quiet.shape == shown.shape
    torch.testing.assert_close(shown, quiet, rtol=0, atol=0, equal_nan=True)  # bit for bit (NaN where NaN)


@pytest.mark.parametrize("name", sorted(METRICS))
def test_progress_must_be_a_bool(case, name):
    model, x, exp, feats = case
    with pytest.raises(TypeError, match="`progress` must be"):
        METRICS[name](model, x, exp, feats, progress="yes")
