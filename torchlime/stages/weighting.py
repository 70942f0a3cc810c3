"""Stage 5: proximity weights.

Each perturbed sample gets a weight from its distance to the explained input:
``w = exp(-d² / (2 width²))``, which is exactly lime's ``sqrt(exp(-d² / width²))``.
Distances are measured either on the binary masks (``space="mask"``, lime), or on
the perturbed model inputs (``space="input"``, captum's default): the engine then
calls the kernel's ``distances`` hook on every chunk before the model sees it, so a
kernel may measure anything about the perturbed input (the hybrid text kernel
compares the words of the perturbed and the original text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from torchlime._checks import check_choice, check_positive_float

DISTANCES = ("cosine", "hamming", "euclidean")
SPACES = ("mask", "input")


def mask_distance(masks: torch.Tensor, valid: torch.Tensor, metric: str) -> torch.Tensor:
    """Distance of every mask row from the all-ones row.

    Args:
        masks: bool (..., F).
        valid: bool (..., F) broadcastable to ``masks``: the features that exist.
        metric: "cosine" (1 - sqrt(k/F), sklearn's convention d=1 for an empty row),
            "hamming" ((F-k)/F) or "euclidean" (sqrt(F-k)), k = kept features.

    Returns:
        float32 (...,).

    Example:
        >>> mask_distance(torch.tensor([[True, True], [True, False]]), torch.tensor([True, True]), "hamming")
        tensor([0.0000, 0.5000])
    """
    kept = (masks & valid).sum(-1, dtype=torch.float32)
    total = valid.sum(-1, dtype=torch.float32)
    if metric == "cosine":
        return 1.0 - torch.sqrt(kept / total)
    if metric == "hamming":
        return (total - kept) / total
    return torch.sqrt(total - kept)


def input_distance(perturbed: torch.Tensor, original: torch.Tensor, metric: str) -> torch.Tensor:
    """Distance between flattened perturbed inputs and their originals.

    Args:
        perturbed: (c, ...) a chunk of model inputs.
        original: (c, ...) the explained input of each row (broadcastable).
        metric: "cosine" (1 - cos similarity), "hamming" (fraction of changed
            elements) or "euclidean" (L2 norm of the difference).

    Returns:
        float32 (c,).
    """
    p = perturbed.reshape(perturbed.shape[0], -1).float()
    o = original.reshape(original.shape[0], -1).float().expand_as(p)
    if metric == "cosine":
        sim = torch.nn.functional.cosine_similarity(p, o, dim=1, eps=1e-12)
        return 1.0 - sim
    if metric == "hamming":
        return (p != o).float().mean(1)
    return torch.linalg.vector_norm(p - o, dim=1)


class Kernel:
    """Base class: distances of the samples from their input, and weights from distances.

    ``space="mask"`` kernels get distances from ``mask_distance``; ``space="input"``
    kernels from ``distances(perturbed, inputs, rows)``, called on every chunk of
    perturbed model inputs before the model sees it.
    """

    distance: str = "cosine"
    space: str = "mask"
    scale: float = 1.0

    def distances(self, perturbed: Any, inputs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Distances (c,) of a chunk of perturbed model inputs (c, ...) from their originals.

        Args:
            perturbed: the chunk as the model will see it.
            inputs: (B, ...) the explained inputs, in the same form.
            rows: long (c,) the explained input of every row.
        """
        return input_distance(perturbed, inputs[rows], self.distance)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Weights of distances (any shape), same shape."""
        raise NotImplementedError

    def weigh_masks(self, masks: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Weights (g, r) of mask-space samples: masks bool (g, r, F), valid (g, F). Default:
        ``weigh(mask_distance(...))``; a kernel that needs the coalition itself overrides it."""
        return self.weigh(mask_distance(masks, valid.unsqueeze(1), self.distance))

    def normaliser(self, distances: torch.Tensor, drawn: torch.Tensor) -> Optional[torch.Tensor]:
        """For input-space kernels: a per-input divisor (B,) of the distances (B, S), computed once
        all S distances are known (``drawn`` bool (B, S) marks the samples drawn), or None (the
        default: no normalisation). A kernel that uses it keeps the S distances per input."""
        return None

    def bind(self, features: Any, n_samples: int) -> Kernel:
        """The kernel for one call, given its feature map and S (default: itself)."""
        return self


@dataclass(frozen=True)
class ExponentialKernel(Kernel):
    """``w = exp(-(scale·d)² / (2 width²))`` on a chosen distance.

    Args:
        width: kernel width (lime image: 0.25; lime text: 25 with scale 100; captum: 1.0).
        distance: "cosine", "hamming" or "euclidean".
        space: "mask" (binary interpretable vectors, lime) or "input" (model inputs, captum).
        scale: multiplies the distance first (lime text multiplies cosine by 100).
    """

    width: float = 0.25
    distance: str = "cosine"
    space: str = "mask"
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_positive_float(self.width, "width")
        check_positive_float(self.scale, "scale")
        check_choice(self.distance, "distance", DISTANCES)
        check_choice(self.space, "space", SPACES)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        d = distances * self.scale
        return torch.exp(-(d * d) / (2.0 * self.width * self.width))


@dataclass(frozen=True)
class UniformKernel(Kernel):
    """Every sample weighs 1 (GLIME-style samplers and Kernel-SHAP-style fits)."""

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        return torch.ones_like(distances)
