"""Inputs the tabular front door must take as a user writes them: float32 rows against float64
training data, numpy / tensor indices, string class labels; and a warning for unseen categories."""
from __future__ import annotations

import warnings

import torch

from torchlime.tabular import explain_tabular, fit_stats

# column 0 categorical with values not exact in float32 (0.1, 0.2, 0.3), columns 1-3 continuous
_G = torch.Generator().manual_seed(0)
TRAIN = torch.cat((torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64).repeat(20).view(60, 1),
                   torch.randn(60, 3, generator=_G, dtype=torch.float64)), 1)


def model(x: torch.Tensor) -> torch.Tensor:
    return torch.stack((x[:, 1], -x[:, 1]), 1).softmax(1)


def unseen_warnings(record) -> list[str]:
    return [str(w.message) for w in record if "never seen" in str(w.message)]


def test_float32_rows_find_the_categories_of_float64_training_data():
    stats = fit_stats(TRAIN, categorical_features=[0])
    x32 = TRAIN[:3].float()
    assert stats.levels(x32)[:, 0].tolist() == [0, 1, 2]  # was [-1, -1, -1]: 0.1f != 0.1
    assert stats.levels(TRAIN[:3])[:, 0].tolist() == [0, 1, 2]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        exp = explain_tabular(model, x32, training_data=TRAIN, categorical_features=[0], n_samples=40)
    assert [row[0] for row in exp.meta["tabular"]["levels"]] == [0, 1, 2]
    assert not unseen_warnings(record)


def test_unseen_category_warns_once_naming_the_columns():
    train = torch.cat((TRAIN, TRAIN[:, :1] * 10), 1)  # column 4: categories 1, 2, 3
    x = train[:3].clone()
    x[0, 0], x[1, 0], x[2, 4] = 0.7, 0.9, 5.0
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        explain_tabular(model, x, training_data=train, categorical_features=[0, 4], n_samples=40,
                        feature_names=list("abcde"))
    found = unseen_warnings(record)
    assert len(found) == 1, found
    assert "categorical column(s) [0, 4] (['a', 'e'])" in found[0] and "rows [0, 1, 2]" in found[0]
