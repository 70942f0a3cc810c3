"""lime's ``lasso_path`` selection: sklearn's LARS-lasso path, batched over every (input, target).

The path runs from the weighted centred normal equations (G = XcᵀWXc, c = XcᵀWyc) of all fits at
once, step by step as ``sklearn.linear_model.lars_path(method='lasso')`` takes it, and
``lasso_path`` returns the support of its last point with at most K features (lime's K-Lasso,
``feature_selection.select_features(method="lasso_path")``).
"""

from __future__ import annotations

import torch

from torchlime.methods.lars_host import lasso_path_host

#: CPU problems of at most this many fits (inputs x targets) run the NumPy version (``lars_host``)
HOST_FITS = 32

_EPS32 = float(torch.finfo(torch.float32).eps)
_TINY32 = float(torch.finfo(torch.float32).tiny)
_EPS64 = float(torch.finfo(torch.float64).eps)
_BIG = float(torch.finfo(torch.float64).max)


def _masked_solve(g: torch.Tensor, act: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Solve G_AA v = rhs_A on every fit's active set A (G (B, 1 or T, F, F), act and rhs (B, T, F)); 0 elsewhere.

    LU (``solve_ex``, no host sync): on CPU it is far faster than a batched Cholesky of small matrices.
    """
    a = act.to(g.dtype)
    m = g * a.unsqueeze(-1) * a.unsqueeze(-2) + torch.diag_embed(1.0 - a)
    solution: torch.Tensor = torch.linalg.solve_ex(m, (rhs * a).unsqueeze(-1))[0]  # torch.linalg is untyped
    return solution.squeeze(-1) * a


def _min_pos(v: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """Sklearn's ``min_pos``: the smallest strictly positive value over ``where`` (the largest float if none)."""
    return torch.where(where & (v > 0), v, _BIG).amin(-1)


def lasso_path(
    gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int, count: torch.Tensor, max_iter: int = 500
) -> torch.Tensor:
    """Lime's ``lasso_path`` selection: the support of the last point of the path with at most k features.

    sklearn's LARS-lasso path (``lars_path(method='lasso')``) on the weighted centred data, run from G
    and c for all fits at once (all features when the path is empty, e.g. constant outputs). The path
    follows sklearn step by step: entry by the largest |correlation|, drops at zero crossings,
    degenerate (collinear) regressors skipped as sklearn skips them, and its stops (alpha =
    max |correlation| / S <= float32 eps, alpha increasing, ``max_iter`` steps). Ties of |correlation|
    go to the first feature in sklearn's internal order (its swaps are tracked); ties that only
    rounding decides (duplicate or collinear columns, typically fewer samples than features) may
    differ from sklearn, and so may the features a path brings in once only rounding noise is left
    (fewer samples than features, outputs exactly explained, at a scale of 1e3 or more).

    Args:
        gram: (B, F, F) XcᵀWXc.
        rhs: (B, F, T) XcᵀWyc.
        valid: bool (B, F) the features that exist for each input.
        k: the most features chosen.
        count: (B,) samples per input (S: only the stopping rule uses it).
        max_iter: the most steps of the path, as sklearn.

    Returns:
        Bool (B, T, F) the chosen features.

    Example:
        >>> gram = torch.tensor([[[1.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 1.0]]], dtype=torch.float64)
        >>> rhs = torch.tensor([[[0.9], [0.5], [0.1]]], dtype=torch.float64)
        >>> lasso_path(gram, rhs, torch.ones(1, 3, dtype=torch.bool), 2, torch.tensor([100.0]))[0, 0].tolist()
        [True, True, False]
    """
    b, f, t = rhs.shape
    if rhs.device.type == "cpu" and b * t <= HOST_FITS:
        host = lasso_path_host(
            gram.detach().double().numpy(),
            rhs.detach().double().numpy(),
            valid.numpy(),
            k,
            count.detach().double().numpy(),
            max_iter,
        )
        return torch.from_numpy(host)
    dev, dt = rhs.device, rhs.dtype
    g = gram.unsqueeze(1).expand(b, t, f, f)
    xy = rhs.transpose(1, 2)
    valid = valid.unsqueeze(1).expand(b, t, f)
    n_feat = valid.sum(-1)
    count = count.to(dt).view(b, 1)
    cov, coef, sign = xy.clone(), torch.zeros_like(xy), torch.zeros_like(xy)
    act = torch.zeros_like(valid)
    pos = torch.arange(f, device=dev).expand(b, t, f).clone()  # place of each feature in sklearn's order
    drop = torch.zeros(b, t, dtype=torch.bool, device=dev)
    done, n_iter = drop.clone(), torch.zeros(b, t, dtype=torch.long, device=dev)
    prev_alpha = torch.zeros(b, t, dtype=dt, device=dev)
    best = valid.clone()
    diag_g = g.diagonal(dim1=-2, dim2=-1)
    for _ in range(4 * (max_iter + f)):  # loop guard; fits stop by sklearn's rules long before
        live = ~done
        inactive = ~act & valid
        absc = torch.where(inactive, cov.abs(), -1.0)
        c = torch.where(inactive.any(-1), absc.amax(-1), 0.0)
        idx = torch.where(inactive & (absc == c.unsqueeze(-1)), pos, 2 * f).argmin(-1, keepdim=True)
        alpha = c / count
        n_act = act.sum(-1, keepdim=True)
        stop = live & ((alpha <= _EPS32) | (n_iter >= max_iter) | (n_act.squeeze(-1) >= n_feat))
        done, live = done | stop, live & ~stop
        # add the feature of largest |correlation| unless the last step dropped one; sklearn swaps it
        # with the first inactive feature q in its order (kept even when the regressor is degenerate)
        add = live & ~drop
        onehot = torch.zeros_like(act).scatter_(-1, idx, True) & add.unsqueeze(-1)
        q = (pos == n_act).long().argmax(-1, keepdim=True)
        q_hot = torch.zeros_like(act).scatter_(-1, q, True) & add.unsqueeze(-1)
        pos = torch.where(onehot, n_act, torch.where(q_hot, pos.gather(-1, idx), pos))
        col = g.gather(-1, idx.unsqueeze(-1).expand(b, t, f, 1)).squeeze(-1) * act
        proj = (col * _masked_solve(g, act, col)).sum(-1)
        pivot = (diag_g.gather(-1, idx).squeeze(-1) - proj).abs().sqrt().clamp_min(_EPS64)
        degenerate = add & (pivot < 1e-7)
        # degenerate regressor: sklearn zeroes the correlation at q's place and swaps the values back,
        # so the feature keeps q's correlation and q gets 0; the step is redone
        dg = degenerate.unsqueeze(-1)
        cov = torch.where(onehot & dg, cov.gather(-1, q), cov)
        cov = torch.where(q_hot & dg, 0.0, cov)
        enter = onehot & ~dg
        act = act | enter
        sign = torch.where(enter, torch.sign(cov), sign)
        live = live & ~degenerate
        early = live & (n_iter > 0) & (prev_alpha < alpha)  # lasso: alpha no longer decreasing
        done, live = done | early, live & ~early
        if not bool(live.any()):
            if bool(done.all()):
                break
            continue
        # equiangular direction and step
        ls = _masked_solve(g, act, sign)
        aa = 1.0 / (ls * sign).sum(-1).clamp_min(_EPS64).sqrt()
        ls = ls * aa.unsqueeze(-1)
        corr = torch.round((g @ ls.unsqueeze(-1)).squeeze(-1), decimals=15)
        inactive = ~act & valid
        cc, a1 = c.unsqueeze(-1), aa.unsqueeze(-1)
        gamma = torch.minimum(
            torch.minimum(
                _min_pos((cc - cov) / (a1 - corr + _TINY32), inactive),
                _min_pos((cc + cov) / (a1 + corr + _TINY32), inactive),
            ),
            c / aa,
        )
        z = -coef / (ls + _TINY32)
        z_pos = _min_pos(z, act)
        dropping = live & (z_pos < gamma)
        gamma = torch.where(dropping, z_pos, gamma)
        gone = act & (z == z_pos.unsqueeze(-1)) & dropping.unsqueeze(-1)
        # the new point of the path; a dropped feature becomes the first inactive one in sklearn's order
        new_coef = torch.where(act & ~gone, coef + gamma.unsqueeze(-1) * ls, 0.0)
        new_cov = torch.where(inactive, cov - gamma.unsqueeze(-1) * corr, cov)
        new_cov = torch.where(gone, xy - (g @ new_coef.unsqueeze(-1)).squeeze(-1), new_cov)
        new_act = act & ~gone
        before = pos.unsqueeze(-2) < pos.unsqueeze(-1)  # [i, j]: j is before i
        rank_kept = (before & new_act.unsqueeze(-2)).sum(-1)
        rank_gone = new_act.sum(-1, keepdim=True) + (before & gone.unsqueeze(-2)).sum(-1)
        new_pos = torch.where(new_act, rank_kept, torch.where(gone, rank_gone, pos))
        lv = live.unsqueeze(-1)
        coef, cov, act = torch.where(lv, new_coef, coef), torch.where(lv, new_cov, cov), torch.where(lv, new_act, act)
        pos = torch.where(lv, new_pos, pos)
        n_iter = n_iter + live.long()
        prev_alpha = torch.where(live, alpha, prev_alpha)
        drop = torch.where(live, dropping, drop)
        keep = live & (new_act.sum(-1) <= k)
        best = torch.where(keep.unsqueeze(-1), new_act, best)
    return best & valid
