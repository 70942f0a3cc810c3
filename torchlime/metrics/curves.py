"""Deletion, insertion and region-perturbation (MoRF / LeRF) curves of explanations.

For every input b and target t, the features are ordered by the explanation's coefficient
``coef[b, t]`` (each target its own order; ties: lower feature index first; padded features
never move) and changed a number at a time:

* deletion: start from the input, hide the top n features (the explanation's fill);
* insertion: start from everything hidden, reveal the top n features;
* region perturbation: deletion in the order of decreasing ("morf", most relevant first) or
  increasing ("lerf", least relevant first) coefficient.

Step j changes n_bj features: n_bj = j for j = 0..F_b with ``steps=None`` (one feature per
step; inputs with fewer features than F = max F_b repeat their last point, with zero width),
or n_bj = round(j F_b / steps) (halves up) for j = 0..steps. The curve y_btj is the model's
score of target t (softmax probabilities with ``softmax=True``) after step j, at the fraction
x_bj = n_bj / F_b of features changed. The rows of all inputs, targets and steps go through the
model in one chunked pass, perturbed exactly as the explanation perturbed its inputs.

``explanation`` may also be a plain attribution tensor (captum's, a Grad-CAM map), per element or
(B, F) with ``features=``, for the output column ``target=`` (``metrics.attributions``): its
features are hidden as a blend with ``baseline`` (default 0).
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Union

import torch
from typing_extensions import Unpack

from torchlime._util.argdocs import with_args
from torchlime._util.checks import check_choice
from torchlime.metrics._common import (
    Scoring,
    check_bool,
    check_explanation,
    check_optional_int,
    feature_ranks,
    invalid_to_nan,
    target_columns,
    trapezoid,
)
from torchlime.metrics._options import AS_IN_DELETION, ScoreOptions, scoring
from torchlime.metrics._replay import perturbed, score_masks
from torchlime.metrics.attributions import AttributionTarget, plain
from torchlime.stages.forward.model import Model
from torchlime.stages.perturb.fills import BaselineSpec


class Curves(NamedTuple):
    """Scores along a deletion / insertion / region-perturbation path.

    Attributes:
        score: (B, T) the curve's summary (AUC, or AOPC for ``region_perturbation``).
        curves: (B, T, P) target scores after each step (P = steps + 1, or F + 1).
        x: (B, P) fraction of features changed at each step.
    """

    score: torch.Tensor
    curves: torch.Tensor
    x: torch.Tensor


def feature_curves(
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    reveal: bool,
    descending: bool,
    baseline: Optional[BaselineSpec],
    steps: Optional[int],
    run: Scoring,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Curves (B, T, P), fractions x (B, P) and the last step L_b (B,) of every input.

    ``reveal``: insertion (features shown in order) instead of deletion (hidden in order);
    ``descending``: order by decreasing coefficient (else increasing); ``run``: the metric's options.
    """
    steps = check_optional_int(steps, "steps")
    setup = perturbed(model, inputs, explanation, baseline)
    exp = check_explanation(explanation)  # checked by ``perturbed``: an Explanation
    p = setup.perturbation
    dev = p.inputs.device
    coef, target = exp.coef.to(dev), target_columns(exp).to(dev)
    nf = p.n_features.to(dev)
    valid = torch.arange(p.f_max, device=dev) < nf.unsqueeze(1)
    ranks = feature_ranks(coef, valid, descending)  # (B, T, F)
    n_points = (p.f_max if steps is None else steps) + 1
    j = torch.arange(n_points, device=dev).unsqueeze(0)
    if steps is None:
        changed = torch.minimum(j, nf.unsqueeze(1))  # (B, P)
        last = nf
    else:
        changed = (2 * j * nf.unsqueeze(1) + steps) // (2 * steps)  # round(j F_b / steps), halves up
        last = torch.full_like(nf, steps)
    per_input = coef.shape[1] * n_points

    def masks_of(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        first = ranks[b, s // n_points] < changed[b, s % n_points].unsqueeze(1)  # the top n features
        return first if reveal else ~first

    def take(scores: torch.Tensor, b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return scores.gather(1, target[b, s // n_points].unsqueeze(1))

    out = score_masks(setup, per_input, masks_of, take, 1, run)
    curves = out.view(coef.shape[0], coef.shape[1], n_points)
    return curves, changed.float() / nf.unsqueeze(1).float(), last


def _auc(
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    reveal: bool,
    baseline: Optional[BaselineSpec],
    steps: Optional[int],
    return_curves: bool,
    run: Scoring,
) -> Union[torch.Tensor, Curves]:
    check_bool(return_curves, "return_curves")
    curves, x, _ = feature_curves(
        model, inputs, explanation, reveal=reveal, descending=True, baseline=baseline, steps=steps, run=run
    )
    auc = invalid_to_nan(trapezoid(curves, x.unsqueeze(1)), check_explanation(explanation))
    return Curves(auc, curves, x) if return_curves else auc


def deletion(
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    baseline: Optional[BaselineSpec] = None,
    steps: Optional[int] = None,
    return_curves: bool = False,
    **options: Unpack[ScoreOptions],
) -> Union[torch.Tensor, Curves]:
    """Deletion AUC: hide features in order of decreasing coefficient; the area under the target score.

    ``AUC_bt = Σ_j (x_b,j+1 - x_bj) (y_btj + y_bt,j+1) / 2`` over x in [0, 1] (the trapezoid;
    the width is 1, so it is the mean height): the raw target score, not normalised by
    anything else. Lower is better (the score falls fast when the top features go).
    See the module docstring for the steps and the curves.

    Args:
        model: the model the explanation explained (the user's; the front door's wrapper is
            applied from the recorded perturbation).
        inputs: (B, ...) the explained inputs.
        explanation: their ``Explanation``, or a plain attribution tensor: per element (B, *shape), or
            broadcastable to ``inputs`` (e.g. (B, 1, H, W): one feature per pixel), or (B, F) per feature
            with ``features`` (``metrics.attributions``). Each element is then its own feature: for large
            inputs pass ``steps`` (step j hides round(j F / steps) elements).
        features: (B or 1, ...) integer feature map of a per-feature attribution tensor (ids 0..F-1;
            negative: no feature); None for an ``Explanation`` or per-element attributions.
        target: the output column a plain attribution tensor explains: an int, a long (B,) tensor or
            None (each input's top class); None for an ``Explanation``.
        baseline: None (the explanation's own fill; 0 for a plain tensor) or a fill
            (``torchlime.stages.perturb.fills``; text perturbations, which delete or replace tokens, ignore
            it). An explanation without its perturbation (loaded from a file) is perturbed as the plain
            blend ``where(kept, inputs, baseline)`` over ``explanation.features`` (default fill 0), with
            the model called on it directly: no fused normalisation, token packing or inverse STFT.
        steps: None (one feature per step) or the number of evenly spaced steps.
        return_curves: also return the curves and the x positions.
        **options: how the rows are scored (``metrics.ScoreOptions``: ``batch_size``, ``output``,
            ``softmax``, ``progress``).

    Returns:
        (B, T) AUC, or ``Curves(score, curves (B, T, P), x (B, P))`` with ``return_curves``.

    Raises:
        TypeError / ValueError: bad arguments (named), inputs of another batch size, a
            perturbation that cannot be reused.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(3, 8), torch.arange(8).view(1, 8) // 2
        >>> exp = torchlime.explain(model, x, feats, n_samples=64)
        >>> deletion(model, x, exp).shape
        torch.Size([3, 1])
        >>> deletion(model, x, exp, steps=2, return_curves=True).curves.shape
        torch.Size([3, 1, 3])
    """
    run = scoring(options, explanation, "deletion")
    explanation, baseline = plain(model, inputs, explanation, features, target, baseline, run.output)
    return _auc(model, inputs, explanation, False, baseline, steps, return_curves, run)


@with_args(AS_IN_DELETION)
def insertion(
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    baseline: Optional[BaselineSpec] = None,
    steps: Optional[int] = None,
    return_curves: bool = False,
    **options: Unpack[ScoreOptions],
) -> Union[torch.Tensor, Curves]:
    """Insertion AUC: reveal features in order of decreasing coefficient, starting from all hidden.

    Same arguments, curves and area as ``deletion`` (``AUC_bt = Σ_j (x_b,j+1 - x_bj)
    (y_btj + y_bt,j+1) / 2``, the raw target score); higher is better.

    Returns:
        (B, T) AUC, or ``Curves(score, curves (B, T, P), x (B, P))`` with ``return_curves``.

    Raises:
        TypeError / ValueError: as ``deletion``.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(3, 8), torch.arange(8).view(1, 8) // 2
        >>> exp = torchlime.explain(model, x, feats, n_samples=64)
        >>> insertion(model, x, exp, baseline=0.5).shape
        torch.Size([3, 1])
    """
    run = scoring(options, explanation, "insertion")
    explanation, baseline = plain(model, inputs, explanation, features, target, baseline, run.output)
    return _auc(model, inputs, explanation, True, baseline, steps, return_curves, run)


@with_args(AS_IN_DELETION)
def region_perturbation(  # noqa: D417 (the other arguments: AS_IN_DELETION)
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    order: str = "morf",
    steps: Optional[int] = None,
    baseline: Optional[BaselineSpec] = None,
    **options: Unpack[ScoreOptions],
) -> Curves:
    """Region perturbation (Samek et al. 2017): hide features most- or least-relevant first; AOPC.

    ``AOPC_bt = 1 / (L_b + 1) Σ_{k=0..L_b} (y_bt0 - y_btk)``: the mean drop of the target score
    over the L_b + 1 points of the curve (k = 0 adds 0), L_b = F_b with ``steps=None`` (one
    feature per step), else ``steps``. With "morf" a large AOPC is good (the score falls fast);
    with "lerf" a small one is.

    Args:
        order: "morf" (decreasing coefficient) or "lerf" (increasing coefficient).

    Returns:
        ``Curves(score=AOPC (B, T), curves (B, T, P), x (B, P))``.

    Raises:
        TypeError / ValueError: as ``deletion``, and an unknown ``order``.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(3, 8), torch.arange(8).view(1, 8) // 2
        >>> exp = torchlime.explain(model, x, feats, n_samples=64)
        >>> region_perturbation(model, x, exp, order="lerf").score.shape
        torch.Size([3, 1])
    """
    check_choice(order, "order", ("morf", "lerf"))
    run = scoring(options, explanation, "region_perturbation")
    explanation, baseline = plain(model, inputs, explanation, features, target, baseline, run.output)
    curves, x, last = feature_curves(
        model, inputs, explanation, reveal=False, descending=order == "morf", baseline=baseline, steps=steps, run=run
    )
    points = torch.arange(curves.shape[-1], device=curves.device) <= last.unsqueeze(1)  # (B, P)
    drops = (curves[..., :1] - curves) * points.unsqueeze(1)
    aopc = drops.sum(-1) / (last.unsqueeze(1) + 1).float()
    return Curves(invalid_to_nan(aopc, check_explanation(explanation)), curves, x)
