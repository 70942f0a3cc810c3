"""A slow, obviously-correct LIME written from the paper, in NumPy.

Every sample is built, scored and weighted one at a time; the surrogate is the
closed-form weighted ridge with an unpenalised intercept, solved with
``numpy.linalg.solve`` on the augmented normal equations. The fast engine is
compared with this.
"""

from __future__ import annotations

from typing import Callable

import numpy as np


def perturb_one(x: np.ndarray, baseline: np.ndarray, labels: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One perturbed input: features with mask 0 take the baseline. labels broadcast to x."""
    out = x.copy()
    lab = np.broadcast_to(labels, x.shape)
    for f, keep in enumerate(mask):
        if not keep:
            hide = lab == f
            out[hide] = baseline[hide]
    return out


def cosine_distance_to_ones(mask: np.ndarray) -> float:
    """1 - cos(mask, ones); an empty mask is at distance 1 (sklearn's convention)."""
    ones = np.ones_like(mask, dtype=float)
    norm = np.linalg.norm(mask) * np.linalg.norm(ones)
    return 1.0 if norm == 0 else 1.0 - float(mask @ ones) / norm


def weighted_ridge(X: np.ndarray, y: np.ndarray, w: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    """argmin Σ w (y - b - Xβ)² + α ||β||², intercept b unpenalised."""
    A = np.hstack([X, np.ones((X.shape[0], 1))])
    P = np.eye(A.shape[1]) * alpha
    P[-1, -1] = 0.0
    lhs = A.T @ (w[:, None] * A) + P
    rhs = A.T @ (w * y)
    sol = np.linalg.solve(lhs, rhs)
    return sol[:-1], float(sol[-1])


def weighted_r2(y: np.ndarray, pred: np.ndarray, w: np.ndarray) -> float:
    mean = np.average(y, weights=w)
    return 1.0 - float(np.sum(w * (y - pred) ** 2)) / float(np.sum(w * (y - mean) ** 2))


def reference_lime(
    score_fn: Callable[[np.ndarray], float],
    x: np.ndarray,
    baseline: np.ndarray,
    labels: np.ndarray,
    masks: np.ndarray,
    kernel_width: float = 0.25,
    alpha: float = 1.0,
) -> dict:
    """LIME for one input and one target.

    Args:
        score_fn: maps one input (same shape as x) to a float score.
        x, baseline: one input and its baseline. labels: ids 0..F-1 broadcastable to x.
        masks: (S, F) 0/1 samples.

    Returns:
        dict with coef (F,), intercept, score (weighted R²), local_pred, outputs (S,), weights (S,).
    """
    outputs = np.array([score_fn(perturb_one(x, baseline, labels, m)) for m in masks])
    d = np.array([cosine_distance_to_ones(m.astype(float)) for m in masks])
    weights = np.sqrt(np.exp(-(d**2) / kernel_width**2))
    X = masks.astype(float)
    coef, intercept = weighted_ridge(X, outputs, weights, alpha)
    pred = X @ coef + intercept
    return dict(
        coef=coef,
        intercept=intercept,
        score=weighted_r2(outputs, pred, weights),
        local_pred=float(coef.sum() + intercept),
        outputs=outputs,
        weights=weights,
    )
