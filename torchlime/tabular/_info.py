"""``TabularInfo``: what a tabular explanation carries besides its coefficients (the inputs' levels, the bins).

``Tabular.prepare`` builds it; the engine attaches it as ``Explanation.info`` and shows it as plain data
in ``meta["tabular"]`` (which files keep). ``conditions`` reads the record, or rebuilds it from the
plain data of a loaded explanation (``TabularInfo.from_plain``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

import torch

from torchlime._util.checks import describe
from torchlime.engine.info import Info, check_record

#: how the sample rows were drawn: lime's bins, a normal about the training mean or about each input
Sampling = Literal["discretized", "gaussian", "gaussian_instance"]
_FIELDS = ("sampling", "discretizer", "kernel_width", "feature_names", "levels", "categorical", "instances")


@dataclass(frozen=True, eq=False)
class TabularInfo(Info):
    """The record of a tabular explanation of B rows of D columns (``Explanation.info``).

    Attributes:
        sampling: "discretized" (lime's sampling by bins), "gaussian" (a normal about the training
            mean) or "gaussian_instance" (about each input).
        discretizer: "quartile", "decile" or "entropy": the bins of the continuous columns.
        kernel_width: the width of lime's kernel, or None when the caller's kernel replaced it.
        feature_names: the D column names given, or None.
        levels: long (B, D) every input's level per column: its bin (continuous columns), or the
            place of its value among the column's training values (categorical; -1: never seen).
        categorical: the C categorical columns, increasing.
        instances: (B, C) the inputs' values in those columns.
        boundaries: D lists, every continuous column's increasing bin boundaries (categorical: empty).
        values: D lists, every categorical column's distinct training values (continuous: empty).
    """

    key: ClassVar[str] = "tabular"
    per_input: ClassVar[tuple[str, ...]] = ("levels", "instances")

    sampling: Sampling
    discretizer: str
    kernel_width: Optional[float]
    feature_names: Optional[list[str]]
    levels: torch.Tensor
    categorical: list[int]
    instances: torch.Tensor
    boundaries: list[list[float]]
    values: list[list[float]]

    # tensors have no single truth value: equality is identity (as for ``Explanation``)
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def feature_labels(self, index: int) -> Optional[list[str]]:
        """Row ``index``'s condition of every column, as lime names them ("petal width <= 0.30", "sex=1").

        Columns are named by ``feature_names``, else "0".."D-1"; continuous columns by their bin when the
        rows were sampled by bins (``sampling="discretized"``), else by their plain name.

        Args:
            index: the row (input).

        Returns:
            D conditions, in column order.
        """
        d = self.levels.shape[-1]
        names = self.feature_names if self.feature_names is not None else [str(f) for f in range(d)]
        return self.conditions(index, names, binned=self.sampling == "discretized")

    def conditions(
        self,
        index: int,
        names: Sequence[str],
        categorical_names: Optional[Mapping[int, Sequence[str]]] = None,
        precision: int = 2,
        binned: bool = True,
    ) -> list[str]:
        """Row ``index``'s condition of every column, in column order (``tabular.conditions`` ranks them).

        Args:
            index: the row (input) of the record.
            names: the D column names.
            categorical_names: column -> names of its values (value v is ``names[int(v)]``), as lime's.
            precision: decimals of the bin boundaries.
            binned: name continuous columns by their bin (lime's discretised explanations); False: by
                their plain name (lime's ``discretize_continuous=False``).

        Returns:
            D conditions: "a <= 0.25", "0.25 < a <= 0.50", "a > 0.75", "color=red", or "a".
        """
        cats = {f: j for j, f in enumerate(self.categorical)}  # column -> its place in "instances"
        levels = self.levels[index].tolist()
        values = self.instances[index].tolist()
        out = []
        for f, name in enumerate(names):
            if f in cats:
                out.append(f"{name}={_category_name(categorical_names, f, values[cats[f]])}")
            elif binned and self.boundaries[f]:
                out.append(bin_condition(name, self.boundaries[f], levels[f], precision))
            else:
                out.append(str(name))
        return out

    @classmethod
    def from_plain(cls, plain: object) -> TabularInfo:
        """The record from its plain data (``meta["tabular"]``, e.g. of a loaded explanation).

        Args:
            plain: the mapping ``as_plain`` wrote.

        Returns:
            The record; ``levels`` long (B, D) and ``instances`` float64 (B, C), on the CPU.

        Raises:
            ValueError: ``plain`` is not such a mapping (names what came).
            StoredDataError: a field of another kind (a ``ValueError`` naming it, what it must be and
                what it holds).
        """
        if not isinstance(plain, Mapping) or not set(_FIELDS + ("boundaries", "values")) <= set(plain):
            found = sorted(map(str, plain)) if isinstance(plain, Mapping) else describe(plain)
            raise ValueError(f"`meta['tabular']` must hold the fields of TabularInfo {list(_FIELDS)}, got {found}")
        check_record(cls, plain, "meta['tabular']")
        sampling = plain["sampling"]
        levels = torch.tensor(plain["levels"], dtype=torch.long)
        instances = torch.tensor(plain["instances"], dtype=torch.float64)
        width = plain["kernel_width"]
        names = plain["feature_names"]
        return cls(
            sampling=sampling,
            discretizer=str(plain["discretizer"]),
            kernel_width=None if width is None else float(width),
            feature_names=None if names is None else [str(n) for n in names],
            levels=levels,
            categorical=[int(c) for c in plain["categorical"]],
            instances=instances,
            boundaries=[[float(v) for v in row] for row in plain["boundaries"]],
            values=[[float(v) for v in row] for row in plain["values"]],
        )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def bin_condition(name: str, boundaries: Sequence[float], level: int, precision: int = 2) -> str:
    """Lime's name of bin ``level`` of a column cut at ``boundaries``.

    Args:
        name: the column's name.
        boundaries: the column's increasing bin boundaries.
        level: the bin, 0 (at most the first boundary) to ``len(boundaries)`` (above the last).
        precision: decimals of the boundaries shown.

    Example:
        >>> [bin_condition("petal length", [1.6, 4.35, 5.1], k) for k in (0, 1, 3)]
        ['petal length <= 1.60', '1.60 < petal length <= 4.35', 'petal length > 5.10']
    """
    q = [f"{b:.{precision}f}" for b in boundaries]
    if level == 0:
        return f"{name} <= {q[0]}"
    if level >= len(q):
        return f"{name} > {q[-1]}"
    return f"{q[level - 1]} < {name} <= {q[level]}"


def _category_name(categorical_names: Optional[Mapping[int, Sequence[str]]], column: int, value: float) -> str:
    if categorical_names is not None and column in categorical_names:
        names = categorical_names[column]
        idx = int(value)
        if float(value).is_integer() and 0 <= idx < len(names):
            return str(names[idx])
    return _number(value)
