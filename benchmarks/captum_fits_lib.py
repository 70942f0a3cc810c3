"""captum's scikit-learn fits, recorded as they are made and solved again exactly (``bench_captum_switch.py``).

captum fits its interpretable model with scikit-learn on float32 arrays (``SkLearnLasso``: coordinate descent
to scikit-learn's default tolerance; ``SkLearnLinearRegression``: ``lstsq`` with a relative cutoff of 1e-6 on
the singular values). ``captured_fits`` records each fit's samples, outputs and weights; ``exact_fits``
solves the same fits in float64 (the Lasso to a 1e-12 tolerance), the reference both captum's and the compat
layer's attributions are compared with; ``lasso_objectives`` evaluates captum's Lasso objective, which
tells two optima of a Lasso that is not unique from a worse fit.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as np
import torch

#: one recorded fit: (estimator name, X (S, F), y (S,), sample_weight (S,))
Recorded = tuple[str, np.ndarray, np.ndarray, np.ndarray]


@contextlib.contextmanager
def captured_fits() -> Iterator[list[Recorded]]:
    """captum's scikit-learn fits as they are made: (estimator, X, y, sample_weight), in call order."""
    import sklearn.linear_model as lm

    seen: list[Recorded] = []
    owned = {cls: cls.__dict__.get("fit") for cls in (lm.Lasso, lm.LinearRegression)}
    for cls in owned:
        fit = cls.fit

        def capture(self, X, y, sample_weight=None, _fit=fit, **kwargs):  # noqa: N803 - scikit-learn's names
            seen.append((type(self).__name__, X.copy(), y.copy(), sample_weight.copy()))
            return _fit(self, X, y, sample_weight=sample_weight, **kwargs)

        cls.fit = capture
    try:
        yield seen
    finally:
        for cls, fit in owned.items():
            if fit is None:
                del cls.fit
            else:
                cls.fit = fit


def exact_fits(seen: list[Recorded]) -> torch.Tensor:
    """(E, F) the recorded fits solved again in float64 (captum's objective, to a tight tolerance)."""
    import sklearn.linear_model as lm

    rows = []
    for name, x, y, w in seen:
        model = (
            lm.LinearRegression() if name == "LinearRegression" else lm.Lasso(alpha=0.01, tol=1e-12, max_iter=100_000)
        )
        model.fit(x.astype(np.float64), y.astype(np.float64).ravel(), sample_weight=w.astype(np.float64))
        rows.append(torch.from_numpy(np.ravel(model.coef_)))
    return torch.stack(rows)


def lasso_objectives(seen: list[Recorded], coef: torch.Tensor) -> list[float]:
    """captum's Lasso objective (1 / 2Σw) Σ w (y - b - Xβ)² + 0.01 ||β||₁ of (E, F) coefficients, best b."""
    out = []
    for (_, x, y, w), beta in zip(seen, coef.double()):
        x64, y64, w64 = (torch.from_numpy(a.astype(np.float64)) for a in (x, y.ravel(), w))
        share = w64 / w64.sum()
        r = (y64 - share @ y64) - (x64 - share @ x64) @ beta
        out.append(float(0.5 * (share * r * r).sum() + 0.01 * beta.abs().sum()))
    return out
