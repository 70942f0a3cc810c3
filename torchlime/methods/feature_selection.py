"""lime's feature selection, batched on the weighted normal equations: sparse ``num_features`` explanations.

``Select(num_features=K, method=...)`` is a surrogate: it chooses K features for every (input,
target) from the weighted centred normal equations (G = XcᵀWXc, c = XcᵀWyc; no samples held) as
``lime.lime_base.LimeBase.feature_selection`` does, then refits ``refit`` (lime's ``Ridge(alpha=1)``)
on the chosen features only; the other coefficients are 0. Methods (lime's names):

* ``"forward_selection"``: K greedy steps, each adding the feature whose weighted least-squares fit
  (with intercept) with the features chosen so far has the highest weighted R², i.e. the largest
  gain ``r_j² / d_j`` (r, d: the right-hand side and diagonal of the normal equations swept by the
  chosen features). Ties: the lowest feature index (lime keeps the first strictly better score).
* ``"highest_weights"``: the K largest |β_j| of a weighted ridge (α = 0.01) on all features (lime
  multiplies β by the first sample, the unperturbed input, whose mask keeps every feature). Ties:
  the lowest index (lime's stable sort).
* ``"lasso_path"``: sklearn's LARS-lasso path (``lars_path(method='lasso')``) on the weighted centred
  data, run from G and c for all fits at once; the support of the last point of the path with at
  most K non-zero coefficients (lime's K-Lasso; all features when the path is empty, e.g. constant
  outputs). The path follows sklearn step by step: entry by the largest |correlation|, drops at zero
  crossings, degenerate (collinear) regressors skipped as sklearn skips them, and its stops (alpha =
  max |correlation| / S <= float32 eps, alpha increasing, 500 steps). S is the number of samples
  the normal equations accumulated (``Normal.n_samples``), or ``Select(n_samples=S)`` if given
  (only the stopping rule uses it). Ties of |correlation| go to the first
  feature in sklearn's internal order (its swaps are tracked); ties that only rounding decides
  (duplicate or collinear columns, typically fewer samples than features) may differ from sklearn.
* ``"auto"``: ``"forward_selection"`` when K <= 6, else ``"highest_weights"`` (lime's rule).

Inputs with F_b < K features keep all of them (lime's ``min(num_features, F)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from torchlime._checks import check_choice, check_positive_int, describe
from torchlime.stages.surrogate import Fit, Normal, Ridge, Surrogate, solve_spd

METHODS = ("forward_selection", "highest_weights", "lasso_path", "auto")
_EPS32 = float(torch.finfo(torch.float32).eps)
_TINY32 = float(torch.finfo(torch.float32).tiny)
_EPS64 = float(torch.finfo(torch.float64).eps)
_BIG = float(torch.finfo(torch.float64).max)


def forward_selection(gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """lime's forward selection for every fit: bool (B, T, F), ``min(k, F_b)`` features each.

    Args:
        gram: (B, F, F) XcᵀWXc. rhs: (B, F, T) XcᵀWyc. valid: bool (B, F). k: features to choose.

    Example:
        >>> gram = torch.eye(3, dtype=torch.float64).unsqueeze(0)
        >>> forward_selection(gram, torch.tensor([[[0.5], [-2.0], [1.0]]], dtype=torch.float64),
        ...                   torch.ones(1, 3, dtype=torch.bool), 2)[0, 0].tolist()
        [False, True, True]
    """
    b, f, t = rhs.shape
    g = gram.unsqueeze(1).expand(b, t, f, f).clone()
    r = rhs.transpose(1, 2).clone()  # (B, T, F)
    d0 = gram.diagonal(dim1=-2, dim2=-1).unsqueeze(1).expand(b, t, f)
    valid = valid.unsqueeze(1)
    chosen = torch.zeros_like(r, dtype=torch.bool)
    n_feat = valid.sum(-1)  # (B, 1)
    for step in range(min(k, f)):
        d = g.diagonal(dim1=-2, dim2=-1)
        free = valid & ~chosen
        gain = torch.where(d > 1e-12 * d0, r * r / d.clamp_min(1e-300), 0.0)  # collinear: no gain
        p = torch.where(free, gain, -1.0).argmax(-1, keepdim=True)  # first of the best
        take = (step < n_feat).unsqueeze(-1)  # (B, 1, 1)
        col = g.gather(-1, p.unsqueeze(-1).expand(b, t, f, 1)).squeeze(-1)  # (B, T, F)
        piv = col.gather(-1, p)
        upd = take & (piv > 1e-12 * d0.gather(-1, p))
        piv = torch.where(upd, piv, 1.0)
        g = g - torch.where(upd.unsqueeze(-1), col.unsqueeze(-1) * col.unsqueeze(-2) / piv.unsqueeze(-1), 0.0)
        r = r - torch.where(upd, col * r.gather(-1, p) / piv, 0.0)
        chosen |= torch.zeros_like(chosen).scatter_(-1, p, True) & take
    return chosen


def _top_k(key: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Bool mask of the ``min(k, F_b)`` largest keys (B, T, F), ties to the lowest index."""
    order = torch.where(valid, key, -1.0).sort(dim=-1, descending=True, stable=True).indices
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(key.shape[-1], device=key.device).expand_as(order))
    return (rank < k) & valid


