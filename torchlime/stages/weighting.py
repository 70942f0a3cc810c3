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

from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

import torch

from torchlime import _backend
from torchlime._util.checks import check_choice, check_positive_float, describe
from torchlime.stages.features import FeatureMap
from torchlime.stages.fixed_cost import derived
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
    total = derived("count", lambda: valid.sum(-1, dtype=torch.float32), valid)  # kept with ``valid``
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
        """The kernel the call weighs its samples with, given its feature map and S (default: itself).

        Args:
            features: the call's relabelled feature map (None where a kernel does not need it).
            n_samples: S, the samples per input.
        """
        return self


@dataclass(frozen=True)
class WidthChoice:
    """How ``width="auto"`` chose a width from the samples (``engine.fit.choose_width``).

    Every candidate is fitted on K - 1 folds of the samples and scored on the held-out fold under ONE fixed
    reference weighting (a width's own weighted R² uses a different yardstick per width). The rule: with b
    the candidate of smallest held-out error, the widest candidate whose error is within one standard error
    of b's and whose top-k features agree across the folds at least as well as b's.

    Attributes:
        candidates: the widths tried, ``reference · 2^(i/2)`` for i = -4..4 (narrowest first).
        heldout_error: per candidate, the held-out weighted squared error over the weighted spread of the
            held-out outputs (1 - out-of-sample R²), averaged over targets, inputs and folds.
        heldout_se: per candidate, the standard error of ``heldout_error`` across the folds.
        stability: per candidate, the mean top-k Jaccard index between the K folds' fits.
        reference: the width of the fixed reference weighting: the median scaled distance of the samples.
        chosen: the chosen width (one of ``candidates``).
        folds: K, the number of folds (sample s >= 1 is in fold (s - 1) mod K; sample 0 always fits).
        k: the size of the top-k sets.
    """

    candidates: tuple[float, ...]
    heldout_error: tuple[float, ...]
    heldout_se: tuple[float, ...]
    stability: tuple[float, ...]
    reference: float
    chosen: float
    folds: int
    k: int

    def as_plain(self) -> dict[str, Any]:
        """The record as plain data (what ``meta["width_auto"]`` keeps).

        Returns:
            A dict of lists and numbers, one entry per field.
        """
        return {name: list(v) if isinstance(v, tuple) else v for name, v in self.__dict__.items()}


@dataclass(frozen=True)
class ExponentialKernel(Kernel):
    """``w = exp(-(scale·d)² / (2 width²))`` on a chosen distance.

    ``width="auto"`` chooses the width from the call's own samples after the forward pass, without more
    model calls (``WidthChoice`` says how; ``engine.fit.choose_width``): the explanation's kernel is then
    this kernel with the chosen width, ``meta["kernel"]`` shows it and ``meta["width_auto"]`` the choice.

    Attributes:
        width: kernel width (lime image: 0.25; lime text: 25 with scale 100; captum: 1.0), or "auto".
        distance: "cosine", "hamming" or "euclidean".
        space: "mask" (binary interpretable vectors, lime) or "input" (model inputs, captum).
        scale: multiplies the distance first (lime text multiplies cosine by 100).
        choice: how ``width="auto"`` chose ``width`` (set by the engine), or None.

    Raises:
        TypeError / ValueError: a width that is neither a finite number > 0 nor "auto" (named), and the like.
    """

    width: Union[float, Literal["auto"]] = 0.25
    distance: DistanceName = "cosine"
    space: KernelSpace = "mask"
    scale: float = 1.0
    choice: Optional[WidthChoice] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        width = self.width
        if isinstance(width, bool) or not isinstance(width, (int, float, str)):
            raise TypeError(f"`width` must be a number > 0 or 'auto', got {describe(width)}")
        if width != "auto" and (isinstance(width, str) or not 0 < width < float("inf")):
            raise ValueError(f"`width` must be a finite number > 0 or 'auto', got {width!r}")
        check_positive_float(self.scale, "scale")
        check_choice(self.distance, "distance", DISTANCES)
        check_choice(self.space, "space", SPACES)

    @property
    def auto(self) -> bool:
        """Whether the width is still to be chosen (``width="auto"``)."""
        return self.width == "auto"

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """``exp(-(scale·d)² / (2 width²))`` of distances (...), the same shape.

        Args:
            distances: (...) distances of any shape.

        Raises:
            ValueError: ``width="auto"`` not chosen yet (the engine and ``Explanation.refit`` choose it).
        """
        if isinstance(self.width, str):
            raise ValueError(
                "`width='auto'` is chosen from the samples by the engine (or Explanation.refit) before any "
                "weight is computed; to weigh distances yourself, pass a number width"
            )
        d = distances if self.scale == 1.0 else distances * self.scale  # d * 1.0 is d: no product needed
        return torch.exp((d * d) / -(2.0 * self.width * self.width))  # (-a) / b is exactly a / (-b)

    def weigh_masks(self, masks: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """``weigh(mask_distance(...))`` of mask-space samples in one kernel door (``_backend.mask_weights``).

        Args:
            masks: bool (g, r, F) the masks of r samples of g inputs.
            valid: bool (g, F) the features that exist for each input.

        Returns:
            Float32 (g, r) weights.
        """
        if isinstance(self.width, str):
            return super().weigh_masks(masks, valid)  # raises: the width is chosen before any weight
        return _backend.mask_weights(masks, valid, self.distance, self.scale, self.width)


@dataclass(frozen=True)
class UniformKernel(Kernel):
    """Every sample weighs 1 (GLIME-style samplers and Kernel-SHAP-style fits)."""

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Ones shaped like distances (...).

        Args:
            distances: (...) distances of any shape.
        """
        return torch.ones_like(distances)
