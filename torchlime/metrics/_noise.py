"""The random perturbations of ``infidelity`` and ``max_sensitivity``: ``GaussianNoise`` and ``UniformNoise``.

Both metrics take ``perturbations=``: explicit perturbations (B, n, ...) of the inputs, or the law they
are drawn from. A law draws n perturbations per input on the inputs' device, each element from a hash
of (seed, input, perturbation, element), so the values do not depend on how the rows are split into
calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar, Union

import torch

from torchlime._checks import check_positive_float, check_positive_int, describe
from torchlime.metrics._common import given_perturbations
from torchlime.stages.sampling import Rows
from torchlime.typing import Seed

_NOISE_STREAM = 17  # random streams of the Gaussian perturbations (17 and 18)
_UNIFORM_STREAM = 19  # random stream of the uniform perturbations


def gaussian(key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int, stream: int) -> torch.Tensor:
    """Standard normal float32 (c, width) of rows (input b, perturbation k): Box-Muller of two hashed uniforms."""
    rows = Rows(key, b, k, torch.zeros_like(b), width)
    u1 = 1.0 - rows.uniform(stream, width)  # (0, 1]
    u2 = rows.uniform(stream + 1, width)
    return (-2.0 * u1.log()).sqrt() * torch.cos(2 * torch.pi * u2)


@dataclass(frozen=True)
class GaussianNoise:
    """I ~ N(0, scale²), i.i.d. per element, ``n`` perturbations per input: ``infidelity``'s default.

    Attributes:
        scale: σ (> 0).
        n: perturbations per input.
        generator: int seed or ``torch.Generator`` (None: seed 0).

    Example:
        >>> GaussianNoise(0.2, n=400, generator=7)
        GaussianNoise(scale=0.2, n=400, generator=7)
    """

    scale: float = 0.1
    n: int = 16
    generator: Seed = None

    def __post_init__(self) -> None:
        check_positive_float(self.scale, "GaussianNoise.scale")
        check_positive_int(self.n, "GaussianNoise.n")

    def draw(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Float32 (c, width): perturbation k[i] of input b[i] for each row i, from ``key`` (``make_key``)."""
        return gaussian(key, b, k, width, _NOISE_STREAM) * float(self.scale)


@dataclass(frozen=True)
class UniformNoise:
    """δ ~ U[-radius, radius], i.i.d. per element, ``n`` perturbations per input: ``max_sensitivity``'s default.

    captum's ``sensitivity_max`` defaults: ``radius`` is its ``perturb_radius``, ``n`` its
    ``n_perturb_samples``.

    Attributes:
        radius: r (> 0).
        n: perturbations per input.
        generator: int seed or ``torch.Generator`` (None: seed 0).

    Example:
        >>> UniformNoise(0.1, n=50, generator=1)
        UniformNoise(radius=0.1, n=50, generator=1)
    """

    radius: float = 0.02
    n: int = 10
    generator: Seed = None

    def __post_init__(self) -> None:
        check_positive_float(self.radius, "UniformNoise.radius")
        check_positive_int(self.n, "UniformNoise.n")

    def draw(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Float32 (c, width): perturbation k[i] of input b[i] for each row i, from ``key`` (``make_key``)."""
        u = Rows(key, b, k, torch.zeros_like(b), width).uniform(_UNIFORM_STREAM, width)
        return (2 * u - 1) * float(self.radius)


Noise = TypeVar("Noise", GaussianNoise, UniformNoise)


def perturbation_rows(
    perturbations: object, inputs: torch.Tensor, law: type[Noise]
) -> tuple[int, Union[torch.Tensor, Noise]]:
    """A metric's ``perturbations=``: n per input, and the given perturbations or the law to draw them from.

    Args:
        perturbations: None (the default ``law()``), a ``law``, or explicit perturbations (B, n, *shape).
        inputs: (B, *shape) the inputs perturbed.
        law: the metric's law (``GaussianNoise`` or ``UniformNoise``).

    Returns:
        ``(n, source)``: the given perturbations as (B·n, *shape) in the inputs' device and dtype, or the law.

    Raises:
        TypeError / ValueError: another law or object, or perturbations of the wrong shape (named).
    """
    noise = law() if perturbations is None else perturbations
    if isinstance(noise, law):
        return noise.n, noise
    if not isinstance(noise, torch.Tensor):
        raise TypeError(
            f"`perturbations` must be None, a {law.__name__} or a tensor (B, n, ...) of explicit perturbations, "
            f"got {describe(noise)}"
        )
    return given_perturbations(noise, inputs)
