"""LARS, batched: scikit-learn's least angle regression and Lasso paths, from normal equations.

``lars_path`` is scikit-learn's ``lars_path_gram`` (``method="lasso"`` or ``"lar"``) for B·T fits at once,
from each input's Gram G = XᵀX (B, F, F) and correlations Xᵀy (B, F, T): lime's ``lasso_path`` selection
(``methods.feature_selection``) and shap's ``l1_reg="num_features(k)"`` (``compat.shap``). The torch
version follows scikit-learn step by step: entry by the largest |correlation| (ties to the first feature in
scikit-learn's column order, whose swaps it tracks), the equiangular step, zero crossings (lasso: the
feature drops; lar: its sign flips), degenerate (collinear) regressors skipped as scikit-learn skips them,
and its stops (alpha = max |correlation| / n <= float32 eps, ``max_iter`` steps, every feature in; lasso:
alpha increasing). A step is some 60 operations on (B, T, F) arrays, each 5-8 µs of torch's own time on
the CPU whatever its size, so a few fits on the CPU run ``lars_path_gram`` itself, fit by fit (at most
``SKLEARN_FITS``; scikit-learn is optional: without it they run in torch). The sample-space surrogates'
Lasso of one penalty, which never forms (F, F), is ``stages.sample_lasso``.
"""

from __future__ import annotations

import warnings
from typing import Optional

import numpy as np
import torch

from torchlime._util.checks import check_choice

__all__ = ["lars_path", "SKLEARN_FITS"]

#: CPU problems of at most this many fits (inputs x targets) per 32 features (at least this many) run
#: scikit-learn's ``lars_path_gram``: a step costs it ~60-140 µs a fit, torch ~1 ms plus a share that grows
#: with fits x F², so torch is the faster above ~8 fits of 24 features, ~16 of 64 and ~48 of 128
SKLEARN_FITS = 8

_EPS32 = float(torch.finfo(torch.float32).eps)  # scikit-learn's equality tolerance
_TINY32 = float(torch.finfo(torch.float32).tiny)
_EPS64 = float(torch.finfo(torch.float64).eps)
_BIG = float(torch.finfo(torch.float64).max)


