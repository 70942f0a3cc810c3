"""How an explanation's inputs were perturbed, kept with it so they can be perturbed again.

Metrics such as deletion and insertion curves must hide features exactly as the explanation
did: the same fill, the same fused normalisation, the same token deletion or inverse STFT,
whatever the modality. The engine records a ``Perturbation`` in every ``Explanation`` (not
saved with it, and dropped by ``Explanation.to``): ``rows(masks)`` builds the model inputs of
any masks, and ``adapt(model)`` turns the user's model into the model the engine ran (the
front door's wrapper, if any).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import Chunk, Normalize, PerturbFn, perturb_rows
from torchlime.typing import Model


@dataclass(frozen=True, eq=False)
class Perturbation:
    """The engine's perturbation of one call.

    Attributes:
        inputs: (B, ...) the inputs as the engine saw them (packed token ids for text, the complex
            STFT for time-frequency waveform features).
        baseline: (B, ...) the fill of hidden features.
        index: long (B or 1, *fshape) the mask column of every element.
        n_features: long (B,) F_b.
        f_max: F.
        fixed: whether a column for never-perturbed elements is appended to the masks.
        perturb_fn: the front door's perturbation (None: the fused blend, with ``fmt`` and
            ``normalize``).
        fmt: dtype and layout of the blended chunks (None: the inputs').
        normalize: the per-channel normalisation fused into the blend, or None.
        adapter: turns a model into the one the engine ran (None: the model itself).
        reusable: False when the perturbation depends on the call's own samples (text's
            single-mask protocol), so other masks cannot be built.
        block_rows: the rows of ``index`` repeat in blocks of this many (``FeatureMap.block_rows``),
            which the blend on the CPU expands once per block.
    """

    inputs: torch.Tensor
    baseline: torch.Tensor
    index: torch.Tensor
    n_features: torch.Tensor
    f_max: int
    fixed: bool
    perturb_fn: Optional[PerturbFn] = None
    fmt: Optional[InputFormat] = None
    normalize: Optional[Normalize] = None
    adapter: Optional[Callable[[Model], Model]] = None
    reusable: bool = True
    block_rows: int = 1

    def build(self, chunk: Chunk) -> object:
        """The model input of a chunk of c rows (the engine's stage 3).

        Args:
            chunk: the rows (masks, explained input of each row).

        Returns:
            What the model takes: a (c, ...) tensor, or a tuple / dict of them.
        """
        if self.perturb_fn is not None:
            return self.perturb_fn(self.inputs, self.baseline, self.index, chunk)
        return perturb_rows(
            self.inputs,
            self.baseline,
            self.index,
            chunk,
            fmt=self.fmt,
            normalize=self.normalize,
            block_rows=self.block_rows,
        )

    def with_baseline(self, baseline: torch.Tensor) -> Perturbation:
        """The same perturbation with another fill.

        Args:
            baseline: (B, ...) or broadcastable, the new fill.

        Returns:
            The new ``Perturbation``.
        """
        return dataclasses.replace(self, baseline=torch.broadcast_to(baseline, self.inputs.shape).to(self.inputs))

    def adapt(self, model: Model) -> Model:
        """The model the engine ran, made from ``model`` (the user's).

        Args:
            model: the user's model.

        Returns:
            The front door's wrapper of it (or the model itself).
        """
        return model if self.adapter is None else self.adapter(model)

    def rows(self, masks: torch.Tensor, start: int = 0, stop: Optional[int] = None) -> object:
        """Model inputs of rows ``start:stop`` of masks (B, M, F), flattened input-major (B·M).

        Features beyond an input's own count are kept (padding); ``masks`` may be on any device.

        Args:
            masks: bool (B, M, F) masks, M per input.
            start: the first row (of the B·M, input-major).
            stop: the row after the last (None: B·M).

        Returns:
            The model input of the rows (stop - start, ...).

        Raises:
            ValueError: masks of the wrong shape, or a perturbation that cannot be reused.
        """
        if not self.reusable:
            raise ValueError(
                "this explanation's perturbation depends on its own samples (text's single-mask "
                "infill protocol): it cannot be applied to other masks"
            )
        batch, m = masks.shape[:2]
        if masks.dtype != torch.bool or masks.shape != (batch, m, self.f_max) or batch != self.inputs.shape[0]:
            raise ValueError(
                f"`masks` must be bool ({self.inputs.shape[0]}, M, {self.f_max}), "
                f"got {masks.dtype} {tuple(masks.shape)}"
            )
        stop = batch * m if stop is None else stop
        dev = self.inputs.device
        valid = torch.arange(self.f_max, device=dev) < self.n_features.unsqueeze(1)  # (B, F)
        flat = (masks.to(dev) | ~valid.unsqueeze(1)).reshape(batch * m, self.f_max)[start:stop]
        if self.fixed:
            flat = torch.nn.functional.pad(flat, (0, 1), value=True)
        r = torch.arange(start, stop, device=dev)
        b, s = r // m, r % m
        first, last = start // m, (stop - 1) // m
        return self.build(Chunk(flat, b, s, first, last if first == last else -1))
