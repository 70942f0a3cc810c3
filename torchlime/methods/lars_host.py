"""``lars.lasso_path`` for a few fits on the CPU, in NumPy: the same path, step for step, without torch's per-op cost.

A path takes about 65 steps of some 60 operations on arrays of F numbers; torch spends 5-8 µs an operation
on such arrays, NumPy about 1. ``lars.lasso_path`` sends CPU problems of at most ``HOST_FITS`` fits here.
Up to ``ONE_FITS`` fits (lime's usual one label) run one at a time on vectors (``lasso_path_one``: no
masks over finished fits, one 64-feature path ~19 ms); more run batched (``lasso_path_host``: 64
features, one fit ~39 ms, 32 fits ~350 ms against ~500 ms through torch). The tests hold the three
versions to the same supports.
"""

from __future__ import annotations

import numpy as np

_EPS32 = float(np.finfo(np.float32).eps)
_TINY32 = float(np.finfo(np.float32).tiny)
_EPS64 = float(np.finfo(np.float64).eps)
_BIG = float(np.finfo(np.float64).max)

#: at most this many fits run one at a time (``lasso_path_one``); more run batched
ONE_FITS = 2


def _masked_solve(g: np.ndarray, act: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve G_AA v = rhs_A on every fit's active set A (G (B, T, F, F), act and rhs (B, T, F)); 0 elsewhere.

    Fit by fit (``_solve_active``): a few fits, so the loop is short, and each solve is |A| x |A| rather
    than F x F.
    """
    out = np.zeros(rhs.shape)
    for i, j in np.ndindex(*act.shape[:2]):
        out[i, j] = _solve_active(g[i, j], act[i, j], rhs[i, j])
    return out


def _solve_active(g: np.ndarray, act: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve G_AA v = rhs_A on the active set A of one fit (G (F, F), act and rhs (F,)); 0 elsewhere."""
    out = np.zeros(rhs.shape)
    a = np.flatnonzero(act)
    if a.size:
        out[a] = np.linalg.solve(g[a][:, a], rhs[a])
    return out


def _min_pos(v: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Sklearn's ``min_pos``: the smallest strictly positive value over ``where`` (the largest float if none)."""
    smallest: np.ndarray = np.where(where & (v > 0), v, _BIG).min(-1)
    return smallest


def lasso_path_host(
    gram: np.ndarray, rhs: np.ndarray, valid: np.ndarray, k: int, count: np.ndarray, max_iter: int
) -> np.ndarray:
    """``lars.lasso_path`` on NumPy arrays: the same steps, stops and tie rules.

    Args:
        gram: float64 (B, F, F) XcᵀWXc.
        rhs: float64 (B, F, T) XcᵀWyc.
        valid: bool (B, F) the features that exist for each input.
        k: the most features chosen.
        count: float64 (B,) samples per input (the stopping rule's S).
        max_iter: the most steps of the path.

    Returns:
        Bool (B, T, F) the chosen features.
    """
    b, f, t = rhs.shape
    if b * t <= ONE_FITS:
        fits = [(i, j) for i in range(b) for j in range(t)]
        one = [lasso_path_one(gram[i], rhs[i, :, j], valid[i], k, float(count[i]), max_iter) for i, j in fits]
        return np.stack(one).reshape(b, t, f)
    g = np.broadcast_to(gram[:, None], (b, t, f, f))
    xy = rhs.transpose(0, 2, 1)
    valid = np.broadcast_to(valid[:, None], (b, t, f))
    n_feat = valid.sum(-1)
    count = count.reshape(b, 1)
    cov, coef, sign = xy.copy(), np.zeros_like(xy), np.zeros_like(xy)
    act = np.zeros((b, t, f), dtype=bool)
    pos = np.broadcast_to(np.arange(f), (b, t, f)).copy()
    drop = np.zeros((b, t), dtype=bool)
    done, n_iter = drop.copy(), np.zeros((b, t), dtype=np.int64)
    prev_alpha = np.zeros((b, t))
    best = valid.copy()
    diag_g = np.diagonal(g, axis1=-2, axis2=-1)
    bi, ti = np.ogrid[:b, :t]  # with a (B, T) index: one entry per fit
    features = np.arange(f)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(4 * (max_iter + f)):
            live = ~done
            inactive = ~act & valid
            absc = np.where(inactive, np.abs(cov), -1.0)
            c = np.where(inactive.any(-1), absc.max(-1), 0.0)
            idx = np.where(inactive & (absc == c[..., None]), pos, 2 * f).argmin(-1)
            alpha = c / count
            n_act = act.sum(-1, keepdims=True)
            stop = live & ((alpha <= _EPS32) | (n_iter >= max_iter) | (n_act[..., 0] >= n_feat))
            done, live = done | stop, live & ~stop
            add = live & ~drop
            onehot = (features == idx[..., None]) & add[..., None]
            q = (pos == n_act).argmax(-1)
            q_hot = (features == q[..., None]) & add[..., None]
            pos = np.where(onehot, n_act, np.where(q_hot, pos[bi, ti, idx][..., None], pos))
            col = g[bi, ti, :, idx] * act
            proj = (col * _masked_solve(g, act, col)).sum(-1)
            pivot = np.maximum(np.sqrt(np.abs(diag_g[bi, ti, idx] - proj)), _EPS64)
            degenerate = add & (pivot < 1e-7)
            dg = degenerate[..., None]
            cov = np.where(onehot & dg, cov[bi, ti, q][..., None], cov)
            cov = np.where(q_hot & dg, 0.0, cov)
            enter = onehot & ~dg
            act = act | enter
            sign = np.where(enter, np.sign(cov), sign)
            live = live & ~degenerate
            early = live & (n_iter > 0) & (prev_alpha < alpha)
            done, live = done | early, live & ~early
            if not live.any():
                if done.all():
                    break
                continue
            ls = _masked_solve(g, act, sign)
            aa = 1.0 / np.sqrt(np.maximum((ls * sign).sum(-1), _EPS64))
            ls = ls * aa[..., None]
            corr = np.round((g @ ls[..., None])[..., 0], 15)
            inactive = ~act & valid
            cc, a1 = c[..., None], aa[..., None]
            gamma = np.minimum(
                np.minimum(
                    _min_pos((cc - cov) / (a1 - corr + _TINY32), inactive),
                    _min_pos((cc + cov) / (a1 + corr + _TINY32), inactive),
                ),
                c / aa,
            )
            z = -coef / (ls + _TINY32)
            z_pos = _min_pos(z, act)
            dropping = live & (z_pos < gamma)
            gamma = np.where(dropping, z_pos, gamma)
            gone = act & (z == z_pos[..., None]) & dropping[..., None]
            new_coef = np.where(act & ~gone, coef + gamma[..., None] * ls, 0.0)
            new_cov = np.where(inactive, cov - gamma[..., None] * corr, cov)
            new_cov = np.where(gone, xy - (g @ new_coef[..., None])[..., 0], new_cov)
            new_act = act & ~gone
            before = pos[..., None, :] < pos[..., :, None]
            rank_kept = (before & new_act[..., None, :]).sum(-1)
            rank_gone = new_act.sum(-1, keepdims=True) + (before & gone[..., None, :]).sum(-1)
            new_pos = np.where(new_act, rank_kept, np.where(gone, rank_gone, pos))
            lv = live[..., None]
            coef, cov, act = np.where(lv, new_coef, coef), np.where(lv, new_cov, cov), np.where(lv, new_act, act)
            pos = np.where(lv, new_pos, pos)
            n_iter = n_iter + live
            prev_alpha = np.where(live, alpha, prev_alpha)
            drop = np.where(live, dropping, drop)
            keep = live & (new_act.sum(-1) <= k)
            best = np.where(keep[..., None], new_act, best)
    chosen: np.ndarray = best & valid
    return chosen


def lasso_path_one(
    gram: np.ndarray, xy: np.ndarray, valid: np.ndarray, k: int, count: float, max_iter: int
) -> np.ndarray:
    """``lasso_path_host`` for one fit, on vectors: the same steps, stops, tie rules and arithmetic.

    Args:
        gram: float64 (F, F) XcᵀWXc.
        xy: float64 (F,) XcᵀWyc (not modified).
        valid: bool (F,) the features that exist.
        k: the most features chosen.
        count: samples (the stopping rule's S).
        max_iter: the most steps of the path.

    Returns:
        Bool (F,) the chosen features.
    """
    f = xy.shape[0]
    n_feat = int(valid.sum())
    cov, coef, sign = xy.copy(), np.zeros(f), np.zeros(f)
    act = np.zeros(f, dtype=bool)
    pos = np.arange(f)  # place of each feature in sklearn's order
    order: list[int] = []  # the active features by place
    drop, n_iter, prev_alpha = False, 0, 0.0
    best = valid.copy()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(4 * (max_iter + f)):
            n_act = len(order)
            if n_act >= n_feat:
                break
            absc = np.where(~act & valid, np.abs(cov), -1.0)
            c = float(absc.max())
            ties = np.flatnonzero(absc == c)
            idx = int(ties[np.argmin(pos[ties])])
            alpha = c / count
            if alpha <= _EPS32 or n_iter >= max_iter:
                break
            if not drop:  # enter by the largest |correlation|, swapped with the first inactive place
                q = int(np.flatnonzero(pos == n_act)[0])
                pos[q], pos[idx] = pos[idx], n_act
                col = gram[:, idx] * act
                proj = float((col * _solve_active(gram, act, col)).sum())
                if max(np.sqrt(abs(gram[idx, idx] - proj)), _EPS64) < 1e-7:  # degenerate: q's correlation, redo
                    cov[idx], cov[q] = cov[q], 0.0
                    continue
                act[idx] = True
                sign[idx] = np.sign(cov[idx])
                order.append(idx)
            if n_iter > 0 and prev_alpha < alpha:  # lasso: alpha no longer decreasing
                break
            ls = _solve_active(gram, act, sign)
            aa = 1.0 / np.sqrt(max(float((ls * sign).sum()), _EPS64))
            ls = ls * aa
            corr = np.round((gram @ ls[:, None])[:, 0], 15)
            inactive = ~act & valid
            gamma = min(
                float(_min_pos((c - cov) / (aa - corr + _TINY32), inactive)),
                float(_min_pos((c + cov) / (aa + corr + _TINY32), inactive)),
                c / aa,
            )
            z = -coef / (ls + _TINY32)
            z_pos = float(_min_pos(z, act))
            drop = z_pos < gamma
            if drop:
                gamma = z_pos
            coef = np.where(act, coef + gamma * ls, 0.0)
            cov = np.where(inactive, cov - gamma * corr, cov)
            if drop:  # zero crossings leave; they take the first inactive places, in their order
                gone = act & (z == z_pos)
                coef[gone] = 0.0
                cov = np.where(gone, xy - (gram @ coef[:, None])[:, 0], cov)
                act &= ~gone
                kept = [i for i in order if act[i]]
                pos[kept + [i for i in order if gone[i]]] = np.arange(len(order))
                order = kept
            n_iter += 1
            prev_alpha = alpha
            if len(order) <= k:
                best = act.copy()
    chosen: np.ndarray = best & valid
    return chosen
