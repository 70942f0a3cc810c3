"""Faithfulness by hiding features: label flips of the top-k and the faithfulness correlation.

Both hide features exactly as the explanation did (its recorded perturbation, or a blend with
``baseline=`` for one loaded from a file) and score every row in one chunked pass. Both also take a
plain attribution tensor with ``features=`` / ``target=``, as ``metrics.deletion`` does.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from typing_extensions import Unpack

from torchlime._util.argdocs import with_args
from torchlime._util.checks import check_positive_int
from torchlime.metrics._common import (
    check_by,
    check_explanation,
    feature_ranks,
    invalid_to_nan,
    ranking_key,
    target_columns,
)
from torchlime.metrics._options import AS_IN_DELETION, RunOptions, ScoreOptions, scoring
from torchlime.metrics._replay import perturbed, score_masks
from torchlime.metrics.attributions import AttributionTarget, plain
from torchlime.stages.forward.model import Model
from torchlime.stages.perturb.fills import BaselineSpec
from torchlime.stages.sampling import Rows, make_key

_SUBSET_STREAM = 16  # random stream of the subsets (the engine's masks use 0-3, its fills 7-10)


@with_args(AS_IN_DELETION)
def label_flip(  # noqa: D417 (the other arguments: AS_IN_DELETION)
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    k: int,
    baseline: Optional[BaselineSpec] = None,
    by: str = "value",
    **options: Unpack[RunOptions],
) -> torch.Tensor:
    """Does hiding the top-k features of a target change the model's predicted class?

    ``flip_bt = argmax f(x_b with the top-k features of target t hidden) != argmax f(x_b)``:
    the veracity study's test. The top k are the min(k, F_b) valid features of largest
    coefficient (``by="abs"``: largest magnitude; ties: lower feature index first).

    Args:
        k: number of features hidden (clamped to each input's F_b).
        by: rank features by "value" (largest coefficient first) or "abs" (largest magnitude first).
        **options: how the rows are scored (``metrics.RunOptions``: ``batch_size``, ``output``,
            ``progress``; the top class needs no ``softmax``).

    Returns:
        bool (B, T).

    Raises:
        TypeError / ValueError: bad arguments (named), as in ``metrics.deletion``.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 3))
        >>> x, feats = torch.rand(2, 8), torch.arange(8).view(1, 8) // 2
        >>> exp = torchlime.explain(model, x, feats, target="top2", n_samples=64)
        >>> label_flip(model, x, exp, k=2).dtype, label_flip(model, x, exp, k=2).shape
        (torch.bool, torch.Size([2, 2]))
    """
    k = check_positive_int(k, "k")
    by = check_by(by)
    run = scoring(options, explanation, "label_flip", softmax=False)
    explanation, baseline = plain(model, inputs, explanation, features, target, baseline, run.output)
    setup = perturbed(model, inputs, explanation, baseline)
    exp = check_explanation(explanation)  # checked by ``perturbed``: an Explanation
    if setup.scorer is not None or exp.target_valid is not None:
        raise ValueError(
            "`explanation` explains a structured target (torchlime.targets): label_flip compares the top class "
            "of the model's outputs, which such targets do not have; use deletion or faithfulness_correlation"
        )
    p = setup.perturbation
    dev = p.inputs.device
    valid = torch.arange(p.f_max, device=dev) < p.n_features.to(dev).unsqueeze(1)
    ranks = feature_ranks(ranking_key(exp, by).to(dev), valid)  # (B, T, F)

    def masks_of(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        hidden = ranks[b, (s - 1).clamp_min(0)] < k  # row 0: the input itself, row 1 + t: target t's top k
        return ~hidden | (s == 0).unsqueeze(1)

    def take(scores: torch.Tensor, b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return scores.argmax(1, keepdim=True).float()

    pred = score_masks(
        setup,
        1 + ranks.shape[1],
        masks_of,
        take,
        1,
        run,
    )[..., 0]  # (B, 1 + T)
    return pred[:, 1:] != pred[:, :1]


@with_args(AS_IN_DELETION)
def faithfulness_correlation(  # noqa: D417, PLR0913
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    n_subsets: int = 128,
    subset_size: Optional[Union[int, float]] = None,
    generator: Union[None, int, torch.Generator] = None,
    baseline: Optional[BaselineSpec] = None,
    **options: Unpack[ScoreOptions],
) -> torch.Tensor:
    """Faithfulness correlation (Bhatt et al. 2020): do the coefficients of a subset predict its effect?

    For n random subsets S_bi of |S| features of input b (the same subsets for all targets),
    ``corr_bt = Pearson_i(Σ_{f in S_bi} coef_btf, y_bt(x_b) - y_bt(x_b with S_bi hidden))``:
    1 for an explanation whose coefficients add up to the effect of hiding features. NaN when
    either side does not vary over the subsets (e.g. |S| = F_b).

    Args:
        n_subsets: n, random subsets per input (>= 2).
        subset_size: |S|: an int (clamped to F_b), a fraction of F_b in (0, 1] (rounded, halves
            up, at least 1), or None: a quarter of F_b (the same rounding).
        generator: int seed or ``torch.Generator`` of the subsets (None: seed 0); the subsets are
            a hash of the seed, the input's index and the subset's, drawn on the device.

    Returns:
        float32 (B, T).

    Raises:
        TypeError / ValueError: bad arguments (named), as in ``metrics.deletion``.

    Example:
        >>> import torchlime
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(2, 8), torch.arange(8).view(1, 8)
        >>> exp = torchlime.explain(model, x, feats, n_samples=500)
        >>> bool((faithfulness_correlation(model, x, exp, n_subsets=32) > 0.99).all())
        True
    """
    n_subsets = check_positive_int(n_subsets, "n_subsets", minimum=2)
    fraction = _check_subset_size(subset_size)
    run = scoring(options, explanation, "faithfulness_correlation")
    explanation, baseline = plain(model, inputs, explanation, features, target, baseline, run.output)
    setup = perturbed(model, inputs, explanation, baseline)
    exp = check_explanation(explanation)  # checked by ``perturbed``: an Explanation
    p = setup.perturbation
    dev = p.inputs.device
    key = make_key(generator, dev)
    nf = p.n_features.to(dev)
    size = (
        nf.clamp_max(subset_size)
        if isinstance(subset_size, int)
        else (nf.double() * fraction + 0.5).floor().long().clamp(1)
    )
    coef, target = exp.coef.to(dev), target_columns(exp).to(dev)
    n_targets = target.shape[1]

    def subsets(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        rows = Rows(key, b, s, nf[b], p.f_max)
        noise = rows.uniform(_SUBSET_STREAM, p.f_max).masked_fill(~rows.valid, 2.0)  # padded features last
        return noise.argsort(-1).argsort(-1) < size[b].unsqueeze(1)

    def masks_of(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return ~subsets(b, s) | (s == 0).unsqueeze(1)  # row 0: the input itself

    def take(scores: torch.Tensor, b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        sums = (coef[b] * subsets(b, s).unsqueeze(1)).sum(-1)  # (c, T)
        return torch.cat((scores.gather(1, target[b]), sums.float()), 1)

    out = score_masks(
        setup,
        1 + n_subsets,
        masks_of,
        take,
        2 * n_targets,
        run,
    ).double()
    drops = out[:, :1, :n_targets] - out[:, 1:, :n_targets]  # (B, n, T)
    sums = out[:, 1:, n_targets:]
    return invalid_to_nan(pearson(sums, drops).float(), exp)


def pearson(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Pearson correlation along dim 1 of (B, n, ...) tensors: Σ a'b' / sqrt(Σ a'² Σ b'²), a' = a - mean(a).

    NaN where either side is constant.

    Example:
        >>> round(float(pearson(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[2.0, 4.0, 7.0]]))), 4)
        0.9934
    """
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    return (a * b).sum(1) / ((a * a).sum(1) * (b * b).sum(1)).sqrt()


def _check_subset_size(subset_size: object) -> float:
    """The fraction of F_b of a None / float ``subset_size`` (an int is checked and kept as given)."""
    if subset_size is None:
        return 0.25
    if isinstance(subset_size, bool) or not isinstance(subset_size, (int, float)):
        raise TypeError(
            f"`subset_size` must be None, an int >= 1 or a fraction in (0, 1], got "
            f"{type(subset_size).__name__} {subset_size!r}"
        )
    if isinstance(subset_size, int):
        check_positive_int(subset_size, "subset_size")
        return 1.0
    if not 0.0 < subset_size <= 1.0:
        raise ValueError(f"`subset_size` as a fraction must be in (0, 1], got {subset_size}")
    return float(subset_size)
