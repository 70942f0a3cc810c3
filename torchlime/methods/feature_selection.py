"""lime's feature selection, batched on the weighted normal equations: sparse ``num_features`` explanations.

``Select(k=K, method=...)`` is a surrogate: it chooses K features for every (input,
target) from the weighted centred normal equations (G = XcᵀWXc, c = XcᵀWyc; no samples held) as
``lime.lime_base.LimeBase.feature_selection`` does (``select_features``: forward selection, highest
weights, the lasso path), then refits ``refit`` (lime's ``Ridge(alpha=1)``) on the chosen features
only; the other coefficients are 0. Inputs with F_b < K features keep all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import torch

from torchlime._util.argdocs import with_args
from torchlime._util.checks import check_choice, check_positive_int, describe
from torchlime.stages.lars import lars_path
from torchlime.stages.normal import Fit, Normal, solve_spd
from torchlime.stages.surrogate import Ridge, Surrogate
from torchlime.typing import SelectionMethod

METHODS: tuple[SelectionMethod, ...] = ("forward_selection", "highest_weights", "lasso_path", "auto")
#: the arguments of every selection on the normal equations, described once
_SELECTION_ARGS = {
    "gram": "(B, F, F) XcᵀWXc.",
    "rhs": "(B, F, T) XcᵀWyc.",
    "valid": "bool (B, F) the features that exist for each input.",
    "k": "features to choose.",
}


@with_args(_SELECTION_ARGS)
def forward_selection(gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Lime's forward selection for every fit: bool (B, T, F), ``min(k, F_b)`` features each.

    K greedy steps, each adding the feature whose weighted least-squares fit (with intercept) with
    the features chosen so far has the highest weighted R², i.e. the largest gain ``r_j² / d_j`` (r,
    d: the right-hand side and diagonal of the normal equations swept by the chosen features). Ties:
    the lowest feature index (lime keeps the first strictly better score).

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


@with_args(_SELECTION_ARGS)
def highest_weights(gram: torch.Tensor, rhs: torch.Tensor, valid: torch.Tensor, k: int) -> torch.Tensor:
    """Lime's ``highest_weights``: the k largest |β| of a weighted ridge (α = 0.01), bool (B, T, F).

    Lime multiplies β by the first sample, the unperturbed input, whose mask keeps every feature.
    Ties: the lowest index (lime's stable sort).

    Example:
        >>> gram = torch.eye(3, dtype=torch.float64).unsqueeze(0)
        >>> highest_weights(gram, torch.tensor([[[0.5], [-2.0], [1.0]]], dtype=torch.float64),
        ...                 torch.ones(1, 3, dtype=torch.bool), 1)[0, 0].tolist()
        [False, True, False]
    """
    padded = gram + torch.diag_embed((~valid).to(gram.dtype))
    beta = solve_spd(padded, rhs, 0.01).transpose(1, 2)  # (B, T, F)
    return _top_k(beta.abs(), valid.unsqueeze(1), k)


def select_features(
    ne: Normal,
    valid: torch.Tensor,
    num_features: int,
    method: SelectionMethod = "auto",
    count: Union[torch.Tensor, int, None] = None,
) -> torch.Tensor:
    """The features lime's ``feature_selection`` chooses for every fit: bool (B, T, F).

    Args:
        ne: the weighted normal equations (``normal.Normal``).
        valid: bool (B, F) the features that exist for each input.
        num_features: K.
        method: lime's names: "forward_selection" (``forward_selection``), "highest_weights"
            (``highest_weights``), "lasso_path" (``stages.lars.lars_path``, lime's K-Lasso) or "auto"
            ("forward_selection" when K <= 6, else "highest_weights": lime's rule).
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
    per_input = torch.as_tensor(count, dtype=torch.float64, device=gram.device).expand(gram.shape[0])
    return lars_path(gram, rhs, valid, per_input, k=num_features)


def restrict(ne: Normal, chosen: torch.Tensor) -> Normal:
    """The normal equations of every (input, target) restricted to its chosen features.

    Args:
        ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
        chosen: bool (B, T, F) the chosen features.

    Returns:
        B·T fits of one target each (gram (B·T, F, F) zero outside the chosen rows and columns).
    """
    b, t, f = chosen.shape
    p = chosen.to(ne.gram.dtype)
    gram = (ne.gram.unsqueeze(1) * p.unsqueeze(-1) * p.unsqueeze(-2)).reshape(b * t, f, f)
    rhs = (ne.rhs.transpose(1, 2) * p).reshape(b * t, f, 1)

    def rep(v: torch.Tensor) -> torch.Tensor:
        return v.repeat_interleave(t, 0)

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

    Attributes:
        k: K, features kept per (input, target) (lime's ``num_features``).
        method: "forward_selection", "highest_weights", "lasso_path" or "auto" (``select_features``).
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
        ...                         surrogate=Select(k=3, method="forward_selection"))
        >>> (exp.coef != 0).sum(-1).tolist()
        [[3], [3]]
    """

    k: int = 10
    method: SelectionMethod = "auto"
    refit: Surrogate = Ridge(alpha=1.0)
    n_samples: Optional[int] = None
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        check_positive_int(self.k, "k")
        check_choice(self.method, "method", METHODS)
        if not isinstance(self.refit, Surrogate):
            raise TypeError(f"`refit` must be a Surrogate (e.g. Ridge(alpha=1.0)), got {describe(self.refit)}")
        if self.n_samples is not None:
            check_positive_int(self.n_samples, "n_samples")
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise TypeError(f"`dtype` must be a floating torch.dtype, got {describe(self.dtype)}")

    def select(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """Bool (B, T, F): the features chosen for every (input, target).

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        return select_features(ne, valid, self.k, self.method, self.n_samples)

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """Select the features of every fit, then refit on them.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
            anchors: (B, 2, T) the outputs of samples 0 and 1, passed on to ``refit``.

        Returns:
            ``Fit`` with coef (B, T, F) (zero outside the chosen features), intercept, score, local_pred (B, T).
        """
        chosen = self.select(ne, valid.to(ne.gram.device))
        b, t, f = chosen.shape
        sub = restrict(ne, chosen)
        anc = None if anchors is None else anchors.transpose(1, 2).reshape(b * t, -1, 1)
        fit = self.refit.fit_normal(sub, chosen.reshape(b * t, f), anchors=anc)

        def shape(v: torch.Tensor, *s: int) -> torch.Tensor:
            return v.reshape(b, t, *s).to(self.dtype)

        std = None if fit.coef_std is None else shape(fit.coef_std, f)
        return Fit(shape(fit.coef, f), shape(fit.intercept), shape(fit.score), shape(fit.local_pred), std)

    def solve(self, ne: Normal, valid: torch.Tensor) -> torch.Tensor:
        """The refitted coefficients (B, F, T), zero outside the chosen features.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
        """
        return self.fit_normal(ne, valid).coef.transpose(1, 2).double()
