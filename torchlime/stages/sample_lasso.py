"""The Lasso of B·T fits on their (S, F) samples, by the LARS homotopy: exact, O(S·F) per step, no (F, F).

For ½ ||ỹ - X̃β||² + α ||β||₁ (``stages.sample_space`` scales and centres the samples), the solution β(λ)
is piecewise linear in the penalty λ. The path starts at λ = max_j |X̃_jᵀ ỹ| with β = 0 and the feature of
that correlation active; on the active set A with signs s, β_A moves along d = (X̃_Aᵀ X̃_A)⁻¹ s while every
active correlation c_j = X̃_jᵀ (ỹ - X̃β) equals λ s_j. Each step goes down by the smallest γ at which an
inactive feature's |c_j - γ a_j| reaches λ - γ (a = X̃ᵀ X̃_A d: it joins), an active coefficient reaches 0
(it drops, and may not join again before the active set changes otherwise), or λ reaches α (the fit is
done). A step is one batched operation over every fit and feature, costing two (S, F) products per fit
and one host read; the correlations are recomputed from the residual, not updated.

Degenerate samples (S <= F binary masks have equal columns and exact linear relations between a few
columns) need care. A feature whose column lies in the span of the active ones cannot join: exactly, its
a_j is ±1 and its step 0 / 0 (refused where |1 ∓ a_j| < 1e-7); where rounding lets one through, its
column's squared distance from the active span (under 1e-8 of its squared norm) bars it until the active
set changes. None joins once the active set has the design's rank, so the active Gram stays invertible and
the optimum found has at most rank features (of equal columns, the lowest index: coordinate descent's
choice). The last coefficients are solved again on the final active set and the optimality conditions are
checked (|c_j| <= α outside A, sign(β_j) = s_j inside); a fit that fails them, that the step cap
(32·S + 64) cuts off or whose active Gram is singular is finished by FISTA on the design, warm-started
from where its path stopped.
"""

from __future__ import annotations

import torch

from torchlime.stages.surrogate import fista

__all__ = ["lars_lasso"]

_PARALLEL = 1e-7  # |1 ∓ a_j| below this: the feature's column lies in the active span (it never joins)
_SPANNED = 1e-8  # a column this close to the active span (relative squared distance) is in it
_KKT_SLACK = 1e-6  # relative slack of the optimality check |c_j| <= α (1 + slack)


def _correlations(xt: torch.Tensor, v: torch.Tensor, targets: int) -> torch.Tensor:
    """X̃ᵀ v of every fit: xt (B, F, S) and v (B·T, S, k) -> (B·T, F, k), one batched product."""
    b, f, s = xt.shape
    k = v.shape[2]
    stacked = v.view(b, targets, s, k).permute(0, 2, 1, 3).reshape(b, s, targets * k)
    return (xt @ stacked).view(b, f, targets, k).permute(0, 2, 1, 3).reshape(b * targets, f, k)


def _rank(gram: torch.Tensor) -> torch.Tensor:
    """Long (B,): the numerical rank of each design, from its (S, S) Gram's eigenvalues."""
    evals: torch.Tensor = torch.linalg.eigvalsh(gram)  # torch.linalg is untyped
    noise = evals[:, -1:].clamp_min(0) * gram.shape[-1] * torch.finfo(gram.dtype).eps * 16
    return (evals > noise).sum(1)


def _in_span(xj: torch.Tensor, xa: torch.Tensor, chol: torch.Tensor) -> torch.Tensor:
    """Bool (n,): is each fit's column xj (n, S) in the span of its active columns xa (n, cap, S)?

    The squared distance of xj from that span is ||xj||² - ||L⁻¹ X_A xj||², with L Lᵀ the active Gram.
    """
    proj: torch.Tensor = torch.linalg.solve_triangular(chol, xa @ xj.unsqueeze(-1), upper=False)  # untyped
    norm = (xj * xj).sum(1)
    return norm - (proj * proj).sum((1, 2)) <= _SPANNED * norm


