"""lime's tabular proximity: euclidean distance on the scaled data, exponential kernel.

lime measures a sample's distance from the instance on its *scaled* row: continuous columns
as ``(x - mean) / scale`` and categorical (and, with discretised sampling, every) column as
the binary "same level as the instance". So

    d² = Σ_continuous ((x'_f - x_f) / scale_f)² + Σ_categorical [x'_f ≠ x_f],
    w  = sqrt(exp(-d² / width²)) = exp(-d² / (2 width²)),   width = 0.75 √D by default.

With discretised sampling every column is binary and d² is the number of columns that left
the instance's level: the engine's mask-space euclidean ``ExponentialKernel`` computes it.
With Gaussian sampling the continuous part needs the sampled values: ``ScaledEuclideanKernel``
is an input-space kernel whose ``distances`` hook reads every chunk before the model does.
"""

from __future__ import annotations

import math

import torch

from torchlime._util.checks import check_positive_float
from torchlime.stages.weighting import Kernel


def default_width(n_columns: int) -> float:
    """Lime's tabular kernel width ``0.75 √D``.

    Args:
        n_columns: D, the number of columns.

    Example:
        >>> default_width(16)
        3.0
    """
    return 0.75 * math.sqrt(n_columns)


class ScaledEuclideanKernel(Kernel):
    """``exp(-d² / (2 width²))`` on lime's scaled-data euclidean distance (input space).

    Args:
        width: kernel width.
        scale: (D,) column scales.
        categorical: bool (D,) columns compared by equality (distance 1 when they differ).

    Example:
        >>> k = ScaledEuclideanKernel(1.0, torch.tensor([2.0, 1.0]), torch.tensor([False, True]))
        >>> k.distances(torch.tensor([[2.0, 5.0]]), torch.tensor([[0.0, 4.0]]), torch.tensor([0])).tolist()
        [1.4142135381698608]
    """

    distance = "euclidean"
    space = "input"

    def __init__(self, width: float, scale: torch.Tensor, categorical: torch.Tensor) -> None:
        self.width = check_positive_float(width, "kernel_width")
        self.column_scale, self.categorical = scale, categorical

    def distances(self, perturbed: torch.Tensor, inputs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        diff = perturbed.double() - inputs[rows].double()
        scale = self.column_scale.to(diff)
        sq = torch.where(self.categorical.to(diff.device), (diff != 0).double(), (diff / scale) ** 2)
        return sq.sum(1).sqrt().float()

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        return torch.exp(-(distances * distances) / (2.0 * self.width * self.width))

    def __repr__(self) -> str:
        return f"ScaledEuclideanKernel(width={self.width:.4g})"
