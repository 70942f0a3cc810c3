"""Agreement with known ground truth: recall of gold features in the top k, ROC-AUC against a rationale.

Ground truth is given per feature: a bool (B, F) tensor or B lists of feature indices
(``feature_mask`` turns an element-level mask, such as a text dataset's token rationale, into
one). Features that do not exist (f >= F_b) are never counted.
"""

from __future__ import annotations

from typing import Callable

import torch

from torchlime._util.checks import check_positive_int, check_tensor, describe
from torchlime.engine.explanation import Explanation
from torchlime.metrics._common import (
    FeatureSet,
    average_ranks,
    check_by,
    check_explanation,
    feature_set,
    ranking_key,
    top_k_mask,
)

#: ``torch.broadcast_shapes``, typed (torch leaves it unannotated)
_broadcast_shapes: Callable[..., torch.Size] = torch.broadcast_shapes


def feature_mask(explanation: Explanation, mask: torch.Tensor) -> torch.Tensor:
    """Bool (B, F): the features with at least one element inside ``mask``.

    Args:
        explanation: an ``Explanation``.
        mask: bool (B, *shape), broadcastable with the feature map ``explanation.features``
            (e.g. a token rationale (B, L) for token features).

    Raises:
        TypeError / ValueError: a mask that is not bool or does not fit the feature map.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> exp = torchlime.explain(model, torch.rand(1, 8), torch.arange(8).view(1, 8) // 2, n_samples=32)
        >>> feature_mask(exp, torch.tensor([[False, True] + [False] * 6])).tolist()
        [[True, False, False, False]]
    """
    exp = check_explanation(explanation)
    check_tensor(mask, "mask")
    b, _, f = exp.coef.shape
    labels = exp.features.to(exp.coef.device)
    if mask.dtype != torch.bool or mask.ndim != labels.ndim or mask.shape[0] != b:
        raise ValueError(
            f"`mask` must be bool ({b}, ...) with the dims of the feature map "
            f"{tuple(labels.shape)}, got {describe(mask)}"
        )
    try:
        shape = _broadcast_shapes(mask.shape, labels.shape)
    except RuntimeError:
        raise ValueError(
            f"`mask` {tuple(mask.shape)} must broadcast with the feature map {tuple(labels.shape)}"
        ) from None
    lab = labels.expand(shape).reshape(b, -1)
    hit = mask.to(labels.device).expand(shape).reshape(b, -1).long()
    out = torch.zeros(b, f + 1, dtype=torch.long, device=labels.device)
    out.scatter_reduce_(1, torch.where(lab < 0, f, lab), hit, reduce="amax")
    return out[:, :f].bool() & exp.valid


def gold_recall(explanation: Explanation, gold: FeatureSet, k: int, *, by: str = "value") -> torch.Tensor:
    """Fraction of the gold features among the explanation's top k.

    ``recall_bt = |top_k(coef_bt) ∩ G_b| / |G_b|``, top_k the min(k, F_b) features of largest
    coefficient (``by="abs"``: magnitude; ties: lower feature index first). With k = |G_b| it is
    the veracity study's localised recovery. NaN for an input without gold features.

    Args:
        explanation: an ``Explanation``.
        gold: bool (B, F) or B lists of feature indices.
        k: size of the top set.
        by: rank features by "value" (largest coefficient first) or "abs" (largest magnitude first).

    Returns:
        float32 (B, T).

    Raises:
        TypeError / ValueError: bad arguments (named).

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> exp = torchlime.explain(model, torch.rand(2, 8), torch.arange(8).view(1, 8), n_samples=64)
        >>> gold_recall(exp, [[0, 1], [2]], k=8).tolist()
        [[1.0], [1.0]]
    """
    exp = check_explanation(explanation)
    k = check_positive_int(k, "k")
    by = check_by(by)
    g = feature_set(gold, exp, "gold").unsqueeze(1)  # (B, 1, F)
    top = top_k_mask(ranking_key(exp, by), exp.valid, k)
    hits = (top & g).sum(-1).float()
    return hits / g.sum(-1).float()


def token_roc_auc(explanation: Explanation, rationale: FeatureSet, *, by: str = "value") -> torch.Tensor:
    """ROC-AUC of the coefficients as scores of a rationale over the features.

    ``AUC_bt = P(coef_btf > coef_btg) + P(coef_btf = coef_btg) / 2`` over the pairs of a
    rationale feature f and a feature g outside it (valid features only), computed as the
    Mann-Whitney statistic ``(Σ_{f in R} rank_f - |R| (|R| + 1) / 2) / (|R| |not R|)`` with tied
    ranks averaged. NaN for an input whose rationale holds all or none of its features.

    Args:
        explanation: an ``Explanation``.
        rationale: bool (B, F) or B lists of feature indices (``feature_mask`` converts a token
            mask).
        by: "value" (the coefficient) or "abs" (its magnitude) as the score.

    Returns:
        float32 (B, T).

    Raises:
        TypeError / ValueError: an ``explanation`` that is not an ``Explanation``, a ``rationale`` that is not
            a set of its features, a ``by`` other than "value" and "abs" (each named).

    Example:
        >>> import torchlime
        >>> model = lambda x: (x * torch.tensor([3.0, 2.0, 0.0, 0.0, 0.0, 0.0])).sum(1, keepdim=True)
        >>> exp = torchlime.explain(model, torch.ones(2, 6), torch.arange(6).view(1, 6), n_samples=256)
        >>> token_roc_auc(exp, [[0, 1], list(range(6))]).tolist()  # features 0, 1 rank above the others
        [[1.0], [nan]]
    """
    exp = check_explanation(explanation)
    by = check_by(by)
    r = feature_set(rationale, exp, "rationale").unsqueeze(1)  # (B, 1, F)
    valid = exp.valid.unsqueeze(1)
    ranks, _ = average_ranks(ranking_key(exp, by), valid)
    n_pos = r.sum(-1).double()
    n_neg = exp.n_features.to(r.device).double().unsqueeze(1) - n_pos
    u = (ranks * r).sum(-1) - n_pos * (n_pos + 1) / 2
    auc = u / (n_pos * n_neg)
    return torch.where((n_pos > 0) & (n_neg > 0), auc, torch.full_like(auc, float("nan"))).float()
