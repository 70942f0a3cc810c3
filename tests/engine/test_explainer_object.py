"""``torchlime.Explainer``: the "how" made once and checked early, the "what" per call; ``explain`` is the same."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import torchlime
from torchlime import Explainer, explain
from torchlime.image import explain_image

from tests.helpers import SegmentLinear, grid_labels


@pytest.fixture
def problem():
    labels = grid_labels(8, 8, 2, 4)
    model = SegmentLinear(labels, 8)
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return model, x, labels.view(1, 1, 8, 8)


def same(a, b):
    return all(torch.equal(getattr(a, n), getattr(b, n)) for n in ("coef", "intercept", "score", "local_pred"))


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")
@pytest.mark.parametrize(
    "how",
    [
        dict(),
        dict(preset="lime"),
        dict(sampler="sobol", kernel=0.5, surrogate="lasso"),
        dict(baseline="mean", batch_size=7),
        dict(preset="kernel_shap"),
    ],
)
def test_explainer_equals_explain(problem, how):
    model, x, feats = problem
    what = dict(target="top2", n_samples=128, generator=3)
    assert same(Explainer(**how).explain(model, x, feats, **what), explain(model, x, feats, **how, **what))


def test_one_explainer_serves_many_calls(problem):
    model, x, feats = problem
    lime = Explainer(preset="lime", surrogate="lasso", baseline=0.0)  # lime's mean fill would not change it
    first = lime.explain(model, x, feats, n_samples=64, generator=1)
    again = lime.explain(model, x, feats, n_samples=64, generator=1)
    other = lime.explain(model, x[:1], feats, n_samples=32, generator=2)
    assert same(first, again) and other.coef.shape == (1, 3, 8)  # lime's preset: the top 5 of 3 targets
    assert first.run.surrogate.startswith("Lasso") and first.run.preset == "lime"
    with pytest.raises(dataclasses.FrozenInstanceError):
        lime.kernel = "uniform"


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(sampler="gibbs"), ValueError, r"`sampler` must be a Sampler or one of \['bernoulli'"),
        (dict(kernel="gauss"), ValueError, r"`kernel` must be a Kernel, a float width, or one of"),
        (dict(surrogate="svm"), ValueError, r"`surrogate` must be a Surrogate or one of"),
        (dict(preset="shap"), ValueError, r"`preset` must be None or one of"),
        (dict(baseline="grey"), ValueError, r"`baseline` string must be one of \['zero'"),
        (dict(accelerate="turbo"), ValueError, r"`accelerate` must be None, 'fast' or 'cuda_graphs', got str 'turbo'"),
        (dict(max_memory=-1), ValueError, r"`max_memory` in bytes must be >= 1, got -1"),
        (dict(batch_size=0), ValueError, r"`batch_size` must be >= 1, got 0"),
        (dict(progress="yes"), TypeError, r"`progress` must be True or False, got str 'yes'"),
    ],
)
def test_bad_configuration_is_refused_when_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        Explainer(**kwargs)


def test_unknown_keywords_are_pythons_own_type_error(problem):
    model, x, feats = problem
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_sample'"):
        explain(model, x, feats, n_sample=10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_segment'"):
        explain_image(model, x, n_segment=4)


def test_unreliable_warning_points_at_the_callers_line(problem):
    model, x, feats = problem
    flat = lambda v: v.sum((1, 2, 3)) * 0.0  # noqa: E731 - outputs that never vary: a saturated surrogate
    for call in (
        lambda: explain(flat, x, feats, n_samples=16),
        lambda: Explainer().explain(flat, x, feats, n_samples=16),
        lambda: explain_image(flat, x, segments=feats[0, 0], n_samples=16),
    ):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            call()
        hits = [w for w in seen if issubclass(w.category, torchlime.UnreliableExplanationWarning)]
        assert len(hits) == 1 and hits[0].filename == __file__
