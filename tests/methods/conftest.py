"""Shared by the tests of lime's feature selection: the two ways of the LARS path, lime's own selection."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from torchlime.methods.feature_selection import select_features
from torchlime.stages import lars
from torchlime.stages.surrogate import normal_equations


@pytest.fixture(params=["sklearn", "torch"])
def lars_kind(request, monkeypatch):
    """lime's LARS path through scikit-learn's ``lars_path_gram`` (a few fits on the CPU) or batched torch."""
    if request.param == "sklearn":
        pytest.importorskip("sklearn.linear_model")
    monkeypatch.setattr(lars, "SKLEARN_FITS", 0 if request.param == "torch" else 10**6)
    return request.param


def lime_select(data, labels, weights, k, method):
    """The features ``lime_base.LimeBase.feature_selection`` chooses, sorted (lime must be installed)."""
    from lime.lime_base import LimeBase

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn's LARS convergence warnings
        return sorted(np.asarray(LimeBase(kernel_fn=None).feature_selection(data, labels, weights, k, method)).tolist())


def compare_lasso_path(x, y, w, ks):
    """Assert torchlime's lasso-path selection equals lime's for every k; returns how many were compared."""
    s, f = x.shape
    ne = normal_equations(torch.tensor(x)[None], torch.tensor(y)[None, :, None], torch.tensor(w)[None], torch.float64)
    valid = torch.ones(1, f, dtype=torch.bool)
    for k in ks:
        got = select_features(ne, valid, k, "lasso_path", count=s)[0, 0].nonzero().flatten().tolist()
        assert got == lime_select(x, y, w, k, "lasso_path"), (k, got)
    return len(ks)
