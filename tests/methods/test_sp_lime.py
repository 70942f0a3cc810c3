"""SP-LIME: the greedy pick equals lime's SubmodularPick on the same weight matrix, covers at least
(1 - 1/e) of the brute-force optimum, and works on explanations of every modality."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import torchlime
from torchlime.methods.feature_selection import Select
from torchlime.methods.sp_lime import coverage, explanation_matrix, feature_values, submodular_pick

from tests.helpers import grid_labels

SubmodularPick = pytest.importorskip("lime.submodular_pick").SubmodularPick  # optional: skip, not a collection error


class _FakeExplanation:
    """What SubmodularPick reads of a lime explanation: labels and (feature, weight) lists."""

    def __init__(self, rows: np.ndarray) -> None:  # rows: (T, F)
        self.rows, self.mode = rows, "classification"

    def available_labels(self):
        return list(range(len(self.rows)))

    def as_list(self, label):
        return [(f"f{j}", float(v)) for j, v in enumerate(self.rows[label]) if v != 0]


class _FakeExplainer:
    def __init__(self, coef: np.ndarray) -> None:  # (B, T, F)
        self.coef = coef

    def explain_instance(self, row, predict_fn, num_features, top_labels, **kwargs):
        return _FakeExplanation(self.coef[int(row)])


def lime_pick(coef: np.ndarray, budget: int) -> list[int]:
    sp = SubmodularPick(
        _FakeExplainer(coef),
        np.arange(coef.shape[0]),
        None,
        method="full",
        num_exps_desired=budget,
        num_features=coef.shape[2],
    )
    return list(sp.V)


def random_matrix(rng, b, t, f, density=0.4, levels=None):
    w = rng.normal(size=(b, t, f)) if levels is None else rng.integers(1, levels + 1, (b, t, f)).astype(float)
    return w * (rng.random((b, t, f)) < density)


def test_equals_lime_submodular_pick():
    """Real-valued weights; duplicated and empty rows make exact ties, which go to the last input as in
    lime (coverages equal in exact arithmetic but summed from different features are decided by
    rounding in lime's column order, so integer-valued weights are not compared)."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        b, t, f = int(rng.integers(1, 12)), int(rng.integers(1, 3)), int(rng.integers(1, 15))
        coef = random_matrix(rng, b, t, f, density=rng.uniform(0.1, 0.9))
        if b > 2 and trial % 3 == 0:
            coef[rng.integers(0, b)] = coef[rng.integers(0, b)]  # a duplicated explanation
            coef[rng.integers(0, b)] = 0.0  # an empty one
        budget = int(rng.integers(1, b + 1))
        ours = submodular_pick(torch.tensor(coef), budget).tolist()
        assert ours == lime_pick(coef, budget), trial
    assert submodular_pick(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]), 3).tolist() == [1, 2, 0]


def test_greedy_is_within_1_minus_1_over_e_of_the_optimum():
    rng = np.random.default_rng(1)
    worst = 1.0
    for _ in range(300):
        b, f = int(rng.integers(2, 9)), int(rng.integers(1, 9))
        w = torch.tensor(random_matrix(rng, b, 1, f, density=rng.uniform(0.1, 0.7))[:, 0])
        budget = int(rng.integers(1, min(b, 4) + 1))
        greedy = float(coverage(w, submodular_pick(w, budget)))
        best = max(float(coverage(w, torch.tensor(c))) for c in itertools.combinations(range(b), budget))
        assert greedy >= (1 - 1 / math.e) * best - 1e-12
        if best > 0:
            worst = min(worst, greedy / best)
    assert worst < 1.0  # the greedy pick is not always optimal: the bound is what is tested


def test_feature_ids_and_the_explanation_matrix():
    coef = torch.tensor([[[1.0, 2.0, 0.0]], [[0.0, 0.0, 3.0]]])  # (B=2, T=1, F=3)
    ids = torch.tensor([[5, 5, -1], [0, 1, 5]])
    w = explanation_matrix(coef, ids)
    assert w.tolist() == [[0, 0, 0, 0, 0, 3.0], [0, 0, 0, 0, 0, 3.0]]
    assert explanation_matrix(torch.ones(2, 2, 3)).tolist() == [[2.0] * 3] * 2  # summed over targets
    assert feature_values(
        torch.tensor([[0, 1, -1, 1], [2, 0, 1, -1]]), torch.tensor([[7, 8, 9, 8], [4, 5, 6, 7]]), n_features=3
    ).tolist() == [[7, 8, -1], [5, 6, 4]]


def test_image_grid_and_text_explanations(device):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 4)).to(device)
    feats = grid_labels(4, 4, 2, 2).to(device)  # the same 4 grid cells in every image: shared as they are
    x = torch.rand(6, 3, 4, 4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.engine.quality.UnreliableExplanationWarning)
        exp = torchlime.explain(
            model,
            x,
            feats.view(1, 1, 4, 4),
            n_samples=64,
            target="top2",
            surrogate=Select(k=1, method="highest_weights"),
        )
    picks = submodular_pick(exp, 3)
    assert picks.device == exp.coef.device and picks.dtype == torch.long and len(set(picks.tolist())) == 3
    assert picks.tolist() == lime_pick(exp.coef.cpu().double().numpy(), 3)


def test_tokens_share_features_by_vocabulary_id():
    from torchlime.demo.text_data import CLS, MASK, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model
    from torchlime.text import explain_tokens

    model, _ = load_text_model()
    data = make_text_dataset(5, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.engine.quality.UnreliableExplanationWarning)
        exp = explain_tokens(
            model,
            data.input_ids,
            attention_mask=data.attention_mask,
            special_ids=[CLS, SEP],
            mask_id=MASK,
            n_samples=200,
        )
    ids = feature_values(exp.features, data.input_ids.to(exp.features.device), exp.coef.shape[-1])
    picks = submodular_pick(exp, 2, feature_ids=ids)
    w = explanation_matrix(exp, ids)
    best = max(float(coverage(w, torch.tensor(c))) for c in itertools.combinations(range(5), 2))
    assert float(coverage(w, picks)) >= (1 - 1 / math.e) * best


def test_errors():
    w = torch.rand(3, 4)
    with pytest.raises(ValueError, match=r"`budget` must be at most the number of inputs \(3\), got 4"):
        submodular_pick(w, 4)
    with pytest.raises(ValueError, match="`budget` must be >= 1, got 0"):
        submodular_pick(w, 0)
    with pytest.raises(TypeError, match=r"`budget` must be an int in \[1, 3\], got float 2.0"):
        submodular_pick(w, 2.0)
    with pytest.raises(TypeError, match="`explanation` must be an Explanation or a float tensor"):
        submodular_pick([[1.0]], 1)
    with pytest.raises(TypeError, match="`feature_ids` must have an integer dtype"):
        submodular_pick(w, 1, feature_ids=torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"`feature_ids` must be a \(B, F\) = \(3, 4\) tensor"):
        submodular_pick(w, 1, feature_ids=torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="`features` and `values` must have the same shape"):
        feature_values(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))
