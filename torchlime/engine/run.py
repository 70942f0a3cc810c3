"""Step 3 of an explanation: the chunked forward passes and the accumulated normal equations.

The B unperturbed inputs and every input's samples go through the model once each, in chunks
(``rows.Run``); with ``n_samples="auto"`` further rounds double the samples of the inputs whose
explanation is not settled yet (``methods.adaptive``), reusing every earlier sample. An
``ExponentialKernel(width="auto")`` gets its width from the pass's samples before they are fitted
(``fit.choose_width``: one more host synchronisation).
"""

from __future__ import annotations

import time
from typing import NamedTuple, Optional

import torch

from torchlime.engine.fit import choose_width, fit_samples
from torchlime.engine.plan import Plan
from torchlime.engine.rows import RowOrder, Run, ready
from torchlime.engine.sample_fit import check_sample_space
from torchlime.methods.lime_precision import Earlier
from torchlime.stages.surrogate import Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, mask_distance


class Passes(NamedTuple):
    """What ``run_passes`` leaves besides the ``Run``'s state: samples per input and when it ended.

    Attributes:
        used: samples each input got (host ints: S, or fewer with ``n_samples="auto"``).
        finished: ``time.perf_counter()`` after the last forward pass.
        graph: with ``accelerate="cuda_graphs"``, how the passes ran (``RunRecord.cuda_graph``), else None.
    """

    used: list[int]
    finished: float
    graph: Optional[str] = None


def run_passes(plan: Plan) -> Passes:
    """Score every row of the call and accumulate its normal equations (rounds for ``n_samples="auto"``).

    Args:
        plan: the call, ready to run.

    Returns:
        The samples each input got, and when the passes ended.

    Raises:
        ValueError: a kernel that normalises by all of an input's distances, or whose width is "auto", with
            ``n_samples="auto"``; either "auto" with a sample-space surrogate; and what the forward stage
            raises (outputs of the wrong shape or width).
    """
    s, run = plan.settings, plan.run
    adaptive, n_samples, batch, dev = s.adaptive, s.n_samples, s.inputs.shape[0], s.inputs.device
    everyone = range(batch)
    first = min(adaptive.start, n_samples) if adaptive else n_samples
    auto = run.kernel if isinstance(run.kernel, ExponentialKernel) and run.kernel.auto else None
    if auto is not None and adaptive is not None:  # refused before any model call
        raise ValueError(
            f"`kernel` {auto!r} chooses its width from all the samples of the call: it needs an int n_samples, "
            f"not 'auto'"
        )
    check_sample_space(s.surrogate, adaptive is not None, auto is not None)  # refused before any model call
    run.forward(RowOrder(everyone, 0, first, dev))
    if run.dists is not None:  # kernels normalised by all S distances of an input (e.g. max-normalised)
        run.scale = run.kernel.normaliser(run.dists, torch.ones_like(run.dists, dtype=torch.bool))
        if run.scale is not None and adaptive is not None:
            raise ValueError(
                f"`kernel` {run.kernel!r} normalises by all of an input's distances: it needs an int "
                f"n_samples, not 'auto'"
            )
    if auto is not None:  # width="auto": chosen from these samples before they are fitted
        run.kernel = _choose_width(run, auto, s.surrogate, first)
    run.accumulate(everyone, 0, first)
    used = [first] * batch  # samples per input (host ints)
    if adaptive:  # rounds: double the samples of the inputs not settled yet
        active, s_cur = list(everyone), first
        alpha = getattr(s.surrogate, "alpha", 0.0) if isinstance(s.surrogate, Ridge) else 0.0
        earlier = _first_half(run, s.surrogate, first) if adaptive.needs_earlier else None
        while s_cur < n_samples:
            normal = ready(run.acc, "the normal equations").normal()
            fit = s.surrogate.fit_normal(normal, plan.fmap.valid, anchors=ready(run.scores, "the scores")[:, :2])
            settled = adaptive.stable(normal, fit, plan.fmap.valid, alpha, earlier, s_cur).tolist()
            earlier = None if earlier is None else Earlier(fit.coef, s_cur)  # the next round compares with this one
            active = [a for a in active if not settled[a]]
            if not active:
                break
            s_next = min(2 * s_cur, n_samples)
            run.forward(RowOrder(active, s_cur, s_next, dev))
            run.accumulate(active, s_cur, s_next)
            for a in active:
                used[a] = s_next
            s_cur = s_next
    return Passes(used, time.perf_counter())


def _first_half(run: Run, surrogate: Surrogate, n: int) -> Earlier:
    """The fit of every input's first n // 2 samples, which the "lime" rule compares the first round's fit with.

    Fitted from the pass's masks and scores as ``Explanation.refit`` fits kept samples (``fit.fit_samples``).
    """
    half = max(1, n // 2)
    masks = _first_masks(run, half)
    dists = None if run.dists is None else run.dists[:, :half]
    scores = ready(run.scores, "the scores")[:, :half]
    _, fit, _ = fit_samples(masks, scores, run.kernel, surrogate, run.fmap.valid, dists, run.scale)
    return Earlier(fit.coef, half)


def _first_masks(run: Run, n: int) -> torch.Tensor:
    """Bool (B, n, F): every input's first n masks, the pass's own (``Run.mask_blocks``)."""
    every = torch.arange(run.batch, device=run.device)
    return run.mask_blocks(range(run.batch), 0, n)(every, 0, 0, n)


def _choose_width(run: Run, kernel: ExponentialKernel, surrogate: Surrogate, n: int) -> ExponentialKernel:
    """``width="auto"``: the kernel with the width chosen from the call's n samples (``fit.choose_width``)."""
    masks = _first_masks(run, n)
    valid = run.fmap.valid
    dists = mask_distance(masks, valid.unsqueeze(1), kernel.distance) if run.dists is None else run.dists
    scores = ready(run.scores, "the scores")
    target_valid = None if run.bound is None else run.bound.valid
    return choose_width(kernel, masks, scores, dists, valid, surrogate, target_valid)
