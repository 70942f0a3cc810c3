"""Readable tabular explanations: every column's condition on the instance, ranked by weight.

A column's interpretable feature is "the value stays in the instance's level", so its
condition is that level, written as lime writes it (``discretize.BaseDiscretizer.names``):

    "petal length <= 1.60"              the first bin (x <= q_1)
    "1.60 < petal length <= 4.35"       a middle bin (q_k < x <= q_{k+1})
    "petal length > 5.10"               the last bin
    "color=red"                          a categorical column (``categorical_names``)

``conditions`` returns, per input, the (condition, weight) pairs of one target ranked by
|weight| (lime's ``as_list`` order).
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from torchlime._util.checks import check_positive_int, describe
from torchlime.engine.explanation import Explanation
from torchlime.tabular._info import TabularInfo, bin_condition

__all__ = ["bin_condition", "conditions"]


def conditions(
    explanation: Explanation,
    feature_names: Optional[Sequence[str]] = None,
    *,
    categorical_names: Optional[Mapping[int, Sequence[str]]] = None,
    k: Optional[int] = None,
    target_index: int = 0,
    precision: int = 2,
) -> list[list[tuple[str, float]]]:
    """Per input, the (condition, weight) pairs of one target, ranked by |weight|.

    Args:
        explanation: an explanation from ``explain_tabular`` or the ``Tabular`` modality (fresh, sliced, or
            saved and loaded).
        feature_names: D column names (default: the call's ``feature_names``, else "0".."D-1").
        categorical_names: column -> names of its values (value v is ``names[int(v)]``), as lime's.
        k: keep the k largest (default: every column).
        target_index: which of the T explained targets (a column of ``explanation.target``).
        precision: decimals of the bin boundaries (lime: 2).

    Returns:
        B lists of ``(condition, weight)``, weights as Python floats.

    Raises:
        ValueError: an explanation without a tabular record (``explanation.info``; saved files keep it as
            ``meta["tabular"]``), names of the wrong length, a bad ``target_index``.

    Example:
        >>> from torchlime.tabular import explain_tabular
        >>> t = torch.linspace(0, 1, 101)
        >>> train = torch.stack((t, t.flip(0), 2 * t), 1)  # quartiles of "a": 0.25, 0.5, 0.75
        >>> model = lambda x: torch.stack((4 * x[:, 0], -4 * x[:, 0]), 1).softmax(1)
        >>> explanation = explain_tabular(model, train[:2], training_data=train, n_samples=300)
        >>> conditions(explanation, ["a", "b", "c"], k=1)[0]  # doctest: +ELLIPSIS
        [('a <= 0.25', ...)]
    """
    tab = _record(explanation)
    b, t, d = explanation.coef.shape
    names = list(feature_names) if feature_names is not None else tab.feature_names or [str(i) for i in range(d)]
    if len(names) != d:
        raise ValueError(f"`feature_names` must hold {d} names (one per column), got {len(names)}")
    if isinstance(target_index, bool) or not isinstance(target_index, int) or not -t <= target_index < t:
        raise ValueError(f"`target_index` must be an int in [0, {t}), got {describe(target_index)}")
    if k is not None:
        check_positive_int(k, "k")
    coef = explanation.coef[:, target_index].double().cpu().tolist()
    out = []
    for i in range(b):
        rows = list(zip(tab.conditions(i, names, categorical_names, precision), coef[i]))
        rows.sort(key=lambda r: -abs(r[1]))
        out.append(rows[:k] if k is not None else rows)
    return out


def _record(exp: Explanation) -> TabularInfo:
    """The explanation's tabular record: ``exp.info``, else rebuilt from a file's stored ``"tabular"`` entry."""
    if isinstance(exp.info, TabularInfo):
        return exp.info
    if not isinstance(exp.stored.get("tabular"), dict):
        raise ValueError(
            "`explanation` must come from torchlime.tabular.explain_tabular or the Tabular modality (its info, a "
            f"TabularInfo, holds the bins), got info {type(exp.info).__name__} and stored entries {sorted(exp.stored)}"
        )
    tab = TabularInfo.from_plain(exp.stored["tabular"])
    if tab.levels.shape[0] != len(exp):
        raise ValueError(
            f"`exp.stored['tabular']` must describe the explanation's {len(exp)} input(s), got the levels of "
            f"{tab.levels.shape[0]} (slice an explanation with exp[i], which slices its record too)"
        )
    return tab