def _grow(*columns: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each (n, cap) tensor with one more column of zeros (False)."""
    return tuple(torch.cat((c, torch.zeros_like(c[:, :1])), 1) for c in columns)


def lars_lasso(
    x: torch.Tensor, y: torch.Tensor, gram: torch.Tensor, alpha: float, max_iter: int, tol: float
) -> torch.Tensor:
    """The Lasso coefficients of every (input, target) fit (module docstring).

    Args:
        x: float64 (B, S, F) the scaled, centred design X̃.
        y: float64 (B, S, T) the scaled, centred outputs ỹ.
        gram: float64 (B, S, S) X̃ X̃ᵀ.
        alpha: the penalty α > 0.
        max_iter: FISTA's iteration cap for the fits the path leaves unchecked.
        tol: FISTA's tolerance on max |Δβ|.

    Returns:
        Float64 (B, T, F) the coefficients.
    """
    b, s, f = x.shape
    t = y.shape[2]
    n, dev, dt = b * t, x.device, x.dtype
    xt = x.transpose(1, 2).contiguous()  # (B, F, S): the features' columns as rows
    of = torch.arange(b, device=dev).repeat_interleave(t)  # the input of every fit
    yn = y.transpose(1, 2).reshape(n, s)
    rank = _rank(gram).repeat_interleave(t)
    inf = torch.tensor(float("inf"), dtype=dt, device=dev)
    c = _correlations(xt, yn.unsqueeze(-1), t)[..., 0]
    lam, first = c.abs().max(1)
    idx, act = first.unsqueeze(1), (lam > alpha).unsqueeze(1)  # (n, cap) active slots
    sgn, beta = c.gather(1, idx).sign(), torch.zeros(n, 1, dtype=dt, device=dev)
    done, stuck = (lam <= alpha) | ~torch.isfinite(lam), torch.zeros(n, dtype=torch.bool, device=dev)
    tied = torch.zeros(n, f + 1, dtype=torch.bool, device=dev)  # barred until the active set changes (f: none)
    rows = torch.arange(n, device=dev)
    for _ in range(32 * s + 64):
        xa = xt[of.unsqueeze(1), idx] * act.unsqueeze(-1)  # (n, cap, S) the active columns
        chol, info = torch.linalg.cholesky_ex(xa @ xa.transpose(1, 2) + torch.diag_embed((~act).to(dt)))
        d = torch.cholesky_solve(torch.where(act, sgn, 0.0).unsqueeze(-1), chol)[..., 0]  # (n, cap)
        stuck = stuck | (~done & ((info > 0) | ~torch.isfinite(d).all(1)))
        done = done | stuck
        d = torch.where(done.unsqueeze(1) | ~act, 0.0, d)
        residual = yn - (xa.transpose(1, 2) @ beta.unsqueeze(-1))[..., 0]
        both = torch.stack((residual, (xa.transpose(1, 2) @ d.unsqueeze(-1))[..., 0]), -1)
        c, a = _correlations(xt, both, t).unbind(-1)  # c = X̃ᵀ r, a = X̃ᵀ X̃_A d: (n, F)
        barred = tied.clone().scatter_(1, torch.where(act, idx, f), True)[:, :f]
        barred = barred | (act.sum(1) >= rank).unsqueeze(1)
        level = lam.unsqueeze(1)
        g_up = torch.where(1 - a > _PARALLEL, (level - c).clamp_min(0) / (1 - a).clamp_min(_PARALLEL), inf)
        g_down = torch.where(1 + a > _PARALLEL, (level + c).clamp_min(0) / (1 + a).clamp_min(_PARALLEL), inf)
        g_join, joiner = torch.minimum(g_up, g_down).masked_fill(barred, inf).min(1)
        ratio = -beta / torch.where(d == 0, 1.0, d)
        g_drop, slot_drop = torch.where(act & (d != 0) & (ratio > 0), ratio, inf).min(1)
        g_stop = (lam - alpha).clamp_min(0)
        gamma = torch.where(done, 0.0, torch.minimum(torch.minimum(g_join, g_drop), g_stop))
        stop = done | (g_stop <= gamma)
        drop = ~stop & (g_drop <= g_join)
        join = ~stop & ~drop
        spanned = join & _in_span(xt[of, joiner], xa, chol)  # a tie that rounding let through: barred instead
        join, gamma = join & ~spanned, torch.where(spanned, 0.0, gamma)
        beta, lam = beta + gamma.unsqueeze(1) * d, lam - gamma
        dropped = torch.zeros_like(act).scatter_(1, slot_drop.unsqueeze(1), drop.unsqueeze(1))
        left = torch.where(drop, idx.gather(1, slot_drop.unsqueeze(1))[:, 0], torch.where(spanned, joiner, f))
        tied = tied & ~(drop | join).unsqueeze(1)
        tied[rows, left] = True  # the feature just dropped may not join at once; a spanned one waits for a change
        act, beta = act & ~dropped, beta.masked_fill(dropped, 0.0)
        done = stop
        finished, grow = torch.stack((done.all(), (join & act.all(1)).any())).tolist()  # one host read a step
        if finished:
            break
        if grow:
            idx, act, beta, sgn = _grow(idx, act, beta, sgn)
        put = torch.zeros_like(act).scatter_(1, (~act).to(torch.uint8).argmax(1, keepdim=True), join.unsqueeze(1))
        now = c.gather(1, joiner.unsqueeze(1)) - gamma.unsqueeze(1) * a.gather(1, joiner.unsqueeze(1))
        idx, sgn = torch.where(put, joiner.unsqueeze(1), idx), torch.where(put, now.sign(), sgn)
        act, beta = act | put, beta.masked_fill(put, 0.0)
    unchecked = stuck | ~done  # stuck, or cut off by the step cap
    return _finish(xt, yn, gram, of, idx, act, sgn, beta, unchecked, alpha, max_iter, tol).view(b, t, f)


def _finish(  # noqa: PLR0913
    xt: torch.Tensor,
    yn: torch.Tensor,
    gram: torch.Tensor,
    of: torch.Tensor,
    idx: torch.Tensor,
    act: torch.Tensor,
    sgn: torch.Tensor,
    beta: torch.Tensor,
    unchecked: torch.Tensor,
    alpha: float,
    max_iter: int,
    tol: float,
) -> torch.Tensor:
    """The active coefficients solved again, the optimality check, and FISTA for the fits that fail it.

    Returns:
        Float64 (n, F) the coefficients of the n = B·T fits.
    """
    n, f, dt = yn.shape[0], xt.shape[1], xt.dtype
    t = n // xt.shape[0]
    xa = xt[of.unsqueeze(1), idx] * act.unsqueeze(-1)
    chol, info = torch.linalg.cholesky_ex(xa @ xa.transpose(1, 2) + torch.diag_embed((~act).to(dt)))
    rhs = (xa @ yn.unsqueeze(-1))[..., 0] - alpha * torch.where(act, sgn, 0.0)
    solved = torch.where(act, torch.cholesky_solve(rhs.unsqueeze(-1), chol)[..., 0], 0.0)
    c = _correlations(xt, (yn - (xa.transpose(1, 2) @ solved.unsqueeze(-1))[..., 0]).unsqueeze(-1), t)[..., 0]
    inside = torch.zeros(n, f + 1, dtype=torch.bool, device=xt.device).scatter_(1, torch.where(act, idx, f), True)
    outside = c.abs().masked_fill(inside[:, :f], 0.0).amax(1)
    signs = (solved * sgn >= -1e-12 * solved.abs().amax(1, keepdim=True)).all(1)
    ok = ~unchecked & (info == 0) & torch.isfinite(solved).all(1) & signs & (outside <= alpha * (1 + _KKT_SLACK))
    kept = torch.where(ok.unsqueeze(1), solved, beta)
    out = torch.zeros(n, f + 1, dtype=dt, device=xt.device).scatter_add_(1, torch.where(act, idx, f), kept)[:, :f]
    bad = (~ok & torch.isfinite(yn).all(1)).nonzero().flatten()  # NaN outputs stay NaN (the engine names them)
    if bad.numel():  # degenerate paths: FISTA on the design from where they stopped
        xb, yb = xt[of[bad]], yn[bad].unsqueeze(-1)  # (m, F, S), (m, S, 1)
        lip: torch.Tensor = torch.linalg.eigvalsh(gram[of[bad]])[:, -1]  # torch.linalg is untyped

        def grad(z: torch.Tensor) -> torch.Tensor:
            return xb @ (xb.transpose(1, 2) @ z - yb)

        lam = torch.full((1, 1, 1), alpha, dtype=dt, device=xt.device)
        step = 1.0 / lip.clamp_min(1e-12).view(-1, 1, 1)
        out[bad] = fista(grad, step, lam, out[bad].unsqueeze(-1), max_iter, tol)[..., 0]
    return out
