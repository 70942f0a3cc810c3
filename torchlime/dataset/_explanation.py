"""Rows of a result folder as an ``Explanation``: coefficients and fit read back, with their feature maps.

The shards of the third format hold each input's feature map (``_rows``), so ``Results.explanation()``
paints and draws exactly what the run computed: ``heatmap()`` of the rows read back equals the heat map
of the explanation the run made, bit for bit. Folders of the second format (or a ``keep`` without "features")
hold no maps: the maps are then rebuilt by the caller (the images' segments, as the run made them) and
given as ``features=``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Protocol

import torch

from torchlime._util.checks import describe
from torchlime.engine.explanation import Explanation
from torchlime.engine.info import Info
from torchlime.stages.standard_error import CoefSE


@dataclass(frozen=True)
class RowsInfo(Info):
    """What rows read back from a result folder record besides their tensors (``Explanation.info``).

    Attributes:
        samples_used: the samples each row's explanation drew (n,), as the run recorded them; ``meta``
            shows them at its top level, as an explanation's run record does.
    """

    key: ClassVar[str] = "results"
    per_input: ClassVar[tuple[str, ...]] = ("samples_used",)
    transient: ClassVar[tuple[str, ...]] = ("samples_used",)

    samples_used: list[int]

    def top_level(self) -> dict[str, object]:
        """``meta["samples_used"]``: the rows' sample counts."""
        return {"samples_used": list(self.samples_used)}


class Rows(Protocol):
    """What ``as_explanation`` reads of rows read back (``Results``): n rows of each field."""

    @property
    def coef(self) -> torch.Tensor:
        """(n, T, F) coefficients."""

    @property
    def intercept(self) -> torch.Tensor:
        """(n, T) intercepts."""

    @property
    def score(self) -> torch.Tensor:
        """(n, T) weighted R²."""

    @property
    def local_pred(self) -> torch.Tensor:
        """(n, T) predictions at the inputs."""

    @property
    def target(self) -> torch.Tensor:
        """Long (n, T) explained columns."""

    @property
    def n_features(self) -> torch.Tensor:
        """Long (n,) F_b of each input."""

    @property
    def samples_used(self) -> Optional[torch.Tensor]:
        """Long (n,) samples of each input, or None."""

    @property
    def coef_std(self) -> Optional[torch.Tensor]:
        """(n, T, F) posterior standard deviations, or None."""

    @property
    def coef_se(self) -> Optional[torch.Tensor]:
        """(n, T, F) standard errors, or None."""

    @property
    def target_valid(self) -> Optional[torch.Tensor]:
        """Bool (n, T) targets that exist, or None."""

    @property
    def features(self) -> Optional[torch.Tensor]:
        """Long (n, *fshape) feature maps, or None."""

    @property
    def input_shape(self) -> Optional[tuple[int, ...]]:
        """One input's shape, or None."""


NO_MAPS = (
    "these results hold no feature maps (their folder was written in format 'torchlime.dataset/2' by an earlier "
    "torchlime, or with a keep= without 'features')"
)


def _check_features(features: object, n: int, f_max: int) -> torch.Tensor:
    """Given feature maps: an integer tensor (n or 1, ...) of ids below F_max, as long (n, ...)."""
    if not isinstance(features, torch.Tensor) or features.is_floating_point() or features.is_complex():
        raise TypeError(
            f"`features` must be an integer tensor (n or 1, *fshape) of feature ids, got {describe(features)}"
        )
    if features.ndim < 2 or features.shape[0] not in (1, n):
        raise ValueError(
            f"`features` must have shape ({n} or 1, *fshape): a map per input or one for all, got "
            f"{tuple(features.shape)}"
        )
    if features.numel() and int(features.max()) >= f_max:
        raise ValueError(
            f"`features` must number at most the {f_max} features of the results (ids -1..{f_max - 1}), "
            f"got ids up to {int(features.max())}"
        )
    feats = features.detach().cpu().long()
    return feats.expand(n, *feats.shape[1:]) if feats.shape[0] != n else feats


def _check_shape(input_shape: object, features: torch.Tensor) -> tuple[int, ...]:
    """``input_shape`` as a tuple of ints the feature maps broadcast to."""
    if not isinstance(input_shape, (tuple, list)) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in input_shape
    ):
        raise TypeError(f"`input_shape` must be a tuple of ints >= 1 (one input's shape), got {describe(input_shape)}")
    shape = tuple(input_shape)
    fshape = tuple(features.shape[1:])
    if len(fshape) != len(shape) or any(f not in (1, s) for f, s in zip(fshape, shape)):
        raise ValueError(
            f"`input_shape` must be a shape the feature maps {fshape} broadcast to (dims equal or 1 in the maps), "
            f"got {shape}"
        )
    return shape


def as_explanation(
    results: Rows, features: Optional[torch.Tensor] = None, input_shape: Optional[tuple[int, ...]] = None
) -> Explanation:
    """The ``Explanation`` of ``results``' n rows (see ``Results.explanation``).

    Args:
        results: rows read from a result folder.
        features: long (n or 1, *fshape) maps to use instead of the stored ones (None: the stored ones).
        input_shape: one input's shape (None: the stored one, else the maps' shape without B).

    Returns:
        The explanation (B = n), on the CPU, without a recorded perturbation.

    Raises:
        ValueError / TypeError: no maps stored nor given, or maps / a shape that do not fit the rows.
    """
    n, f_max = results.coef.shape[0], results.coef.shape[-1]
    if features is not None:
        feats = _check_features(features, n, f_max)
    elif results.features is not None:
        feats = results.features.long()
    else:
        raise ValueError(
            f"`features` must be given: {NO_MAPS}; rebuild the maps as the run made them (e.g. the images' "
            f"segments) and pass them as features=(n or 1, *fshape), or explain into a new folder, which keeps them"
        )
    if input_shape is not None:
        shape = _check_shape(input_shape, feats)
    elif results.input_shape is not None and features is None:
        shape = tuple(results.input_shape)
    else:
        shape = tuple(feats.shape[1:])
    info = None if results.samples_used is None else RowsInfo(results.samples_used.tolist())
    return Explanation(
        results.coef,
        results.intercept,
        results.score,
        results.local_pred,
        results.target,
        feats,
        results.n_features,
        shape,
        coef_std=results.coef_std,
        coef_se_record=None if results.coef_se is None else CoefSE("stored", results.coef_se),
        target_valid=results.target_valid,
        info=info,
    )
