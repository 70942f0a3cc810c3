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
from torchlime.stages.features import FeatureMap
from torchlime.typing import DistanceName, KernelSpace

DISTANCES: tuple[DistanceName, ...] = ("cosine", "hamming", "euclidean")
SPACES: tuple[KernelSpace, ...] = ("mask", "input")


def mask_distance(masks: torch.Tensor, valid: torch.Tensor, metric: DistanceName) -> torch.Tensor:
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


def input_distance(perturbed: torch.Tensor, original: torch.Tensor, metric: DistanceName) -> torch.Tensor:
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
    norm: torch.Tensor = torch.linalg.vector_norm(p - o, dim=1)  # torch.linalg is untyped
    return norm


class Kernel:
    """Base class: distances of the samples from their input, and weights from distances.

    ``space="mask"`` kernels get distances from ``mask_distance``; ``space="input"``
    kernels from ``distances(perturbed, inputs, rows)``, called on every chunk of
    perturbed model inputs before the model sees it.
    """

    distance: DistanceName = "cosine"
    space: KernelSpace = "mask"
    scale: float = 1.0

    def distances(self, perturbed: Any, inputs: Any, rows: torch.Tensor) -> torch.Tensor:
        """Distances (c,) of a chunk of perturbed model inputs (c, ...) from their originals.

        The chunks are whatever the perturbation builds, so a kernel made for one perturbation narrows
        ``perturbed`` and ``inputs`` to the form it builds (a tensor for text and tabular rows).

        Args:
            perturbed: the chunk as the model will see it: a (c, ...) tensor, or the model's
                arguments with their flat carrier (``packing.PackedArgs``).
            inputs: the B explained inputs, in the same form: (B, ...).
            rows: long (c,) the explained input of every row.

        Returns:
            Float (c,) distances.
        """
        flat = getattr(perturbed, "flat", None)  # several input tensors: their flat carrier (packing.PackedArgs)
        if flat is not None:
            return input_distance(flat, inputs.flat[rows], self.distance)
        return input_distance(perturbed, inputs[rows], self.distance)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Weights of distances.

        Args:
            distances: (...) distances of any shape.

        Returns:
            (...) weights, the same shape.
        """
        raise NotImplementedError

    def weigh_masks(self, masks: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Weights of mask-space samples.

        Default: ``weigh(mask_distance(...))``; a kernel that needs the coalition itself overrides it.

        Args:
            masks: bool (g, r, F) the masks of r samples of g inputs.
            valid: bool (g, F) the features that exist for each input.

        Returns:
            (g, r) weights.
        """
        return self.weigh(mask_distance(masks, valid.unsqueeze(1), self.distance))

    def normaliser(self, distances: torch.Tensor, drawn: torch.Tensor) -> Optional[torch.Tensor]:
        """For input-space kernels: a per-input divisor of the distances, once all S are known.

        The default is None (no normalisation). A kernel that uses it keeps the S distances per input.

        Args:
            distances: (B, S) the distances of every sample.
            drawn: bool (B, S) marks the samples drawn.

        Returns:
            (B,) divisors, or None.
        """
        return None

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> Kernel:
        """The kernel for one call, given its feature map and S (default: itself).

        Args:
            features: the call's relabelled feature map (None where a kernel does not need it).
            n_samples: S, the samples per input.

        Returns:
            The kernel the call weighs its samples with.
        """
        return self


@dataclass(frozen=True)
class ExponentialKernel(Kernel):
    """``w = exp(-(scale·d)² / (2 width²))`` on a chosen distance.

    Attributes:
        width: kernel width (lime image: 0.25; lime text: 25 with scale 100; captum: 1.0).
        distance: "cosine", "hamming" or "euclidean".
        space: "mask" (binary interpretable vectors, lime) or "input" (model inputs, captum).
        scale: multiplies the distance first (lime text multiplies cosine by 100).
    """

    width: float = 0.25
    distance: DistanceName = "cosine"
    space: KernelSpace = "mask"
    scale: float = 1.0

    def __post_init__(self) -> None:
        check_positive_float(self.width, "width")
        check_positive_float(self.scale, "scale")
        check_choice(self.distance, "distance", DISTANCES)
        check_choice(self.space, "space", SPACES)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """``exp(-(scale·d)² / (2 width²))`` of distances (...), the same shape.

        Args:
            distances: (...) distances of any shape.
        """
        d = distances * self.scale
        return torch.exp(-(d * d) / (2.0 * self.width * self.width))


@dataclass(frozen=True)
class UniformKernel(Kernel):
    """Every sample weighs 1 (GLIME-style samplers and Kernel-SHAP-style fits)."""

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Ones shaped like distances (...).

        Args:
            distances: (...) distances of any shape.
        """
        return torch.ones_like(distances)