def lars_path(
    gram: torch.Tensor,
    rhs: torch.Tensor,
    valid: torch.Tensor,
    count: torch.Tensor,
    *,
    method: str = "lasso",
    max_iter: int = 500,
    k: Optional[int] = None,
) -> torch.Tensor:
    """The features scikit-learn's ``lars_path_gram`` makes active, for every (input, target) at once.

    ``lars_path_gram(rhs, gram, n_samples=count, method=method, max_iter=max_iter)`` on each input's valid
    features (module docstring). With ``k`` the support of the last point of the path with at most k
    nonzero coefficients (lime's ``lasso_path`` rule; every valid feature when the path is empty, e.g.
    constant outputs); without, the active set where the path ends (shap's ``num_features(k)`` with
    ``method="lar", max_iter=k``). The torch version and scikit-learn agree but for ties that only rounding
    decides (duplicate or collinear columns, typically fewer samples than features) and for the features a
    path brings in once only rounding noise is left (fewer samples than features, outputs exactly
    explained, at a scale of 1e3 or more).

    Args:
        gram: (B, F, F) XᵀX (for lime: XcᵀWXc, weighted and centred).
        rhs: (B, F, T) Xᵀy.
        valid: bool (B, F) the features that exist for each input (the others never enter).
        count: (B,) n, the rows of X (only the stopping rule alpha = |correlation| / n uses it).
        method: "lasso" or "lar".
        max_iter: the most steps of the path.
        k: lime's rule (above), or None: the final active set.

    Returns:
        Bool (B, T, F) the chosen features.

    Raises:
        ValueError: ``method`` is neither "lasso" nor "lar".

    Example:
        >>> gram = torch.tensor([[[1.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 1.0]]], dtype=torch.float64)
        >>> rhs = torch.tensor([[[0.9], [0.5], [0.1]]], dtype=torch.float64)
        >>> lars_path(gram, rhs, torch.ones(1, 3, dtype=torch.bool), torch.tensor([100.0]), k=2)[0, 0].tolist()
        [True, True, False]
    """
    check_choice(method, "method", ("lasso", "lar"))
    b, f, t = rhs.shape
    if rhs.device.type == "cpu" and b * t <= SKLEARN_FITS * max(1, f // 32):
        host = _sklearn_path(gram, rhs, valid, count, method, max_iter, k)
        if host is not None:
            return torch.from_numpy(host)
    return _torch_path(gram, rhs, valid, count, method == "lasso", max_iter, k)


def _sklearn_path(
    gram: torch.Tensor,
    rhs: torch.Tensor,
    valid: torch.Tensor,
    count: torch.Tensor,
    method: str,
    max_iter: int,
    k: Optional[int],
) -> Optional[np.ndarray]:
    """``lars_path`` by scikit-learn's ``lars_path_gram``, fit by fit; None without scikit-learn."""
    try:
        from sklearn import config_context
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import lars_path_gram

        unchecked = config_context(skip_parameter_validation=True)  # n may be a float (Kish's); 1.3 or later
    except (ImportError, TypeError):
        return None
    g, r = gram.detach().double().numpy(), rhs.detach().double().numpy()
    v, n = valid.numpy(), count.detach().double().numpy()
    b, f, t = r.shape
    out = np.zeros((b, t, f), dtype=bool)
    with unchecked, warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # degenerate regressors, early stops: as lime's
        for i in range(b):
            cols = np.flatnonzero(v[i])
            sub = g[i][cols][:, cols]
            for j in range(t):
                args = dict(n_samples=float(n[i]), max_iter=max_iter, method=method, return_path=k is not None)
                _, active, path = lars_path_gram(r[i, cols, j], sub, **args)
                if k is None:
                    out[i, j, cols[np.asarray(active, dtype=np.int64)]] = True
                    continue
                support = [np.flatnonzero(point) for point in path.T[:0:-1]]  # the last point first, not the first
                out[i, j, cols[next((s for s in support if s.size <= k), np.arange(cols.size))]] = True
    return out


def _masked_inverse(g: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
    """(G_AA)⁻¹ on every fit's active set A (G (B, T, F, F), act (B, T, F)), 0 outside A's rows and columns."""
    a = act.to(g.dtype)
    mask = a.unsqueeze(-1) * a.unsqueeze(-2)
    inverse: torch.Tensor = torch.linalg.inv_ex(g * mask + torch.diag_embed(1.0 - a))[0]  # torch.linalg is untyped
    return inverse * mask


def _min_pos(v: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """scikit-learn's ``min_pos``: the smallest strictly positive value over ``where`` (the largest float if none)."""
    return torch.where(where & (v > 0), v, _BIG).amin(-1)


def _torch_path(  # noqa: PLR0915 (one step of scikit-learn's loop, batched)
    gram: torch.Tensor,
    rhs: torch.Tensor,
    valid: torch.Tensor,
    count: torch.Tensor,
    lasso: bool,
    max_iter: int,
    k: Optional[int],
) -> torch.Tensor:
    """``lars_path`` in torch, every fit at once (module docstring); bool (B, T, F)."""
    b, f, t = rhs.shape
    dev, dt = rhs.device, rhs.dtype
    g = gram.unsqueeze(1).expand(b, t, f, f)
    xy = rhs.transpose(1, 2)
    valid = valid.unsqueeze(1).expand(b, t, f)
    n_feat = valid.sum(-1)
    count = count.to(dt).view(b, 1)
    cov, coef, sign = xy.clone(), torch.zeros_like(xy), torch.zeros_like(xy)
    act = torch.zeros_like(valid)
    ids = torch.arange(f, device=dev)
    pos = torch.where(valid, valid.long().cumsum(-1) - 1, f + ids)  # place of each feature in scikit-learn's order
    drop = torch.zeros(b, t, dtype=torch.bool, device=dev)
    done, n_iter = drop.clone(), torch.zeros(b, t, dtype=torch.long, device=dev)
    prev_alpha = torch.zeros(b, t, dtype=dt, device=dev)
    best = valid.clone()
    diag_g = g.diagonal(dim1=-2, dim2=-1)
    inv = torch.zeros_like(g)  # (G_AA)⁻¹, bordered at each entry (scikit-learn grows its Cholesky factor)
    for _ in range(4 * (max_iter + f)):  # loop guard; fits stop by scikit-learn's rules long before
        live = ~done
        inactive = ~act & valid
        absc = torch.where(inactive, cov.abs(), -1.0)
        c = torch.where(inactive.any(-1), absc.amax(-1), 0.0)
        idx = torch.where(inactive & (absc == c.unsqueeze(-1)), pos, 3 * f).argmin(-1, keepdim=True)
        alpha = c / count
        n_act = act.sum(-1, keepdim=True)
        stop = live & ((alpha <= _EPS32) | (n_iter >= max_iter) | (n_act.squeeze(-1) >= n_feat))
        done, live = done | stop, live & ~stop
        if not bool(live.any()):  # one host read a step (two where a fit may stop below)
            break
        # add the feature of largest |correlation| unless the last step crossed zero; scikit-learn swaps it
        # with the first inactive feature q in its order (kept even when the regressor is degenerate)
        add = live & ~drop
        onehot = torch.zeros_like(act).scatter_(-1, idx, True) & add.unsqueeze(-1)
        q = (pos == n_act).long().argmax(-1, keepdim=True)
        q_hot = torch.zeros_like(act).scatter_(-1, q, True) & add.unsqueeze(-1)
        pos = torch.where(onehot, n_act, torch.where(q_hot, pos.gather(-1, idx), pos))
        col = g.gather(-1, idx.unsqueeze(-1).expand(b, t, f, 1)).squeeze(-1) * act
        border = (inv @ col.unsqueeze(-1)).squeeze(-1)  # (G_AA)⁻¹ G_Aj
        square = (diag_g.gather(-1, idx).squeeze(-1) - (col * border).sum(-1)).abs().clamp_min(_EPS64 * _EPS64)
        degenerate = add & (square.sqrt() < 1e-7)
        # degenerate regressor: scikit-learn zeroes the correlation at q's place and swaps the values back,
        # so the feature keeps q's correlation and q gets 0; the step is redone
        dg = degenerate.unsqueeze(-1)
        cov = torch.where(onehot & dg, cov.gather(-1, q), cov)
        cov = torch.where(q_hot & dg, 0.0, cov)
        enter = onehot & ~dg
        v = border - enter.to(dt)  # the bordered inverse: inv + v vᵀ / square, v = [(G_AA)⁻¹ G_Aj; -1]
        grow = v.unsqueeze(-1) * v.unsqueeze(-2) / square.view(b, t, 1, 1)
        inv = torch.where(enter.any(-1).view(b, t, 1, 1), inv + grow, inv)
        act = act | enter
        sign = torch.where(enter, torch.sign(cov), sign)
        live = live & ~degenerate
        if lasso:  # alpha no longer decreasing
            early = live & (n_iter > 0) & (prev_alpha < alpha)
            done, live = done | early, live & ~early
        if not bool(live.any()):
            if bool(done.all()):
                break
            continue
        # equiangular direction and step
        ls = (inv @ sign.unsqueeze(-1)).squeeze(-1)
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
        crossing = live & (z_pos < gamma)
        hit = act & (z == z_pos.unsqueeze(-1)) & crossing.unsqueeze(-1)
        lv = live.unsqueeze(-1)
        if lasso:  # the crossing features drop: the step ends there
            gamma = torch.where(crossing, z_pos, gamma)
        else:  # lar: their signs flip
            sign = torch.where(hit, -sign, sign)
        gone = hit if lasso else torch.zeros_like(hit)
        new_coef = torch.where(act & ~gone, coef + gamma.unsqueeze(-1) * ls, 0.0)
        new_cov = torch.where(inactive, cov - gamma.unsqueeze(-1) * corr, cov)
        new_act = act & ~gone
        if lasso:  # a dropped feature becomes the first inactive one in scikit-learn's order
            new_cov = torch.where(gone, xy - (g @ new_coef.unsqueeze(-1)).squeeze(-1), new_cov)
            before = pos.unsqueeze(-2) < pos.unsqueeze(-1)  # [i, j]: j is before i
            rank_kept = (before & new_act.unsqueeze(-2)).sum(-1)
            rank_gone = new_act.sum(-1, keepdim=True) + (before & gone.unsqueeze(-2)).sum(-1)
            pos = torch.where(lv, torch.where(new_act, rank_kept, torch.where(gone, rank_gone, pos)), pos)
            if bool(gone.any()):  # (G_AA)⁻¹ of the smaller active set, computed afresh
                inv = torch.where(gone.any(-1).view(b, t, 1, 1), _masked_inverse(g, new_act), inv)
        coef, cov, act = torch.where(lv, new_coef, coef), torch.where(lv, new_cov, cov), torch.where(lv, new_act, act)
        n_iter = n_iter + live.long()
        prev_alpha = torch.where(live, alpha, prev_alpha)
        drop = torch.where(live, crossing, drop)
        if k is not None:
            keep = live & (new_act.sum(-1) <= k)
            best = torch.where(keep.unsqueeze(-1), new_act, best)
    return (best if k is not None else act) & valid
