"""Stability of explanations across seeds (or samplers, kernels, ...): top-k overlap and concordance.

Both take a list of m >= 2 explanations of the same inputs and targets (e.g. the same call
with ``generator=0, 1, ...``) and compare them per input and target, over the valid features.

Any attribution method: the list may hold plain attribution tensors (B, ...) of one shape, each
flattened to one target of E features (every element its own feature); or ``explanations`` may be
``explain_fn(model, inputs) -> attributions`` (Quantus's form) with ``model=`` and ``inputs=``: it is
called ``runs`` times, run i after ``torch.manual_seed(i)`` (inside ``torch.random.fork_rng``: the
caller's random state is kept), which varies methods that draw from torch's global generator
(captum's ``Lime``, ``KernelShap``, ``NoiseTunnel``); one with its own seed must vary it itself.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Union

import torch

from torchlime._util.argdocs import with_args
from torchlime._util.checks import check_positive_int, check_tensor, describe
from torchlime.engine.explanation import Explanation
from torchlime.metrics._common import average_ranks, check_by, invalid_to_nan, ranking_key, top_k_mask
from torchlime.metrics.attributions import flat_record
from torchlime.stages.forward.model import Model

Runs = Union[Sequence[Union[Explanation, torch.Tensor]], Callable[[Model, torch.Tensor], object]]


def _stack(
    explanations: object, model: Optional[Model], inputs: Optional[torch.Tensor], runs: int
) -> list[Explanation]:
    """The explanations, checked: a list of >= 2 with the same shape, feature counts and targets."""
    if callable(explanations) and not isinstance(explanations, (torch.Tensor, Explanation)):
        explanations = _rerun(explanations, model, inputs, runs)
    elif model is not None or inputs is not None:
        raise TypeError("`model` and `inputs` are for an `explanations` that is explain_fn(model, inputs)")
    if not isinstance(explanations, (list, tuple)) or len(explanations) < 2:
        hint = (
            ": a single attribution has no stability; pass m >= 2 runs, or explain_fn(model, inputs) as "
            "`explanations` with model= and inputs= to explain them again"
            if isinstance(explanations, torch.Tensor)
            else ""
        )
        raise ValueError(
            "`explanations` must be a list of at least 2 explanations of the same inputs, got "
            f"{describe(explanations)}{hint}"
        )
    exps = [flat_record(e, f"explanations[{i}]") for i, e in enumerate(explanations)]
    first = exps[0]
    dev = first.coef.device
    for i, e in enumerate(exps[1:], 1):
        same = (
            e.coef.shape == first.coef.shape
            and torch.equal(e.n_features.to(dev), first.n_features.to(dev))
            and torch.equal(e.target.to(dev), first.target.to(dev))
        )
        if not same:
            raise ValueError(
                f"`explanations` must explain the same inputs, features and targets: explanations[{i}] "
                f"has coef {tuple(e.coef.shape)}, targets {e.target.tolist()[:4]} and "
                f"{e.n_features.tolist()[:8]} features, explanations[0] {tuple(first.coef.shape)}, "
                f"{first.target.tolist()[:4]} and {first.n_features.tolist()[:8]}"
            )
    return exps


#: the arguments of every stability measure, described once
_RUNS_ARGS = {
    "explanations": "m >= 2 explanations of the same inputs and targets, or attribution tensors (B, ...) of\n"
    "one shape; or ``explain_fn(model, inputs)`` (module docstring).",
    "model": "the model ``explain_fn`` explains (with an ``explain_fn`` only).",
    "inputs": "(B, ...) the inputs ``explain_fn`` explains (with an ``explain_fn`` only).",
    "runs": "m, the calls of ``explain_fn`` (>= 2).",
}


@with_args(_RUNS_ARGS)
def jaccard_topk(  # noqa: D417 (the other arguments: _RUNS_ARGS)
    explanations: Runs,
    k: int,
    *,
    by: str = "value",
    model: Optional[Model] = None,
    inputs: Optional[torch.Tensor] = None,
    runs: int = 3,
) -> torch.Tensor:
    """Mean pairwise Jaccard index of the top-k feature sets.

    ``J_bt = 2 / (m (m - 1)) Σ_{i<j} |K_ibt ∩ K_jbt| / |K_ibt ∪ K_jbt|`` where K_ibt is the set
    of the min(k, F_b) features of largest coefficient (``by="abs"``: magnitude; ties: lower
    feature index first) of target t of input b in explanation i. 1: the same top k every time.

    Args:
        k: size of the top sets.
        by: rank features by "value" (largest coefficient first) or "abs" (largest magnitude first).

    Returns:
        float32 (B, T); NaN on padded targets (``Explanation.target_valid``).

    Raises:
        TypeError / ValueError: bad arguments (named), explanations of different inputs.

    Example:
        >>> import torchlime
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(2, 8), torch.arange(8).view(1, 8)
        >>> exps = [torchlime.explain(model, x, feats, n_samples=200, generator=s) for s in range(3)]
        >>> jaccard_topk(exps, 3).shape
        torch.Size([2, 1])
    """
    exps = _stack(explanations, model, inputs, runs)
    k = check_positive_int(k, "k")
    by = check_by(by)
    dev = exps[0].coef.device
    valid = exps[0].valid
    sets = torch.stack([top_k_mask(ranking_key(e, by).to(dev), valid, k) for e in exps]).float()  # (m, B, T, F)
    inter = torch.einsum("ibtf,jbtf->ijbt", sets, sets)
    size = sets.sum(-1)
    union = size.unsqueeze(1) + size.unsqueeze(0) - inter
    m = len(exps)
    pairs = torch.triu(torch.ones(m, m, dtype=torch.bool, device=dev), diagonal=1)
    return invalid_to_nan((inter / union)[pairs].mean(0), exps[0])


@with_args(_RUNS_ARGS)
def kendall_w(
    explanations: Runs, *, model: Optional[Model] = None, inputs: Optional[torch.Tensor] = None, runs: int = 3
) -> torch.Tensor:
    """Kendall's coefficient of concordance W of the m explanations' feature rankings.

    With r_ibtf the rank (1..F_b, ties averaged) of feature f's coefficient among input b's
    valid features in explanation i, R_btf = Σ_i r_ibtf, n = F_b:

        W_bt = 12 Σ_f (R_btf - m (n + 1) / 2)² / (m² (n³ - n) - m Σ_i T_ibt)

    with the tie correction T_ibt = Σ (t³ - t) over the groups of t tied coefficients. 1: the
    same ranking every time; 0: no agreement. NaN when every explanation ties every feature.

    Returns:
        float32 (B, T); NaN on padded targets (``Explanation.target_valid``).

    Raises:
        TypeError / ValueError: explanations of different inputs.

    Example:
        >>> import torchlime
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(2, 8), torch.arange(8).view(1, 8)
        >>> explain = lambda m, inputs: torchlime.explain(m, inputs, feats, n_samples=500)
        >>> bool((kendall_w(explain, model=model, inputs=x) > 0.9).all())  # three runs, seeds 0, 1, 2
        True
    """
    exps = _stack(explanations, model, inputs, runs)
    dev = exps[0].coef.device
    valid = exps[0].valid.unsqueeze(1)  # (B, 1, F)
    ranks, ties = zip(*(average_ranks(e.coef.to(dev), valid) for e in exps))
    m = len(exps)
    total = torch.stack(ranks).sum(0)  # (B, T, F)
    n = exps[0].n_features.to(dev).double().view(-1, 1)
    s = (((total - m * (n.unsqueeze(-1) + 1) / 2) ** 2) * valid).sum(-1)
    denom = m * m * (n**3 - n) - m * torch.stack(ties).sum(0)
    return invalid_to_nan((12 * s / denom).float(), exps[0])


def _rerun(explain_fn: Callable[..., object], model: object, inputs: object, runs: object) -> list[object]:
    """``runs`` results of ``explain_fn(model, inputs)``, run i after ``torch.manual_seed(i)`` (state restored)."""
    m = check_positive_int(runs, "runs", minimum=2)
    if model is None or not callable(model):
        raise TypeError(f"`model` must be the model `explain_fn(model, inputs)` explains, got {describe(model)}")
    x = check_tensor(inputs, "inputs")
    devices = [x.device] if x.device.type == "cuda" else []
    out = []
    for i in range(m):  # explanation runs, each over all inputs
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(i)
            out.append(explain_fn(model, x))
    return out
