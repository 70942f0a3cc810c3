"""Stability (top-k Jaccard, Kendall's W), ground truth (gold recall, ROC-AUC, feature masks) and the curve
picture, against plain-loop references, with ties and inputs of different feature counts."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
import torch

from torchlime import explain
from torchlime.metrics import (
    deletion,
    feature_mask,
    gold_recall,
    jaccard_topk,
    kendall_w,
    plot_curves,
    token_roc_auc,
)
from torchlime.text import explain_tokens

from tests.helpers import grid_labels
from tests.helpers.text import CLS, MASK, SEP, PositionBag, batch_with_padding


def features() -> torch.Tensor:
    """(3, 1, 4, 4): 4, 3 and 8 features."""
    return torch.stack((grid_labels(4, 4, 2, 2), grid_labels(4, 4, 1, 3), grid_labels(4, 4, 2, 4))).view(3, 1, 4, 4)


@pytest.fixture(scope="module")
def base():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x = torch.rand(3, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    return explain(model, x, features(), target="top2", n_samples=32), model, x


def with_coef(exp, seed: int, levels: int = 3):
    """The explanation with integer coefficients (many ties) on its valid features, 0 on padded ones."""
    g = torch.Generator().manual_seed(seed)
    coef = torch.randint(-levels, levels + 1, exp.coef.shape, generator=g).float() * exp.valid.unsqueeze(1)
    return dataclasses.replace(exp, coef=coef)


def top_set(row: list[float], n: int, k: int, by: str = "value") -> set[int]:
    key = [abs(v) for v in row] if by == "abs" else row
    return set(sorted(range(n), key=lambda f: (-key[f], f))[:k])


def avg_ranks(values: list[float]) -> list[float]:
    return [sum(u < v for u in values) + (sum(u == v for u in values) + 1) / 2 for v in values]


@pytest.mark.parametrize("by", ["value", "abs"])
def test_jaccard_topk(base, by):
    exp = base[0]
    exps = [with_coef(exp, s) for s in range(4)]
    for k in (1, 3, 10):
        got = jaccard_topk(exps, k, by=by)
        for b in range(3):
            n = int(exp.n_features[b])
            for t in range(2):
                sets = [top_set(e.coef[b, t].tolist(), n, k, by) for e in exps]
                pairs = [len(a & c) / len(a | c) for i, a in enumerate(sets) for c in sets[i + 1 :]]
                assert float(got[b, t]) == pytest.approx(sum(pairs) / len(pairs))
    assert torch.all(jaccard_topk([exps[0], exps[0]], 2) == 1)


def test_kendall_w(base):
    exp = base[0]
    for levels in (2, 50):  # many ties, then few
        exps = [with_coef(exp, s, levels) for s in range(3)]
        got = kendall_w(exps)
        m = len(exps)
        for b in range(3):
            n = int(exp.n_features[b])
            for t in range(2):
                rows = [e.coef[b, t, :n].tolist() for e in exps]
                ranks = [avg_ranks(r) for r in rows]
                totals = [sum(r[f] for r in ranks) for f in range(n)]
                s = sum((tot - m * (n + 1) / 2) ** 2 for tot in totals)
                ties = sum(c**3 - c for r in rows for c in Counter(r).values())
                assert float(got[b, t]) == pytest.approx(12 * s / (m * m * (n**3 - n) - m * ties), abs=1e-6)
    same = with_coef(exp, 7, 50)
    assert torch.allclose(kendall_w([same, same, same]), torch.ones(3, 2))


def test_gold_recall(base):
    exp = with_coef(base[0], 3)
    gold = [[0, 2], [1], [0, 1, 5, 7]]
    mask = torch.zeros(3, 8, dtype=torch.bool)
    for b, ids in enumerate(gold):
        mask[b, ids] = True
    for k in (1, 2, 4):
        got = gold_recall(exp, gold, k)
        assert torch.equal(gold_recall(exp, mask, k), got)
        for b in range(3):
            for t in range(2):
                top = top_set(exp.coef[b, t].tolist(), int(exp.n_features[b]), k)
                assert float(got[b, t]) == pytest.approx(len(top & set(gold[b])) / len(gold[b]))
    padded = mask.clone()
    padded[1, 6] = True  # input 1 has 3 features: a padded one is never counted
    assert torch.equal(gold_recall(exp, padded, 2), gold_recall(exp, mask, 2))
    assert torch.isnan(gold_recall(exp, [[], [0], [1]], 2)[0]).all()


@pytest.mark.parametrize("by", ["value", "abs"])
def test_token_roc_auc(base, by):
    exp = with_coef(base[0], 5)
    rationale = [[0, 3], [2], [1, 4, 6]]
    got = token_roc_auc(exp, rationale, by=by)
    for b in range(3):
        n = int(exp.n_features[b])
        for t in range(2):
            s = [abs(v) if by == "abs" else v for v in exp.coef[b, t, :n].tolist()]
            pos = [s[f] for f in rationale[b]]
            neg = [s[f] for f in range(n) if f not in rationale[b]]
            wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
            assert float(got[b, t]) == pytest.approx(wins / (len(pos) * len(neg)))
    nan = token_roc_auc(exp, [[0, 1, 2, 3], [], [0]])
    assert nan[:2].isnan().all() and not nan[2].isnan().any()


def test_token_rationale_through_feature_mask():
    ids, attn = batch_with_padding()
    model = PositionBag()
    exp = explain_tokens(
        model, ids, attention_mask=attn, special_ids=[CLS, SEP], mode="replace", mask_id=MASK, n_samples=64
    )
    tokens = torch.zeros_like(ids, dtype=torch.bool)
    tokens[:, 2:4] = True
    tokens[:, 0] = True  # CLS: no feature
    feats = feature_mask(exp, tokens)
    for b in range(3):
        expected = {
            int(exp.features[b, pos])
            for pos in range(ids.shape[1])
            if tokens[b, pos] and int(exp.features[b, pos]) >= 0
        }
        assert set(feats[b].nonzero().flatten().tolist()) == expected
    auc = token_roc_auc(exp, feats)
    assert auc.shape == (3, 1) and not auc.isnan().any()


def test_plot_curves(base):
    plt = pytest.importorskip("matplotlib.pyplot")
    exp, model, x = base
    res = deletion(model, x, exp, return_curves=True)
    fig = plot_curves(res.curves, res.x)
    assert isinstance(fig, plt.Figure) and len(fig.axes) == 1
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(texts) == 6 and texts[0] == f"input 0, target 0 (AUC {float(res.score[0, 0]):.3f})"
    plt.close(fig)
    fig = plot_curves(res.curves[0, 0], res.x[0], ["first"], title="deletion")
    assert fig.axes[0].get_title() == "deletion"
    plt.close(fig)
    fig, ax = plt.subplots(1, 2)
    assert plot_curves(res.curves[0, 0], res.x[0], ax=ax[1]) is fig and ax[1].get_legend() is not None
    plt.close(fig)
