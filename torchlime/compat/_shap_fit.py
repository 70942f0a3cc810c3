"""shap's KernelSHAP solve: the ``l1_reg`` feature selection, then the constrained weighted least squares.

shap selects features on an augmented regression (each coalition z twice: z with weight w (M - |z|)
and z - 1 with weight w |z|, targets link(E[f]) - link(f_null) and that minus the gap
link(f(x)) - link(f_null)): ``"num_features(k)"`` keeps the first k features scikit-learn's
``lars_path(method="lar", max_iter=k)`` makes active, which ``lar_select`` reproduces batched over
every (input, output) on the device from the augmented Gram matrix; ``"aic"`` / ``"bic"`` (scikit-learn's
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

_EPS32 = float(torch.finfo(torch.float32).eps)  # lars_path's equality tolerance
_TINY32 = float(torch.finfo(torch.float32).tiny)
_EPS64 = float(torch.finfo(torch.float64).eps)
_BIG = float(torch.finfo(torch.float64).max)
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


def _min_pos(v: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """The smallest strictly positive entry over ``where`` (the largest float if none)."""
    return torch.where(where & (v > 0), v, _BIG).amin(-1)


def lar_select(gram: torch.Tensor, cov: torch.Tensor, valid: torch.Tensor, k: int, rows: torch.Tensor) -> torch.Tensor:
    """The features scikit-learn's ``lars_path(X, y, max_iter=k)`` (least angle regression) makes active.

    Every (input, output) at once, from X'X and X'y: the feature of largest |correlation| enters (ties to
    the first in scikit-learn's column order, whose swaps are followed), the step goes along the
    equiangular direction to the next entry; a coefficient crossing zero flips its sign and the next
    step adds no feature; a degenerate entry is skipped as scikit-learn skips it; the path stops after
    k steps, when every feature is in, or when max |correlation| / rows <= float32 eps. The inverse of
    the active Gram block is grown by one border per entry (matrix products only, no factorisation in
    the loop).

    Args:
        gram: float64 (B, F, F) X'X.
        cov: float64 (B, T, F) X'y per output.
        valid: bool (B, F) the columns of X (the others never enter).
        k: max_iter.
        rows: (B,) the rows of X (the stopping rule's scale).

    Returns:
        Bool (B, T, F) the active features.
    """
    b, t, f = cov.shape
    g = gram.unsqueeze(1).expand(b, t, f, f)
    valid = valid.unsqueeze(1).expand(b, t, f)
    n_feat, scale = valid.sum(-1), rows.to(cov.dtype).view(b, 1)
    c, coef, sign = cov.clone(), torch.zeros_like(cov), torch.zeros_like(cov)
    act = torch.zeros_like(valid)
    ids = torch.arange(f, device=cov.device)
    pos = torch.where(valid, valid.long().cumsum(-1) - 1, f + ids)  # scikit-learn's column order
    done = torch.zeros(b, t, dtype=torch.bool, device=cov.device)
    drop, n_iter = done.clone(), torch.zeros(b, t, dtype=torch.long, device=cov.device)
    diag = g.diagonal(dim1=-2, dim2=-1)
    inv = torch.zeros_like(g)  # (G_AA)^-1 on the active rows and columns, 0 elsewhere
    for _ in range(2 * (k + f) + 2):  # a guard: every live fit adds a feature or flips a sign per step
        inactive = valid & ~act
        absc = torch.where(inactive, c.abs(), -1.0)
        top = torch.where(inactive.any(-1), absc.amax(-1), 0.0)
        idx = torch.where(inactive & (absc == top.unsqueeze(-1)), pos, 3 * f).argmin(-1, keepdim=True)
        n_act = act.sum(-1)
        done = done | (top / scale <= _EPS32) | (n_iter >= k) | (n_act >= n_feat)
        live = ~done
        if not bool(live.any()):
            break
        add = live & ~drop
        j_hot = torch.zeros_like(act).scatter_(-1, idx, True) & add.unsqueeze(-1)
        first = pos == n_act.unsqueeze(-1)  # the first inactive column: scikit-learn swaps it with the entry
        q_hot = first & add.unsqueeze(-1)
        q_idx = first.long().argmax(-1, keepdim=True)
        pos = torch.where(j_hot, n_act.unsqueeze(-1), torch.where(q_hot, pos.gather(-1, idx), pos))
        col = g.gather(-1, idx.unsqueeze(-2).expand(b, t, f, 1)).squeeze(-1) * act
        border = (inv @ col.unsqueeze(-1)).squeeze(-1)  # G_AA^-1 G_Aj
        square = (diag.gather(-1, idx).squeeze(-1) - (col * border).sum(-1)).abs().clamp_min(_EPS64**2)
        bad = (add & (square.sqrt() < 1e-7)).unsqueeze(-1)
        # a degenerate entry: the feature takes the swapped column's correlation, that column gets 0
        c = torch.where(j_hot & bad, c.gather(-1, q_idx), c)
        c = torch.where(q_hot & bad, 0.0, c)
        enter = j_hot & ~bad
        v = border - enter.double()  # the bordered inverse: inv + v v' / pivot^2, with v = [G_AA^-1 G_Aj; -1]
        grow = (v.unsqueeze(-1) * v.unsqueeze(-2)) / square.view(b, t, 1, 1)
        inv = torch.where(enter.any(-1).view(b, t, 1, 1), inv + grow, inv)
        sign = torch.where(enter, torch.sign(c), sign)
        act = act | enter
        live = live & ~bad.squeeze(-1)
        if not bool(live.any()):
            continue
        direction = (inv @ sign.unsqueeze(-1)).squeeze(-1)
        aa = 1.0 / (direction * sign).sum(-1).clamp_min(_EPS64).sqrt()
        direction = direction * aa.unsqueeze(-1)
        corr = torch.round((g @ direction.unsqueeze(-1)).squeeze(-1), decimals=15)
        inactive = valid & ~act
        top_, aa_ = top.unsqueeze(-1), aa.unsqueeze(-1)
        gamma = torch.minimum(
            torch.minimum(
                _min_pos((top_ - c) / (aa_ - corr + _TINY32), inactive),
                _min_pos((top_ + c) / (aa_ + corr + _TINY32), inactive),
            ),
            top / aa,
        )
        cross = -coef / (direction + _TINY32)
        z_pos = _min_pos(cross, act)
        flip = live & (z_pos < gamma)
        sign = torch.where(act & (cross == z_pos.unsqueeze(-1)) & flip.unsqueeze(-1), -sign, sign)
        lv = live.unsqueeze(-1)
        coef = torch.where(lv & act, coef + gamma.unsqueeze(-1) * direction, coef)
        c = torch.where(lv & inactive, c - gamma.unsqueeze(-1) * corr, c)
        n_iter = n_iter + live.long()
        drop = torch.where(live, flip, drop)
    return act & valid


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
