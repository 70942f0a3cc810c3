"""Inputs the tabular front door must take as a user writes them: float32 rows against float64
training data, numpy / tensor indices, string class labels; and a warning for unseen categories."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchlime.tabular import explain_tabular, fit_stats

# column 0 categorical with values not exact in float32 (0.1, 0.2, 0.3), columns 1-3 continuous
_G = torch.Generator().manual_seed(0)
TRAIN = torch.cat(
    (
        torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64).repeat(20).view(60, 1),
        torch.randn(60, 3, generator=_G, dtype=torch.float64),
    ),
    1,
)


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
        explain_tabular(
            model, x, training_data=train, categorical_features=[0, 4], n_samples=40, feature_names=list("abcde")
        )
    found = unseen_warnings(record)
    assert len(found) == 1, found
    assert "categorical column(s) [0, 4] (['a', 'e'])" in found[0] and "rows [0, 1, 2]" in found[0]


@pytest.mark.parametrize(
    "cats", [np.array([0]), [np.int64(0)], (np.int32(0),), torch.tensor([0]), [torch.tensor(0)], range(1)]
)
def test_categorical_features_take_integer_likes(cats):
    stats = fit_stats(TRAIN, categorical_features=cats)
    assert stats.categorical.tolist() == [True, False, False, False]
    exp = explain_tabular(model, TRAIN[:2], training_data=TRAIN, categorical_features=cats, n_samples=40)
    assert exp.meta["tabular"]["categorical"] == [0]


@pytest.mark.parametrize(
    "cats,error,match",
    [
        ([1.0], TypeError, r"`categorical_features` must hold int column indices, got float 1.0"),
        ([True], TypeError, r"`categorical_features` must hold int column indices, got bool"),
        (np.array([True]), TypeError, r"`categorical_features` must hold int column indices, got .*bool"),
        (torch.tensor([0.0]), TypeError, r"`categorical_features` must hold int column indices, got .*float32"),
        (
            torch.zeros(1, 1, dtype=torch.long),
            ValueError,
            r"`categorical_features` must be a 1-D sequence of column indices, got .*shape \(1, 1\)",
        ),
        (0, TypeError, r"`categorical_features` must be a sequence of int column indices \(e.g. \[0\]\), got int 0"),
        ("0", TypeError, r"`categorical_features` must be a sequence of int column indices .*got str"),
        (np.array([4]), ValueError, r"`categorical_features` must hold column indices in \[0, 4\) .*got \[4\]"),
    ],
)
def test_categorical_features_errors(cats, error, match):
    with pytest.raises(error, match=match):
        fit_stats(TRAIN, categorical_features=cats)


@pytest.mark.parametrize(
    "labels", [np.array(["no", "yes"] * 30), ["no", "yes"] * 30, np.array(["no", "yes"] * 30, dtype=object)]
)
def test_entropy_discretizer_takes_string_labels(labels):
    codes = torch.tensor([0, 1] * 30)
    ref = fit_stats(TRAIN, discretizer="entropy", training_labels=codes)
    stats = fit_stats(TRAIN, discretizer="entropy", training_labels=labels)
    torch.testing.assert_close(stats.boundaries, ref.boundaries)
    exp = explain_tabular(
        model, TRAIN[:2], training_data=TRAIN, discretizer="entropy", training_labels=labels, n_samples=40
    )
    assert exp.coef.shape == (2, 1, 4)


def test_training_labels_errors():
    with pytest.raises(
        TypeError,
        match=r"`training_labels` must hold class labels \(numbers or strings\), "
        r"got .*complex",
    ):
        fit_stats(TRAIN, discretizer="entropy", training_labels=torch.zeros(60, dtype=torch.complex64))
    with pytest.raises(
        ValueError,
        match=r"`training_labels` must have one label per training row \(60\), "
        r"got shape \(7,\)",
    ):
        fit_stats(TRAIN, discretizer="entropy", training_labels=["a"] * 7)


def test_an_indexed_explanation_keeps_its_own_conditions():
    from torchlime.tabular import conditions

    exp = explain_tabular(model, TRAIN[:3], training_data=TRAIN, categorical_features=[0], n_samples=40)
    whole = conditions(exp, k=4)
    for j in (1, -1):
        assert conditions(exp[j], k=4)[0] == whole[j]
    assert conditions(exp[1:], k=4) == whole[1:]
