"""Stage 3 for models of several inputs: a tuple of tensors perturbed as one flat carrier.

Every tensor of ``inputs = (x_1, ..., x_k)`` (each (B, ...)) is flattened and the pieces are laid side
by side in one (B, N) carrier, with the feature maps and fills laid out the same way, so the engine's
masks, blend, kernels and fit run unchanged. ``UnpackArgs`` turns each blended chunk back into the model's
positional arguments, followed by the unperturbed ``additional_forward_args``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from torchlime._util.checks import check_integer, check_tensor, describe
from torchlime.stages.features import relabel
from torchlime.stages.perturb.blend import Chunk, gather_rows, perturb_rows
from torchlime.stages.perturb.fills import Fill, FillContext, resolve_baseline, signal_dims
from torchlime.typing import BaselineSpec, BaselineSpecs, FeatureSpec

#: ``torch.broadcast_shapes``, typed (torch leaves it unannotated)
_broadcast_shapes: Callable[..., torch.Size] = torch.broadcast_shapes


class PackedArgs(tuple[object, ...]):
    """The model's arguments for a chunk of rows, with the flat (c, N) carrier rows they came from.

    Input-space kernels measure distances on ``flat`` (all tensors flattened and concatenated).

    Args:
        args: the model's positional arguments.
        flat: (c, N) the carrier rows they came from.
    """

    flat: torch.Tensor

    def __new__(cls, args: Sequence[object], flat: torch.Tensor) -> PackedArgs:
        """The tuple of ``args``, carrying ``flat``."""
        self = super().__new__(cls, args)
        self.flat = flat
        return self


def carrier_dtype(inputs: Sequence[torch.Tensor]) -> torch.dtype:
    """The dtype that holds every tensor's values exactly.

    Their common dtype, or float64 when they differ and one of them is not floating (integer ids are
    exact in float64 up to 2**53).

    Args:
        inputs: the k tensors.

    Returns:
        The carrier's dtype.
    """
    dtypes = {x.dtype for x in inputs}
    if len(dtypes) == 1:
        return inputs[0].dtype
    if all(d.is_floating_point for d in dtypes):
        out = inputs[0].dtype
        for d in dtypes:
            out = torch.promote_types(out, d)
        return out
    return torch.float64


def _default_features(inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One feature per element, numbered on across the tensors (captum's default): (1, *shape_i) each."""
    maps, offset = [], 0
    for x in inputs:
        n = x[0].numel()
        maps.append(torch.arange(offset, offset + n, device=x.device).view(1, *x.shape[1:]))
        offset += n
    return maps


def check_tuple_inputs(inputs: Sequence[object], name: str = "inputs") -> None:
    """Check that each element of a tuple of inputs is a (B, ...) tensor with the same B on the same device.

    Args:
        inputs: the k tensors, each (B, *shape_i).
        name: their name in error messages.

    Raises:
        TypeError / ValueError: an element that is not a tensor, or of another batch size or device.
    """
    if len(inputs) == 0:
        raise ValueError(f"`{name}` must hold at least one tensor, got an empty {type(inputs).__name__}")
    tensors: list[torch.Tensor] = []
    for i, x in enumerate(inputs):
        tensor = check_tensor(x, f"{name}[{i}]")
        if tensor.ndim < 1:
            raise ValueError(f"`{name}[{i}]` must be batched with shape (B, ...), got a 0-d tensor")
        tensors.append(tensor)
    batch, device = tensors[0].shape[0], tensors[0].device
    for i, x in enumerate(tensors):
        if x.shape[0] != batch or x.device != device:
            raise ValueError(
                f"every tensor of `{name}` must have the same batch size and device as `{name}[0]` "
                f"({batch}, {device}), got `{name}[{i}]` {describe(x)}"
            )


