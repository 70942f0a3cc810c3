"""The report against LIME at a large N, the out-of-distribution flags and the engine fallback."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import torchlime
from torchlime.amortized import AmortizedExplainer, spearman

WEIGHTS = torch.tensor([3.0, -2.0, 1.0, 0.5, -0.25, 0.1])
FEATS = torch.arange(6).view(1, 6)


@pytest.fixture(scope="module")
def planted():
    """A linear model whose coefficients' order is known: every input's LIME ranks the columns alike."""
    lin = torch.nn.Linear(6, 3)
    with torch.no_grad():
        lin.weight.copy_(WEIGHTS * torch.tensor([[1.0], [0.5], [-1.0]]))
        lin.bias.zero_()
    x = torch.rand(128, 6, generator=torch.Generator().manual_seed(1))
    amort = AmortizedExplainer.fit(
        lin, x, modality=FEATS, n_samples=16, epochs=2, batch_size=8, lr=1e-2, holdout=0.2, report_samples=512
    )
    return lin, x, amort


def test_spearman_matches_scipy():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 9, generator=g), torch.randn(5, 9, generator=g)
    expected = [spearmanr(a[i].numpy(), b[i].numpy())[0] for i in range(5)]
    np.testing.assert_allclose(spearman(a, b).numpy(), expected, rtol=1e-12)


def test_the_report_measures_the_head_against_lime_at_a_large_n(planted):
    _, _, amort = planted
    report = amort.report
    assert report.inputs == 26 and report.reference_samples == 512 and report.label_samples == 16
    # the head averages the labels' noise away: it ranks the features as LIME at N=512 does, better than
    # the labels at N=16 it learnt from
    assert report.rank_correlation > 0.9 and report.rank_correlation >= report.rank_correlation_labels
    assert report.deletion_auc <= report.deletion_auc_reference * 0.9  # AUCs are negative here: within 10%
    assert "held-out inputs" in str(report) and report.as_plain()["inputs"] == 26


def test_the_planted_strongest_feature_comes_first(planted):
    """With the fill 0, hiding column f of a linear model moves its output by w_f x_f: the true ranking."""
    lin, x, amort = planted
    exp = amort.explain(x[:32])
    truth = (lin.weight.detach()[exp.target[:, 0]] * x[:32]).abs().argmax(-1)
    agree = (exp.top_features(1)[0].flatten() == truth).float().mean()
    assert agree >= 0.8


def test_far_inputs_are_flagged_and_fall_back_to_the_engine(planted):
    lin, x, amort = planted
    near = amort.explain(x[:8])
    assert len(near.meta["quality"]["out_of_distribution"]) <= 1
    far = torch.cat([x[:2], x[2:4] * 40 + 5])
    flagged = amort.explain(far)
    assert flagged.meta["quality"]["out_of_distribution"] == [[2], [3]]
    assert flagged.meta["unreliable"].startswith("out_of_distribution")
    fixed = amort.explain(far, fallback=True, fallback_samples=64)
    assert fixed.meta["amortized"]["fallback"] == [2, 3] and fixed.meta["samples_used"] == [0, 0, 64, 64]
    assert fixed.meta["unreliable"] is None
    engine = torchlime.Explainer().explain(lin, far[2:], FEATS, target=fixed.target[2:], n_samples=64, generator=0)
    assert torch.equal(fixed.coef[2:], engine.coef) and torch.equal(fixed.score[2:], engine.score)
    assert torch.equal(fixed.coef[:2], flagged.coef[:2]) and bool(fixed.score[:2].isnan().all())


def test_the_threshold_is_the_held_out_percentile_at_least_the_training_inputs():
    from torchlime.amortized._train import Distances

    g = torch.Generator().manual_seed(0)
    train = torch.randn(400, 3, generator=g) * torch.tensor([1.0, 2.0, 0.5])
    d = Distances.fit(train, train[:5] * 0.1)  # a light-tailed small split: the training percentile holds
    assert d.threshold == pytest.approx(float(torch.quantile(d(train), 0.99)))
    wide = Distances.fit(train, torch.randn(200, 3, generator=g) * 3)  # a wider split: its own percentile
    assert wide.threshold > d.threshold
    # the distance is Mahalanobis: a unit step along the narrow axis counts more than along the wide one
    assert float(d(torch.tensor([[0.0, 0.0, 1.0]]))) > float(d(torch.tensor([[0.0, 1.0, 0.0]])))


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")  # a random model's labels
def test_a_fallback_with_other_features_is_refused():
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(1024, 3))
    imgs = torch.rand(24, 1, 32, 32)
    auto = torchlime.Images(segments="grid")  # n_segments="auto": the grid follows N (8 cells here, 16 at 1000)
    amort = AmortizedExplainer.fit(cnn, imgs, modality=auto, n_samples=16, epochs=1, report_samples=None)
    with pytest.raises(ValueError, match="give the modality an explicit count"):
        amort.explain(imgs[:2] * 50 + 3, fallback=True, fallback_samples=1000)
