"""``TabularInfo``: what a tabular explanation carries besides its coefficients (the inputs' levels, the bins).

``Tabular.prepare`` builds it; the engine attaches it as ``Explanation.info`` and shows it as plain data
in ``meta["tabular"]`` (which files keep). ``conditions`` reads the record, or rebuilds it from the
plain data of a loaded explanation (``TabularInfo.from_plain``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, get_args

import torch

from torchlime._checks import describe
from torchlime.engine.info import Info

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
        """The D column names (the same for every row), or None where none were given."""
        return None if self.feature_names is None else list(self.feature_names)

    @classmethod
    def from_plain(cls, plain: object) -> TabularInfo:
        """The record from its plain data (``meta["tabular"]``, e.g. of a loaded explanation).

        Args:
            plain: the mapping ``as_plain`` wrote.

        Returns:
            The record; ``levels`` long (B, D) and ``instances`` float64 (B, C), on the CPU.

        Raises:
            ValueError: ``plain`` is not such a mapping (names what came).
        """
        if not isinstance(plain, Mapping) or not set(_FIELDS + ("boundaries", "values")) <= set(plain):
            found = sorted(map(str, plain)) if isinstance(plain, Mapping) else describe(plain)
            raise ValueError(f"`meta['tabular']` must hold the fields of TabularInfo {list(_FIELDS)}, got {found}")
        sampling = plain["sampling"]
        if sampling not in get_args(Sampling):
            raise ValueError(
                f"`meta['tabular']['sampling']` must be one of {list(get_args(Sampling))}, got {sampling!r}"
            )
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