def pack_features(inputs: Sequence[torch.Tensor], features: FeatureSpec) -> list[torch.Tensor]:
    """Feature maps per tensor, each (B or 1, *shape_i) (ids shared across tensors share a feature).

    Args:
        inputs: the k tensors, each (B, *shape_i).
        features: None (one feature per element), or k integer maps, each broadcastable to its tensor.
    """
    if features is None:
        return _default_features(inputs)
    if isinstance(features, torch.Tensor) or len(features) != len(inputs):
        raise ValueError(
            f"`features` must be None or a tuple of {len(inputs)} feature maps (one per input tensor), "
            f"got {describe(features)}"
        )
    maps = []
    for i, (x, f) in enumerate(zip(inputs, features)):
        check_tensor(f, f"features[{i}]")
        check_integer(f, f"features[{i}]")
        if f.ndim != x.ndim:  # captum's masks may drop the batch dim
            f = f.unsqueeze(0) if f.ndim == x.ndim - 1 else f
        try:
            _broadcast_shapes(f.shape[1:], x.shape[1:])
            ok = f.ndim == x.ndim and f.shape[0] in (1, x.shape[0]) and f.device == x.device
        except RuntimeError:
            ok = False
        if not ok:
            raise ValueError(
                f"`features[{i}]` must be an integer map (B or 1, ...) broadcastable to `inputs[{i}]` "
                f"{tuple(x.shape)} on {x.device}, got {describe(f)}"
            )
        maps.append(f)
    return maps


