"""SP-LIME: pick the inputs whose explanations together cover the most important features.

Ribeiro et al. (2016), Algorithm 2, on the device: from the explanation matrix W (B inputs x G global
features, ``explanation_matrix``), the importance of feature j is I_j = sqrt(Σ_i |W_ij|), the coverage
of a set V of inputs c(V) = Σ_j [∃ i ∈ V: W_ij != 0] I_j (``coverage``), and ``submodular_pick`` adds
the input of the largest coverage ``budget`` times (c is submodular and monotone, so the greedy
coverage is at least (1 - 1/e) of the best). Ties: the last of the inputs of equal coverage, as
lime's ``SubmodularPick``.
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from torchlime._util.checks import check_integer, check_positive_int, check_tensor, describe
from torchlime.typing import HasCoef


def feature_values(features: torch.Tensor, values: torch.Tensor, n_features: Optional[int] = None) -> torch.Tensor:
    """The value of every feature of every input (B, F), e.g. the token id of each token.

    ``values`` at the feature's first element in the flattened map (-1 for features an input does
    not have).

    Args:
        features: long (B, ...) feature map, ids 0..F_b-1, negative for no feature (``exp.features``).
        values: integer (B, ...) of the same shape (e.g. ``input_ids``), >= 0.
        n_features: F (default: the largest id + 1).

    Raises:
        TypeError / ValueError: non-integer tensors or mismatched shapes.

    Example:
        >>> feature_values(torch.tensor([[-1, 0, 1, 2, -1]]), torch.tensor([[101, 7, 9, 7, 102]])).tolist()
        [[7, 9, 7]]
    """
    for name, t in (("features", features), ("values", values)):
        check_tensor(t, name)
        check_integer(t, name)
    if features.shape != values.shape or features.ndim < 2:
        raise ValueError(
            f"`features` and `values` must have the same shape (B, ...), got {tuple(features.shape)} "
            f"and {tuple(values.shape)}"
        )
    b = features.shape[0]
    lab = features.reshape(b, -1).long()
    f = int(lab.amax()) + 1 if n_features is None else n_features
    place = torch.arange(lab.shape[1], device=lab.device).expand_as(lab)
    first = torch.full((b, f + 1), lab.shape[1], dtype=torch.long, device=lab.device)
    first.scatter_reduce_(1, torch.where(lab < 0, f, lab), place, "amin")
    first = first[:, :f]
    flat = values.reshape(b, -1).to(lab.device).long()
    return torch.where(first < lab.shape[1], flat.gather(1, first.clamp_max(lab.shape[1] - 1)), -1)


def explanation_matrix(
    explanation: Union[HasCoef, torch.Tensor], feature_ids: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """W (B, G) float64: the coefficients of every input summed over its targets (lime's sum over labels).

    With ``feature_ids`` (B, F) long, they are added into global features 0..G-1 (ids < 0 dropped).

    Args:
        explanation: an ``Explanation`` (its ``coef`` (B, T, F)), or a tensor (B, T, F) or (B, F).
        feature_ids: None (feature f is the same in every input) or long (B, F) global ids.

    Returns:
        Float64 (B, G) the explanation matrix.

    Raises:
        TypeError / ValueError: anything else, or ``feature_ids`` of the wrong shape or device.

    Example:
        >>> explanation_matrix(torch.tensor([[1.0, -2.0], [0.5, 0.0]]), torch.tensor([[3, 0], [0, -1]])).tolist()
        [[-2.0, 0.0, 0.0, 1.0], [0.5, 0.0, 0.0, 0.0]]
    """
    coef: object = getattr(explanation, "coef", explanation)
    if not isinstance(coef, torch.Tensor) or coef.ndim not in (2, 3) or not coef.is_floating_point():
        raise TypeError(
            f"`explanation` must be an Explanation or a float tensor (B, T, F) or (B, F), got {describe(explanation)}"
        )
    w = (coef.sum(1) if coef.ndim == 3 else coef).double()
    if feature_ids is None:
        return w
    check_tensor(feature_ids, "feature_ids")
    check_integer(feature_ids, "feature_ids")
    if feature_ids.shape != w.shape or feature_ids.device != w.device:
        raise ValueError(
            f"`feature_ids` must be a (B, F) = {tuple(w.shape)} tensor on {w.device}, got {describe(feature_ids)}"
        )
    ids = feature_ids.long()
    g = max(int(ids.amax()) + 1, 1)
    out = torch.zeros(w.shape[0], g + 1, dtype=w.dtype, device=w.device)
    return out.scatter_add_(1, torch.where(ids < 0, g, ids), w)[:, :g]


def coverage(w: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """c(V) of the inputs ``picked`` for an explanation matrix W: float64 ().

    Args:
        w: (B, G) the explanation matrix.
        picked: long (k,) the inputs V.

    Example:
        >>> float(coverage(torch.tensor([[1.0, 0.0], [0.0, 4.0]]), torch.tensor([1])))
        2.0
    """
    importance = w.abs().sum(0).sqrt()
    return ((w[picked] != 0).any(0).double() * importance).cumsum(0)[-1]


def submodular_pick(
    explanation: Union[HasCoef, torch.Tensor], budget: int, *, feature_ids: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """SP-LIME's greedy pick of ``budget`` inputs covering the most important features.

    Args:
        explanation: an ``Explanation`` of B inputs (its coef (B, T, F) summed over targets),
            or the matrix as a tensor (B, T, F) or (B, F).
        budget: how many inputs to pick, 1 <= budget <= B.
        feature_ids: None, or long (B, F) global feature ids, -1 for features to ignore. Coverage
            needs features that mean the same thing in every input: tabular columns and the cells of
            a fixed grid (``image.segments.grid``, the audio time x frequency grid, time slots) are
            the same everywhere (None); for tokens, the vocabulary id of every token feature,
            ``feature_values(exp.features, input_ids)`` (a token repeated in one text adds its
            coefficients, like lime's bag of words), for words a word id of your own per word
            feature; superpixels differ from image to image: use a grid, or ids of your own (e.g.
            the cluster of each segment's embedding).

    Returns:
        long (budget,) the picked inputs in the order picked, on the explanation's device.

    Raises:
        TypeError / ValueError: a bad explanation, budget or feature_ids (named, with what came).

    Example:
        >>> w = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 9.0], [1.0, 0.0, 0.0]])
        >>> submodular_pick(w, 2).tolist()
        [1, 0]
    """
    w = explanation_matrix(explanation, feature_ids)
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise TypeError(f"`budget` must be an int in [1, {w.shape[0]}], got {describe(budget)}")
    check_positive_int(budget, "budget")
    if budget > w.shape[0]:
        raise ValueError(f"`budget` must be at most the number of inputs ({w.shape[0]}), got {budget}")
    return _greedy(w, budget)


def _greedy(w: torch.Tensor, budget: int) -> torch.Tensor:
    """The greedy loop of SP-LIME (``budget`` batched steps over all candidates; no host sync)."""
    b = w.shape[0]
    importance = w.abs().sum(0).sqrt()  # (G,)
    nonzero = w != 0
    covered = torch.zeros(w.shape[1], dtype=torch.bool, device=w.device)
    taken = torch.zeros(b, dtype=torch.bool, device=w.device)
    picks = torch.empty(budget, dtype=torch.long, device=w.device)
    last = torch.arange(b - 1, -1, -1, device=w.device)
    for step in range(budget):
        # c(V ∪ {i}) for every candidate i, summed in one sequential order (a scan), so that candidates
        # covering the same features tie exactly (a matrix product may round rows differently)
        cov = ((covered | nonzero).double() * importance).cumsum(1)[:, -1]
        cov = torch.where(taken, -1.0, cov).flip(0)
        i = last[cov.argmax()]  # the last input of the best coverage
        picks[step] = i
        taken[i] = True
        covered |= nonzero[i]
    return picks
