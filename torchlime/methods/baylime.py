"""BayLIME: a Bayesian ridge surrogate with posterior standard deviations (``surrogate="bayes"``).

Every (input, target) fit is a Bayesian linear model (Zhao et al., BayLIME, UAI 2021) with a
non-informative prior whose hyperparameters are found by evidence maximisation, exactly as
scikit-learn's ``BayesianRidge``, or an informative prior (e.g. another explanation's ``coef``).
``Explanation.coef_std`` is the posterior standard deviation of every coefficient. Every step runs
batched over inputs and targets on one eigendecomposition of the whitened Gram matrix per input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union, cast

import torch

from torchlime._util.checks import check_positive_float, check_positive_int, describe
from torchlime.stages.normal import Fit, Normal, finish
from torchlime.stages.surrogate import Surrogate
from torchlime.typing import HasCoef

_EPS = float(torch.finfo(torch.float64).eps)


#: a prior: None, a number, a tensor (F,) or (B, T, F), or an ``Explanation`` (its ``coef``)
PriorSpec = Union[None, float, torch.Tensor, HasCoef]


def _check_prior(value: object, name: str, positive: bool) -> Union[None, float, torch.Tensor]:
    if value is None:
        return None
    coef = getattr(value, "coef", None)
    if isinstance(coef, torch.Tensor):  # an Explanation (methods never import the engine)
        value = coef
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return check_positive_float(value, name) if positive else float(value)
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        raise TypeError(
            f"`{name}` must be None, a number, a floating tensor of shape (F,) or (B, T, F)"
            f"{'' if positive else ' or an Explanation'}, got {describe(value)}"
        )
    if value.ndim not in (0, 1, 3):
        raise ValueError(f"`{name}` must have shape (F,) or (B, T, F), got {tuple(value.shape)}")
    if not bool(torch.isfinite(value).all()) or (positive and not bool((value > 0).all())):
        raise ValueError(f"`{name}` must be finite{' and > 0' if positive else ''}, got {describe(value)}")
    return value.detach()


@dataclass(frozen=True, eq=False, repr=False)
class BayesianRidge(Surrogate):
    """Bayesian ridge regression (BayLIME).

    Model of every (input, target) fit, with w the kernel's weights, X the masks and y the outputs:
    ``y_s = b + x_s . beta + e_s``, ``e_s ~ N(0, 1 / (alpha w_s))``, ``beta ~ N(mu_0, diag(lambda p)^-1)``.
    The intercept b is flat (handled, as in scikit-learn, by centring X and y on their weighted means).
    With G = Xc' W Xc and r = Xc' W yc (the engine's normal equations), the posterior is
    ``Sigma = (alpha G + diag(lambda p))^-1``, ``mu = mu_0 + Sigma alpha (r - G mu_0)``, and
    ``Fit.coef_std`` (``Explanation.coef_std``) is sqrt(diag Sigma): coef +- 1.96 coef_std is a 95 %
    credible interval. Hyperparameters:

    * non-informative prior (``prior_mean=None, prior_precision=None``): mu_0 = 0, p = 1, and alpha and
      lambda are found by evidence maximisation with MacKay's updates, exactly scikit-learn's
      ``BayesianRidge`` (same ``max_iter``, ``tol``, ``alpha_1``, ``alpha_2``, ``lambda_1``, ``lambda_2``,
      ``alpha_init``, ``lambda_init``; sample weights count through their sum, as there);
    * informative prior: ``prior_mean`` (e.g. another explanation's ``coef``) and ``prior_precision`` p
      (then lambda = 1: the precision is taken as given); ``alpha`` fixed (full) or None (estimated:
      BayLIME's partial prior). A prior mean alone keeps lambda estimated around it.

    Attributes:
        prior_mean: None (0), a number, a tensor (F,) or (B, T, F) (e.g. ``exp.coef`` of an earlier
            explanation of the same inputs and targets: pass ``target=exp.target``), or an
            ``Explanation`` (its ``coef``).
        prior_precision: None (isotropic lambda, estimated), a number or a tensor (F,) or (B, T, F)
            of positive precisions (fixed).
        alpha: noise precision; None estimates it (evidence maximisation).
        max_iter: the most evidence iterations (scikit-learn's ``BayesianRidge``, as the next seven).
        tol: an estimate stops once its coefficients move by less than ``tol`` (L1).
        alpha_1: shape of the Gamma prior of alpha.
        alpha_2: rate of the Gamma prior of alpha.
        lambda_1: shape of the Gamma prior of lambda.
        lambda_2: rate of the Gamma prior of lambda.
        alpha_init: the first alpha (None: 1 / Var(y)).
        lambda_init: the first lambda (None: 1).
        dtype: dtype of the accumulated products and of the returned fit (the solve runs in float64).

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> x = torch.rand(1, 400, 3, generator=g) < 0.5
        >>> y = (x.double() @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)
        ...      + 0.1 * torch.randn(1, 400, 1, generator=g, dtype=torch.float64))
        >>> fit = BayesianRidge(dtype=torch.float64).fit(x, y, torch.ones(1, 400), torch.ones(1, 3, dtype=torch.bool))
        >>> fit.coef.round(decimals=1).tolist(), bool((fit.coef_std < 0.02).all())
        ([[[1.0, -2.0, 0.5]]], True)
    """

    prior_mean: PriorSpec = None
    prior_precision: PriorSpec = None
    alpha: Optional[float] = None
    max_iter: int = 300
    tol: float = 1e-3
    alpha_1: float = 1e-6
    alpha_2: float = 1e-6
    lambda_1: float = 1e-6
    lambda_2: float = 1e-6
    alpha_init: Optional[float] = None
    lambda_init: Optional[float] = None
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        def set_(name: str, value: object) -> None:
            object.__setattr__(self, name, value)  # frozen

        set_("prior_mean", _check_prior(self.prior_mean, "prior_mean", positive=False))
        set_("prior_precision", _check_prior(self.prior_precision, "prior_precision", positive=True))
        for name in ("alpha", "alpha_init", "lambda_init"):
            if getattr(self, name) is not None:
                check_positive_float(getattr(self, name), name)
        for name in ("tol", "alpha_1", "alpha_2", "lambda_1", "lambda_2"):
            check_positive_float(getattr(self, name), name, allow_zero=True)
        check_positive_int(self.max_iter, "max_iter")

    def __repr__(self) -> str:
        def show(v: object) -> str:
            return f"tensor{tuple(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)

        return (
            f"BayesianRidge(prior_mean={show(self.prior_mean)}, prior_precision={show(self.prior_precision)}, "
            f"alpha={self.alpha!r})"
        )

    def _prior(
        self, value: PriorSpec, name: str, shape: tuple[int, int, int], default: float, device: torch.device
    ) -> torch.Tensor:
        """The prior as float64 (B or 1, T or 1, F) on ``device``."""
        b, t, f = shape
        if value is None or isinstance(value, float):
            return torch.full((1, 1, f), default if value is None else value, dtype=torch.float64, device=device)
        value = cast(torch.Tensor, value).to(device, torch.float64)  # a tensor: ``_check_prior`` made it one
        if value.ndim == 0:
            return value.expand(1, 1, f)
        if value.shape == (f,):
            return value.view(1, 1, f)
        if value.ndim == 3 and value.shape[2] == f and value.shape[0] in (1, b) and value.shape[1] in (1, t):
            return value
        raise ValueError(
            f"`{name}` must have shape (F,) = ({f},) or (B, T, F) = {shape} for this fit, got {tuple(value.shape)}"
        )

    def fit_normal(self, ne: Normal, valid: torch.Tensor, anchors: Optional[torch.Tensor] = None) -> Fit:
        """The posterior mean and standard deviation of every fit.

        Args:
            ne: the normal equations, gram (B, F, F) and rhs (B, F, T).
            valid: bool (B, F) the features that exist for each input.
            anchors: (B, 2, T) the outputs of samples 0 and 1 (unused).

        Returns:
            ``Fit`` with coef and coef_std (B, T, F), intercept, score and local_pred (B, T).
        """
        b, f, t = ne.rhs.shape
        dev = ne.gram.device
        one = valid.double()
        gram = ne.gram * one.unsqueeze(2) * one.unsqueeze(1)  # (B, F, F)
        rhs = (ne.rhs * one.unsqueeze(2)).transpose(1, 2)  # (B, T, F)
        mu0 = self._prior(self.prior_mean, "prior_mean", (b, t, f), 0.0, dev) * one.unsqueeze(1)
        prec = self._prior(self.prior_precision, "prior_precision", (b, t, f), 1.0, dev)
        scale = prec.rsqrt() * one.unsqueeze(1)  # D = p^-1/2: whitened coefficients beta' = (beta - mu0) / D
        # targets shifted by the prior mean, y - X mu0: their moments, whitened
        g_mu = (gram.unsqueeze(1) @ mu0.unsqueeze(-1)).squeeze(-1)  # (B, T, F)
        syy = (ne.ss_tot - 2 * (mu0 * rhs).sum(-1) + (mu0 * g_mu).sum(-1)).clamp_min(0)  # (B, T)
        evals, evecs = torch.linalg.eigh(gram.unsqueeze(1) * scale.unsqueeze(-1) * scale.unsqueeze(-2))
        evals = evals.clamp_min(0)  # (B, Tp, F); Tp = 1 unless the precision differs by target
        c = (evecs.transpose(-1, -2) @ (scale * (rhs - g_mu)).unsqueeze(-1)).squeeze(-1)  # (B, T, F) rotated
        sw = ne.weight_sum.unsqueeze(1)  # (B, 1): scikit-learn's sw_sum
        alpha = (
            torch.full_like(syy, self.alpha)
            if self.alpha is not None
            else torch.full_like(syy, self.alpha_init)
            if self.alpha_init is not None
            else 1.0 / (syy / sw + _EPS)
        )
        fixed_lambda = self.prior_precision is not None
        lam = torch.full_like(syy, 1.0 if fixed_lambda or self.lambda_init is None else self.lambda_init)
        if self.alpha is None or not fixed_lambda:
            alpha, lam = self._evidence(evals, evecs, c, syy, sw, alpha, lam, fixed_lambda)
        d = c / (evals + (lam / alpha).unsqueeze(-1))
        beta = mu0 + scale * (evecs @ d.unsqueeze(-1)).squeeze(-1)  # (B, T, F)
        var = (evecs * evecs) @ (1.0 / (alpha.unsqueeze(-1) * evals + lam.unsqueeze(-1))).unsqueeze(-1)
        std = scale * var.squeeze(-1).sqrt()
        fit = finish((beta * one.unsqueeze(1)).transpose(1, 2), ne)
        d = self.dtype
        return Fit(fit.coef.to(d), fit.intercept.to(d), fit.score.to(d), fit.local_pred.to(d), std.to(d))

    def _evidence(
        self,
        evals: torch.Tensor,
        evecs: torch.Tensor,
        c: torch.Tensor,
        syy: torch.Tensor,
        sw: torch.Tensor,
        alpha: torch.Tensor,
        lam: torch.Tensor,
        fixed_lambda: bool,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """scikit-learn's ``BayesianRidge`` loop for every fit at once.

        Alpha and lambda of each fit stop changing at the iteration where its coefficients moved by
        less than ``tol`` (L1).
        """
        active = torch.ones_like(syy, dtype=torch.bool)
        old = None
        for it in range(self.max_iter):
            d = c / (evals + (lam / alpha).unsqueeze(-1))
            coef = (evecs @ d.unsqueeze(-1)).squeeze(-1)  # whitened coefficients, scikit-learn's coef_
            sse = (syy - 2 * (d * c).sum(-1) + (evals * d * d).sum(-1)).clamp_min(0)
            gamma = (alpha.unsqueeze(-1) * evals / (lam.unsqueeze(-1) + alpha.unsqueeze(-1) * evals)).sum(-1)
            if not fixed_lambda:
                lam = torch.where(
                    active, (gamma + 2 * self.lambda_1) / ((coef * coef).sum(-1) + 2 * self.lambda_2), lam
                )
            if self.alpha is None:
                alpha = torch.where(active, (sw - gamma + 2 * self.alpha_1) / (sse + 2 * self.alpha_2), alpha)
            if old is not None:
                active = active & ((old - coef).abs().sum(-1) >= self.tol)
            old = coef
            if (it + 1) % 25 == 0 and not bool(active.any()):
                break
        return alpha, lam
