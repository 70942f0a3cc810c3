"""shap's KernelSHAP solve: the ``l1_reg`` feature selection, then the constrained weighted least squares.

shap selects features on an augmented regression (each coalition z twice: z with weight w (M - |z|)
and z - 1 with weight w |z|, targets link(E[f]) - link(f_null) and that minus the gap
link(f(x)) - link(f_null)): ``"num_features(k)"`` keeps the first k features scikit-learn's
``lars_path(method="lar", max_iter=k)`` makes active, which ``stages.lars.lars_path(method="lar")`` finds
for every (input, output) from the augmented Gram matrix; ``"aic"`` / ``"bic"`` (scikit-learn's
``LassoLarsIC`` after a ``StandardScaler(with_mean=False)``) and a float (``Lasso(alpha)``) run
scikit-learn on the host, per (input, output), as shap does. The values are then the weighted least
squares fit over the chosen features with their sum pinned to the gap:
``methods.kernel_shap.KernelShapRegression``.
"""

from __future__ import annotations

from typing import Union

import numpy as np
import torch

from torchlime.methods.kernel_shap import KernelShapRegression
from torchlime.stages.normal import normal_equations

#: an ``l1_reg`` once checked: False (no selection), ("num_features", k), "aic", "bic" or a Lasso alpha
Rule = Union[bool, tuple[str, int], str, float]


def augmented(
    z: torch.Tensor, w: torch.Tensor, target: torch.Tensor, gap: torch.Tensor, valid: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The augmented selection problem (shap's) as normal equations: Gram (B, F, F) and correlations (B, T, F).

    Args:
        z: bool (B, S, F) the coalitions (only the ``valid`` columns count).
        w: float64 (B, S) their weights.
        target: float64 (B, S, T) link(E[f]) - link(f_null) of every coalition.
        gap: float64 (B, T) link(f(x)) - link(f_null).
        valid: bool (B, F) the varying features.

    Returns:
        ``(gram, cov)`` of X_aug = sqrt(w_aug) [z; z - 1] and y_aug = sqrt(w_aug) [target; target - gap].
    """
    on = (z & valid.unsqueeze(1)).double()
    size = on.sum(-1)
    a = w * (valid.sum(-1, keepdim=True) - size)  # weight of z
    b = w * size  # weight of z - 1
    u = on - valid.double().unsqueeze(1)
    gram = (on * a.unsqueeze(-1)).transpose(1, 2) @ on + (u * b.unsqueeze(-1)).transpose(1, 2) @ u
    cov = (on * a.unsqueeze(-1)).transpose(1, 2) @ target
    cov = cov + (u * b.unsqueeze(-1)).transpose(1, 2) @ (target - gap.unsqueeze(1))
    return gram, cov.transpose(1, 2)


def sklearn_select(
    rule: Union[str, float],
    z: torch.Tensor,
    w: torch.Tensor,
    target: torch.Tensor,
    gap: torch.Tensor,
    valid: torch.Tensor,
    rows: torch.Tensor,
) -> torch.Tensor:
    """The ``"aic"`` / ``"bic"`` / float ``l1_reg`` selections (shap's): scikit-learn on the host, per (input, output).

    Args:
        rule: "aic", "bic" or a Lasso alpha.
        z: bool (B, S, F) the coalitions.
        w: float64 (B, S) their weights.
        target: float64 (B, S, T) link(E[f]) - link(f_null).
        gap: float64 (B, T) link(f(x)) - link(f_null).
        valid: bool (B, F) the varying features.
        rows: long (B,) shap's sample count of every input (the rows of its mask matrix).

    Returns:
        Bool (B, T, F) the features kept, on ``z``'s device.

    Raises:
        ImportError: without scikit-learn.
    """
    try:
        from sklearn.linear_model import Lasso, LassoLarsIC
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
    except ImportError as err:
        raise ImportError(
            f"`l1_reg`={rule!r} runs scikit-learn's LassoLarsIC / Lasso, as shap does: pip install scikit-learn "
            f"(or use l1_reg='num_features(k)' or False, which run on the device)"
        ) from err
    zs, ws, ts, gs, vs = (v.cpu().numpy() for v in (z, w, target, gap, valid))
    out = np.zeros((z.shape[0], target.shape[2], z.shape[2]), dtype=bool)
    for i in range(z.shape[0]):  # one small regression per input and output, as shap runs them
        cols = np.flatnonzero(vs[i])
        if cols.size < 2:
            out[i, :, cols] = True
            continue
        n = int(rows[i])
        mask = zs[i, 2 : 2 + n][:, cols].astype(np.float64)
        size = mask.sum(1)
        root = np.sqrt(np.hstack((ws[i, 2 : 2 + n] * (cols.size - size), ws[i, 2 : 2 + n] * size)))
        x_aug = root[:, None] * np.vstack((mask, mask - 1))
        for j in range(target.shape[2]):
            y = ts[i, 2 : 2 + n, j]
            y_aug = root * np.hstack((y, y - gs[i, j]))
            if isinstance(rule, str):
                model = make_pipeline(StandardScaler(with_mean=False), LassoLarsIC(criterion=rule))
                coef = model.fit(x_aug, y_aug)[1].coef_
            else:
                coef = Lasso(alpha=rule).fit(x_aug, y_aug).coef_
            out[i, j, cols[np.flatnonzero(coef)]] = True
    return torch.from_numpy(out).to(z.device)


def solve(
    z: torch.Tensor, w: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, chosen: Union[torch.Tensor, None]
) -> torch.Tensor:
    """The Shapley values: weighted least squares over the chosen features, their sum pinned to the gap.

    Args:
        z: bool (B, S, F) coalitions; rows 0 and 1 are the input itself and the empty coalition.
        w: float64 (B, S) weights (0 for rows 0 and 1).
        y: float64 (B, S, T) link outputs; ``y[:, 0]`` = link(f(x)), ``y[:, 1]`` = link(f_null).
        valid: bool (B, F) the varying features.
        chosen: bool (B, T, F) the features each output keeps, or None (all of ``valid``).

    Returns:
        Float64 (B, T, F) the values (0 off the chosen features; |phi| < 1e-10 set to 0, as shap does).
    """
    regression = KernelShapRegression(dtype=torch.float64)
    ne = normal_equations(z, y, w, torch.float64)
    anchors = y[:, :2]
    if chosen is None:
        phi = regression.fit_normal(ne, valid, anchors=anchors).coef
    else:
        outputs = [regression.fit_normal(ne, chosen[:, j], anchors=anchors).coef[:, j] for j in range(y.shape[2])]
        phi = torch.stack(outputs, 1)  # one solve per output: each keeps its own features
    return torch.where(phi.abs() < 1e-10, 0.0, phi)
