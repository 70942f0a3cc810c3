"""The random perturbations of ``infidelity`` and ``max_sensitivity``: ``GaussianNoise`` and ``UniformNoise``.

Both metrics take ``perturbations=``: explicit perturbations (B, n, ...) of the inputs, or the law they
are drawn from, either law for either metric (infidelity's default is Gaussian, max-sensitivity's uniform,
as in captum). A law draws n perturbations per input on the inputs' device, each element from a hash
of (seed, input, perturbation, element), so the values do not depend on how the rows are split into
calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Union

import torch

from torchlime._util.checks import check_positive_float, check_positive_int, describe
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


class _Law:
    """What ``GaussianNoise`` and ``UniformNoise`` share: ``n`` draws per input of a law spread by one number."""

    spread: ClassVar[str]  # the field that scales the law's unit draws
    n: int
    generator: Seed

    def __post_init__(self) -> None:
        name = type(self).__name__
        check_positive_float(getattr(self, self.spread), f"{name}.{self.spread}")
        check_positive_int(self.n, f"{name}.n")

    def draw(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Perturbation k[i] of input b[i] for each row i.

        Args:
            key: long (2,) the seed's key (``stages.sampling.make_key(self.generator, device)``).
            b: long (c,) the rows' inputs.
            k: long (c,) the rows' perturbations of their input.
            width: E, the elements of one input.

        Returns:
            Float32 (c, E) on the key's device.
        """
        return self._unit(key, b, k, width) * float(getattr(self, self.spread))

    def _unit(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Float32 (c, width): the draws of the law of spread 1."""
        raise NotImplementedError


@dataclass(frozen=True)
class GaussianNoise(_Law):
    """I ~ N(0, scale²), i.i.d. per element, ``n`` perturbations per input: ``infidelity``'s default.

    Attributes:
        scale: σ (> 0), the standard deviation of every element.
        n: perturbations per input.
        generator: int seed or ``torch.Generator`` (None: seed 0).

    Example:
        >>> GaussianNoise(0.2, n=400, generator=7)
        GaussianNoise(scale=0.2, n=400, generator=7)
    """

    spread: ClassVar[str] = "scale"

    def _unit(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Standard normal float32 (c, width) (``gaussian``)."""
        return gaussian(key, b, k, width, _NOISE_STREAM)

    scale: float = 0.1
    n: int = 16
    generator: Seed = None


@dataclass(frozen=True)
class UniformNoise(_Law):
    """δ ~ U[-radius, radius], i.i.d. per element, ``n`` perturbations per input: ``max_sensitivity``'s default.

    Attributes:
        radius: r (> 0), captum's ``perturb_radius`` (its default 0.02).
        n: perturbations per input, captum's ``n_perturb_samples`` (its default 10).
        generator: int seed or ``torch.Generator`` (None: seed 0), where captum draws from torch's global one.

    Example:
        >>> law = UniformNoise(0.1, n=50, generator=1)  # captum's perturb_radius=0.1, n_perturb_samples=50
        >>> law.draw(torch.tensor([0, 7]), torch.tensor([0, 1]), torch.tensor([3, 3]), 4).abs().max() <= 0.1
        tensor(True)
    """

    spread: ClassVar[str] = "radius"

    def _unit(self, key: torch.Tensor, b: torch.Tensor, k: torch.Tensor, width: int) -> torch.Tensor:
        """Float32 (c, width) uniform in [-1, 1)."""
        return 2 * Rows(key, b, k, torch.zeros_like(b), width).uniform(_UNIFORM_STREAM, width) - 1

    radius: float = 0.02
    n: int = 10
    generator: Seed = None


#: a law of perturbations, which ``perturbations=`` of ``infidelity`` and ``max_sensitivity`` takes
Noise = Union[GaussianNoise, UniformNoise]


def perturbation_rows(
    perturbations: object, inputs: torch.Tensor, default: Noise
) -> tuple[int, Union[torch.Tensor, _Law]]:
    """A metric's ``perturbations=``: n per input, and the given perturbations or the law to draw them from.

    Args:
        perturbations: None (the metric's ``default`` law), a ``GaussianNoise`` or ``UniformNoise``, or explicit
            perturbations (B, n, *shape).
        inputs: (B, *shape) the inputs perturbed.
        default: the metric's own law.

    Returns:
        ``(n, source)``: the given perturbations as (B·n, *shape) in the inputs' device and dtype, or the law.

    Raises:
        TypeError / ValueError: another object, or perturbations of the wrong shape (named).
    """
    noise = default if perturbations is None else perturbations
    if isinstance(noise, _Law):
        return noise.n, noise
    if not isinstance(noise, torch.Tensor):
        raise TypeError(
            "`perturbations` must be None, a GaussianNoise, a UniformNoise or a tensor (B, n, ...) of explicit "
            f"perturbations, got {describe(noise)}"
        )
    return given_perturbations(noise, inputs)
