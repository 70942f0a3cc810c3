"""``Explanation.coef_se`` of a designed call: its samples drawn again, refitted or summed, when first read.

A call whose sampler reads its own error from nested prefixes (``Sampler.nested_error``: the default factorial
masks) and whose surrogate is a ridge or least-squares fit gets standard errors scaled to the design's own
error (``stages.design_error``, ``design_se``). On the first read of ``coef_se`` the first n_b / 2, n_b / 4 and n_b / 8
samples of every input (n_b its samples: the inputs of an adaptive call differ) are accumulated again, their
masks drawn again (the same bits) with the scores the call kept, and fitted. The call itself adds no
operator; until that read the record keeps the draw, the scores (B, S, T) and the kernel, not the model.
KernelSHAP's paired designs ("leverage", "paired") get the stratified variance of their pairs
(``methods.shap_error``, ``paired_se``), from the same rows drawn again.
"""

from __future__ import annotations

from typing import Optional

import torch

from torchlime.engine.fit import Draw, accumulate_blocks, drawn_blocks
from torchlime.methods.designs import sobol_width
from torchlime.methods.kernel_shap import max_enumerated
from torchlime.methods.shap_designs import ShapDesign
from torchlime.methods.shap_error import PairVariance
from torchlime.stages.design_error import LEVELS, design_factor, least_squares_level, scaled_se
from torchlime.stages.normal import Fit, Normal, NormalAccumulator
from torchlime.stages.standard_error import constrained_eigen, residual_ss, ridge_se
from torchlime.stages.surrogate import Ridge
from torchlime.stages.weighting import Kernel


class Prefixes:
    """What refitting prefixes of a call's samples needs, kept by its ``coef_se`` record until first read.

    Args:
        draw: the call's draw of masks (``fit.Draw``).
        scores: (B, S, T) the scores of every sample.
        kernel: the kernel bound to the call.
        valid: bool (B, F) the features that exist.
        used: the samples each input got.
        dists: (B, S) distances of the samples for an input-space kernel, else None; ``scale`` (B,) their
            per-input divisors, or None.
    """

    def __init__(
        self,
        draw: Draw,
        scores: torch.Tensor,
        kernel: Kernel,
        valid: torch.Tensor,
        used: list[int],
        dists: Optional[torch.Tensor] = None,
        scale: Optional[torch.Tensor] = None,
    ) -> None:
        self.draw, self.scores, self.kernel, self.valid, self.used = draw, scores, kernel, valid, list(used)
        self.space = (dists, scale)

    def normals(self, dtype: torch.dtype) -> list[tuple[Normal, torch.Tensor]]:
        """The normal equations of every input's first ``n_b >> l`` samples (l = 1 .. ``LEVELS``), and their use.

        One pass over the first half of the samples, the smallest prefix first: each larger one adds its rows to
        a copy of the last.

        Args:
            dtype: the dtype of the accumulated products (the surrogate's).

        Returns:
            Per level l = 1 .. ``LEVELS``: ``(normal, usable)``, gram (B, F, F) ..., and bool (B,)
            ``sobol_width(n_b >> l) >= F_b``.
        """
        b, f = self.valid.shape
        dev = self.valid.device
        acc = NormalAccumulator(b, f, self.scores.shape[2], self.scores[:, 0], dtype)
        masks = drawn_blocks(self.draw, f, dev)
        done, out = [0] * b, []
        for level in range(LEVELS, 0, -1):
            sizes = [max(2, n >> level) for n in self.used]
            for lo, hi in sorted(set(zip(done, sizes))):  # the inputs with the same rows to add, together
                rows = [i for i in range(b) if (done[i], sizes[i]) == (lo, hi)]
                active = torch.tensor(rows, dtype=torch.long, device=dev)
                accumulate_blocks(acc, masks, self.scores, self.kernel, self.valid, active, lo, hi, *self.space)
            snapshot = NormalAccumulator(b, f, self.scores.shape[2], self.scores[:, 0], dtype)
            snapshot.set_sums(acc.sums.clone())
            widths = torch.tensor([sobol_width(n) for n in sizes], device=dev)
            out.append((snapshot.normal(), widths >= self.valid.sum(1)))
            done = sizes
        return out[::-1]


def design_se(prefixes: Prefixes, surrogate: Ridge, normal: Normal, sandwich: torch.Tensor) -> torch.Tensor:
    """Float64 (B, T, F): the standard errors of a designed fit (``stages.design_error``).

    Args:
        prefixes: the call's samples, to refit their prefixes.
        surrogate: the call's ridge (or least-squares) surrogate.
        normal: the normal equations of the call's fit.
        sandwich: (B, T, F) its sandwich standard errors (``Ridge.coef_se``).
    """
    valid = prefixes.valid
    chain = [least_squares_level(normal, valid, torch.ones_like(valid[:, 0]))]
    chain += [least_squares_level(ne, valid, usable) for ne, usable in prefixes.normals(surrogate.dtype)]
    coef = surrogate.solve(normal, valid).transpose(1, 2)
    var = ridge_se(normal, residual_ss(normal, coef), valid, surrogate.alpha) ** 2  # the sandwich's variance part
    return scaled_se(sandwich, var, design_factor(chain, valid))


def paired_se(
    prefixes: Prefixes, fit: Fit, normal: Normal, design: ShapDesign, independent: torch.Tensor
) -> torch.Tensor:
    """Float64 (B, T, F): the standard errors of KernelSHAP under a paired design (``methods.shap_error``).

    The pairs' rows are drawn again (the same bits) and weighed by the call's kernel, in blocks.

    Args:
        prefixes: the call's samples (every input got S = ``prefixes.used[0]``).
        fit: the call's constrained fit, coef (B, T, F) and intercept (B, T).
        normal: its normal equations, with the uncentred moments.
        design: "leverage" or "paired".
        independent: (B, T, F) the independent-draws estimate (``KernelShapRegression.coef_se``).
    """
    valid = prefixes.valid
    (b, f), n = valid.shape, prefixes.used[0]
    evecs, inv = constrained_eigen(normal, valid)
    acc = PairVariance(fit.coef, fit.intercept, evecs, inv, valid, n, design)
    every = torch.arange(b, device=valid.device)
    blocks = drawn_blocks(prefixes.draw, f, valid.device)
    # rows 2 .. end - 1: the pairs (FIT_BLOCK is even: every block holds whole pairs); none to draw again when
    # every input was enumerated (all it has is the rounding)
    end = 2 + 2 * ((n - 2) // 2) if f > max_enumerated(n) else 2
    masks, weights = accumulate_blocks(None, blocks, prefixes.scores, prefixes.kernel, valid, every, 2, end, keep=True)
    s0 = 2
    for z, w in zip(masks, weights):
        acc.add(z, w, prefixes.scores[:, s0 : s0 + z.shape[1]])
        s0 += z.shape[1]
    return acc.se(independent)