def flatten_to(parts: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """Tensors broadcast to their inputs' shapes (leading dim kept), flattened and laid side by side.

    Args:
        parts: k tensors, each (B or 1, ...) broadcastable to its input.
        inputs: the k inputs, each (B, *shape_i).
        dtype: the result's dtype.

    Returns:
        (B or 1, N) the flat carrier.
    """
    lead = max(p.shape[0] for p in parts)
    flat = [p.expand(lead, *x.shape[1:]).reshape(lead, -1).to(dtype) for p, x in zip(parts, inputs)]
    return torch.cat(flat, dim=1)


@dataclass(frozen=True, eq=False)
class PerTensorFill(Fill):
    """The fill of a carrier: each tensor's own fill (a number, tensor, callable or name), laid out flat.

    Attributes:
        specs: k fill specifications, one per tensor.
        inputs: the k original tensors, each (B, *shape_i).
        features: the k feature maps, each (B or 1, *fshape_i).
    """

    specs: tuple[BaselineSpec, ...]
    inputs: tuple[torch.Tensor, ...]
    features: tuple[torch.Tensor, ...]

    def __call__(self, carrier: torch.Tensor, ctx: FillContext) -> torch.Tensor:
        """The (B, N) fill of the carrier: every tensor's fill, flattened and laid side by side.

        Args:
            carrier: (B, N) the flat carrier of the inputs.
            ctx: the carrier's fill context (its key and input ids are shared by every tensor).
        """
        fills = []
        for spec, x, f in zip(self.specs, self.inputs, self.features):
            labels, _ = relabel(f.expand(x.shape[0], *f.shape[1:]))
            labels = torch.where(labels < 0, ctx.n_columns - 1, labels)
            own = FillContext(
                labels, ctx.n_columns, signal_dims(tuple(x.shape), tuple(f.shape)), ctx.key, ctx.input_ids
            )
            if isinstance(spec, bool) and x.dtype == torch.bool:  # True / False for a bool tensor
                fills.append(torch.full_like(x, spec))
            else:
                fills.append(resolve_baseline(spec, x, own))
        return flatten_to(fills, self.inputs, carrier.dtype)

    def __repr__(self) -> str:
        return f"PerTensorFill({[s if isinstance(s, (int, float, str)) else describe(s) for s in self.specs]})"


@dataclass(frozen=True, eq=False)
class UnpackArgs:
    """The perturbation of a carrier: blend, then split into the model's arguments (a ``PerturbFn``).

    Attributes:
        shapes: the shape of one example of every tensor (without B).
        dtypes: the dtype of every tensor.
        extra: ``additional_forward_args``; tensors whose first dim is B are gathered per row.
        batch: B.
    """

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    extra: tuple[object, ...]
    batch: int

    def __call__(self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> PackedArgs:
        """The model's arguments for a chunk: the k blended tensors (c, *shape_i), then the extra ones.

        Args:
            inputs: (B, N) the carrier.
            baseline: (B, N) its fill.
            index: long (B or 1, N) the mask column of every element.
            chunk: the rows.
        """
        flat = perturb_rows(inputs, baseline, index, chunk)
        rows = flat.shape[0]
        sizes = [int(torch.Size(s).numel()) for s in self.shapes]
        pieces = torch.split(flat, sizes, dim=1)
        parts = [p.reshape(rows, *s).to(d) for p, s, d in zip(pieces, self.shapes, self.dtypes)]
        extra = [self._expand(a, chunk, rows) for a in self.extra]
        return PackedArgs([*parts, *extra], flat)

    def _expand(self, arg: object, chunk: Chunk, rows: int) -> object:
        """An additional argument for ``rows`` rows: per-example tensors follow their rows."""
        if not isinstance(arg, torch.Tensor) or arg.ndim == 0 or arg.shape[0] != self.batch:
            return arg
        picked = gather_rows(arg, chunk)
        return picked.expand(rows, *arg.shape[1:]) if picked.shape[0] == 1 else picked


def pack(
    inputs: Sequence[torch.Tensor],
    features: FeatureSpec,
    baseline: BaselineSpecs,
    additional_forward_args: object = None,
) -> tuple[torch.Tensor, torch.Tensor, PerTensorFill, UnpackArgs]:
    """Lay a tuple of inputs out as one carrier for the engine.

    Args:
        inputs: k tensors, each (B, *shape_i), same B and device.
        features: None (one feature per element) or k integer maps, each (B or 1, ...) broadcastable
            to its tensor; an id used in several tensors is one feature.
        baseline: one fill for every tensor (a number or a name), or a tuple of k fills (numbers,
            tensors broadcastable to (B, *shape_i), callables or names); None: 0.
        additional_forward_args: passed to the model after the inputs, unperturbed: one object, or
            a tuple of them; tensors whose first dim is B follow the rows of each chunk.

    Returns:
        ``(carrier, features, baseline, perturb_fn)``: carrier (B, N) holding every tensor's values
        (``carrier_dtype``), features long (B or 1, N), the fill for the engine (a ``PerTensorFill``),
        and the ``UnpackArgs`` perturbation that gives the model its k arguments (and the extra ones).
    """
    inputs = tuple(inputs)
    check_tuple_inputs(inputs)
    maps = pack_features(inputs, features)
    if isinstance(baseline, (tuple, list)):
        if len(baseline) != len(inputs):
            raise ValueError(
                f"`baseline` must be one fill or a tuple of {len(inputs)} fills (one per input tensor), "
                f"got a {type(baseline).__name__} of {len(baseline)}"
            )
        specs = tuple(baseline)
    else:
        specs = (0 if baseline is None else baseline,) * len(inputs)
    dtype = carrier_dtype(inputs)
    carrier = flatten_to(inputs, inputs, dtype)
    flat_features = flatten_to([m.long() for m in maps], inputs, torch.long)
    if additional_forward_args is None:
        extra: tuple[object, ...] = ()
    elif isinstance(additional_forward_args, tuple):
        extra = additional_forward_args
    else:
        extra = (additional_forward_args,)
    fill = PerTensorFill(specs, inputs, tuple(maps))
    unpack = UnpackArgs(
        tuple(tuple(x.shape[1:]) for x in inputs), tuple(x.dtype for x in inputs), extra, carrier.shape[0]
    )
    return carrier, flat_features, fill, unpack
