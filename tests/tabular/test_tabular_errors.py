"""Bad arguments of ``explain_tabular`` / ``fit_stats`` / ``conditions``: a TypeError or ValueError
that names the argument, what was expected and what came."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime import explain
from torchlime.tabular import conditions, explain_tabular, fit_stats

TRAIN = torch.randn(50, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def model(x: torch.Tensor) -> torch.Tensor:
    return torch.stack((x[:, 0], -x[:, 0]), 1).softmax(1)


def run(x=TRAIN[:2], **kw):
    kw.setdefault("training_data", TRAIN)
    kw.setdefault("n_samples", 50)
    return explain_tabular(model, x, **kw)


@pytest.mark.parametrize(
    "x,error,match",
    [
        (
            [[1.0, 2.0, 3.0, 4.0]],
            TypeError,
            r"`X` must be a torch.Tensor or a numpy array of numbers \(B, D\), got list",
        ),
        (torch.ones(2, 4, dtype=torch.long), TypeError, r"`X` must be a floating tensor .*got dtype torch.int64"),
        (torch.ones(4), ValueError, r"`X` must have shape \(B, D\) .*got shape \(4,\)"),
        (torch.ones(2, 2, 2), ValueError, r"`X` must have shape \(B, D\) .*got shape \(2, 2, 2\)"),
        (torch.ones(0, 4), ValueError, r"`X` must have shape \(B, D\) with B >= 1 .*got shape \(0, 4\)"),
        (torch.ones(2, 1), ValueError, r"`X` must have at least 2 columns .*got shape \(2, 1\)"),
        (
            torch.tensor([[1.0, float("nan"), 0.0, 0.0], [0.0] * 4]),
            ValueError,
            r"`X` must be finite, got 1 NaN/inf .*\[0\]",
        ),
    ],
)
def test_bad_x(x, error, match):
    with pytest.raises(error, match=match):
        run(x)


@pytest.mark.parametrize(
    "data,error,match",
    [
        (torch.ones(50, 3), ValueError, r"`training_data` must have shape \(N, 4\) .*got shape \(50, 3\)"),
        (torch.ones(50), ValueError, r"`training_data` must have shape \(N, 4\) .*got shape \(50,\)"),
        (torch.ones(0, 4), ValueError, r"`training_data` must have shape \(N, 4\) .*got shape \(0, 4\)"),
        ("rows", TypeError, r"`training_data` must be a tensor or an array of numbers, got str 'rows'"),
        (torch.ones(5, 4, dtype=torch.complex64), TypeError, r"`training_data` must hold real numbers, got dtype"),
        (np.full((5, 4), np.inf), ValueError, r"`training_data` must be finite, got 20 NaN/inf values"),
    ],
)
def test_bad_training_data(data, error, match):
    with pytest.raises(error, match=match):
        run(training_data=data)


@pytest.mark.parametrize(
    "kw,error,match",
    [
        (
            dict(categorical_features=[4]),
            ValueError,
            r"`categorical_features` must hold column indices in \[0, 4\) "
            r"\(the data has 4 columns\), got \[4\]",
        ),
        (dict(categorical_features=[-1]), ValueError, r"`categorical_features` .*got \[-1\]"),
        (
            dict(categorical_features=[1.0]),
            TypeError,
            r"`categorical_features` must hold int column indices, got float",
        ),
        (
            dict(discretizer="kmeans"),
            ValueError,
            r"`discretizer` must be one of \['quartile', 'decile', 'entropy'\], "
            r"got 'kmeans'",
        ),
        (dict(discretizer="entropy"), ValueError, r"discretizer='entropy' needs `training_labels`"),
        (
            dict(discretizer="entropy", training_labels=np.zeros(7)),
            ValueError,
            r"`training_labels` must have one label per training row \(50\), got shape \(7,\)",
        ),
        (dict(discretize_continuous="yes"), TypeError, r"`discretize_continuous` must be True or False, got str"),
        (dict(sample_around_instance=1), TypeError, r"`sample_around_instance` must be True or False, got int"),
        (dict(kernel_width=1.0), TypeError, r"unexpected keyword argument 'kernel_width'"),  # kernel=ExponentialKernel
        (dict(feature_names=["a", "b"]), ValueError, r"`feature_names` must hold 4 names .*got 2"),
        (dict(feature_names="abcd"), TypeError, r"`feature_names` must be a sequence of 4 names, got str"),
        (dict(generator="seed"), TypeError, r"`generator` must be None, an int seed or a torch.Generator, got str"),
        (dict(baseline=0.0), TypeError, r"explain_tabular\(\) got an unexpected keyword argument 'baseline'"),
        (dict(perturbed=torch.ones(2, 5, 3)), ValueError, r"`perturbed` must have shape \(2, S, 4\) .*got shape"),
        (dict(perturbed=torch.full((2, 5, 4), float("inf"))), ValueError, r"`perturbed` must be finite"),
        (dict(preset="limey"), ValueError, r"`preset` must be None or one of \[.*\], got 'limey'"),
    ],
)
def test_bad_keywords(kw, error, match):
    with pytest.raises(error, match=match):
        run(**kw)


def test_stats_object_must_match_the_call():
    stats = fit_stats(TRAIN, discretizer="decile")
    with pytest.raises(ValueError, match=r"`training_data` is a TabularStats .*pass discretizer='decile'"):
        run(training_data=stats)
    with pytest.raises(ValueError, match=r"`training_data` is a TabularStats .*no categorical_features"):
        run(training_data=stats, discretizer="decile", categorical_features=[0])
    with pytest.raises(ValueError, match=r"`training_data` must describe 3 columns like `X`, got 4"):
        run(TRAIN[:2, :3], training_data=stats, discretizer="decile")
    assert run(training_data=stats, discretizer="decile").coef.shape == (2, 1, 4)


def test_conditions_errors():
    exp = run()
    with pytest.raises(ValueError, match=r"`feature_names` must hold 4 names \(one per column\), got 1"):
        conditions(exp, ["a"])
    with pytest.raises(ValueError, match=r"`target_index` must be an int in \[0, 1\), got int 3"):
        conditions(exp, target_index=3)
    with pytest.raises(ValueError, match=r"`k` must be >= 1, got 0"):
        conditions(exp, k=0)
    plain = explain(torch.nn.Linear(4, 2), TRAIN[:2].float(), torch.arange(4).view(1, 4), n_samples=20)
    with pytest.raises(ValueError, match=r"`explanation` must come from torchlime.tabular.explain_tabular"):
        conditions(plain)


@pytest.mark.parametrize("preset", ["kernel_shap", "captum", "slime", "veracity", "lime_text"])
def test_presets_other_than_lime_are_refused(preset):
    # only the surrogate of these would apply (the sampler, kernel and values stay lime's tabular ones),
    # so e.g. "kernel_shap" gave phi far from w * (x - mean) for a linear model: refused, not mislabelled
    with pytest.raises(ValueError, match=rf"`preset` must be None or 'lime' for tabular data .*got '{preset}'"):
        run(preset=preset)