def highest_weights(gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """lime's ``highest_weights``: the k largest |β| of a weighted ridge (α = 0.01), bool (B, T, F).

    Example:
        >>> gram = torch.eye(3, dtype=torch.float64).unsqueeze(0)
        >>> highest_weights(gram, torch.tensor([[[0.5], [-2.0], [1.0]]], dtype=torch.float64),
        ...                 torch.ones(1, 3, dtype=torch.bool), 1)[0, 0].tolist()
        [False, True, False]
    """
    padded = gram + torch.diag_embed((~valid).to(gram.dtype))
    beta = solve_spd(padded, rhs, 0.01).transpose(1, 2)  # (B, T, F)
    return _top_k(beta.abs(), valid.unsqueeze(1), k)


def _masked_solve(g: torch.Tensor, act: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """Solve G_AA v = rhs_A on every fit's active set A (G (B, 1 or T, F, F), act and rhs (B, T, F)); 0 elsewhere.
    LU (``solve_ex``, no host sync): on CPU it is far faster than a batched Cholesky of small matrices."""
    a = act.to(g.dtype)
    m = g * a.unsqueeze(-1) * a.unsqueeze(-2) + torch.diag_embed(1.0 - a)
    return torch.linalg.solve_ex(m, (rhs * a).unsqueeze(-1))[0].squeeze(-1) * a


def _min_pos(v: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """sklearn's ``min_pos``: the smallest strictly positive value over ``where`` (the largest float if none)."""
    return torch.where(where & (v > 0), v, _BIG).amin(-1)


def lasso_path(
    gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int, count: torch.Tensor, max_iter: int = 500
) -> torch.Tensor:
    """lime's ``lasso_path`` selection: bool (B, T, F), the support of the last point of sklearn's
    LARS-lasso path with at most k non-zero coefficients (all features if the path is empty).

    Args:
        gram, rhs, valid: as in ``forward_selection``. count: (B,) samples per input (sklearn
            stops the path once max |correlation| / count <= float32 eps). max_iter: as sklearn.

    Example:
        >>> gram = torch.tensor([[[1.0, 0.3, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 1.0]]], dtype=torch.float64)
        >>> rhs = torch.tensor([[[0.9], [0.5], [0.1]]], dtype=torch.float64)
        >>> lasso_path(gram, rhs, torch.ones(1, 3, dtype=torch.bool), 2, torch.tensor([100.0]))[0, 0].tolist()
        [True, True, False]
    """
    b, f, t = rhs.shape
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


def select_features(
    ne: Normal, valid: torch.Tensor, num_features: int, method: str = "auto", count: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """The features lime's ``feature_selection`` chooses for every fit: bool (B, T, F).

    Args:
        ne: the weighted normal equations (``surrogate.Normal``). valid: bool (B, F).
        num_features: K. method: one of ``METHODS``.
        count: (B,) samples per input (or one int), for ``"lasso_path"``'s stopping rule; None: the
            Normal's ``n_samples`` if it has one, else Kish's effective sample size (Σw)² / Σw².

    Raises:
        TypeError / ValueError: a bad ``num_features`` or ``method``.

    Example:
        >>> from torchlime.stages.surrogate import normal_equations
        >>> x = torch.rand(1, 200, 6) < 0.5
        >>> y = (3.0 * x[..., 2] - 2.0 * x[..., 4] + 0.1 * x[..., 0]).unsqueeze(-1).float()
        >>> ne = normal_equations(x, y, torch.ones(1, 200))
        >>> valid = torch.ones(1, 6, dtype=torch.bool)
        >>> select_features(ne, valid, 2, "forward_selection").nonzero()[:, 2].tolist()
        [2, 4]
    """
    check_positive_int(num_features, "num_features")
    check_choice(method, "method", METHODS)
    if method == "auto":
        method = "forward_selection" if num_features <= 6 else "highest_weights"
    gram, rhs = ne.gram.double(), ne.rhs.double()
    if method == "forward_selection":
        return forward_selection(gram, rhs, valid, num_features)
    if method == "highest_weights":
        return highest_weights(gram, rhs, valid, num_features)
    if count is None:
        count = ne.n_samples  # (B,) samples accumulated
    if count is None:  # normal equations built by hand
        count = ne.weight_sum.double() ** 2 / ne.weight_sq_sum.double().clamp_min(1e-300)
    count = torch.as_tensor(count, dtype=torch.float64, device=gram.device).expand(gram.shape[0])
    return lasso_path(gram, rhs, valid, num_features, count)


def restrict(ne: Normal, chosen: torch.Tensor) -> Normal:
    """The normal equations of every (input, target) restricted to its chosen features, as B·T
    fits of one target each (gram (B·T, F, F) zero outside the chosen rows and columns)."""
    b, t, f = chosen.shape
    p = chosen.to(ne.gram.dtype)
    gram = (ne.gram.unsqueeze(1) * p.unsqueeze(-1) * p.unsqueeze(-2)).reshape(b * t, f, f)
    rhs = (ne.rhs.transpose(1, 2) * p).reshape(b * t, f, 1)
    rep = lambda v: v.repeat_interleave(t, 0)  # noqa: E731
    y_shift = None if ne.y_shift is None else ne.y_shift.reshape(b * t, 1)
    n_samples = None if ne.n_samples is None else rep(ne.n_samples)
    return Normal(
        gram,
        rhs,
        rep(ne.x_mean),
        ne.y_mean.reshape(b * t, 1),
        rep(ne.weight_sum),
        ne.ss_tot.reshape(b * t, 1),
        rep(ne.weight_sq_sum),
        None,
        y_shift,
        n_samples,
    )


@dataclass(frozen=True)
class Select(Surrogate):
    """Sparse surrogate: lime's feature selection, then ``refit`` on the chosen features only.

    Args:
        num_features: K, features kept per (input, target) (lime's ``num_features``).
        method: "forward_selection", "highest_weights", "lasso_path" or "auto" (module docstring).
        refit: the surrogate fitted on the chosen features (lime: ``Ridge(alpha=1)``); any
            surrogate that works from the centred normal equations (Ridge, Lasso, KLasso).
        n_samples: S, for ``"lasso_path"``'s stopping rule only (see ``select_features``).
        dtype: dtype of the accumulated products and of the fit (float64: exact parity with
            lime also in near-ties of the selection criteria).

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and what came).

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features
        >>> exp = torchlime.explain(model, torch.rand(2, 1, 4, 4), feats, n_samples=256,
        ...                         surrogate=Select(num_features=3, method="forward_selection"))
        >>> (exp.coef != 0).sum(-1).tolist()
        [[3], [3]]
    """

    num_features: int = 10
    method: str = "auto"
    refit: Surrogate = Ridge(alpha=1.0)
    n_samples: Optional[int] = None
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_int(self.num_features, "num_features")
        check_choice(self.method, "method", METHODS)
        if not isinstance(self.refit, Surrogate):
            raise TypeError(f"`refit` must be a Surrogate (e.g. Ridge(alpha=1.0)), got {describe(self.refit)}")
        if self.n_samples is not None:
            check_positive_int(self.n_samples, "n_samples")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise TypeError(f"`dtype` must be a floating torch.dtype, got {describe(self.dtype)}")

    def select(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Bool (B, T, F): the features chosen for every (input, target)."""
        return select_features(ne, valid, self.num_features, self.method, self.n_samples)

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        chosen = self.select(ne, valid.to(ne.gram.device))
        b, t, f = chosen.shape
        sub = restrict(ne, chosen)
        anc = None if anchors is None else anchors.transpose(1, 2).reshape(b * t, -1, 1)
        fit = self.refit.fit_normal(sub, chosen.reshape(b * t, f), anchors=anc)
        shape = lambda v, *s: None if v is None else v.reshape(b, t, *s).to(self.dtype)  # noqa: E731
        return Fit(
            shape(fit.coef, f), shape(fit.intercept), shape(fit.score), shape(fit.local_pred), shape(fit.coef_std, f)
        )

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """The refitted coefficients (B, F, T), zero outside the chosen features."""
        return self.fit_normal(ne, valid).coef.transpose(1, 2).double()
