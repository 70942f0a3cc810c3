"""What hidden features become: the fill (baseline) tensor (B, *shape), one concept for every modality.

A fill is a number, a tensor, a callable ``inputs -> tensor``, a ``Fill`` object or one of the names
in ``NAMES`` (``resolve_baseline`` says what each does). Statistics are taken over the *signal
dims* of an input (those its feature map varies over: H, W of an image, the samples of a waveform);
the dims the feature map broadcasts over (channels) keep separate ones. Complex inputs (STFTs) take
the statistics of the magnitude and keep their phase. Random fills draw from the call's key and the
index of each input (``sampling.make_key``), so they depend only on the seed and the input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Union

import torch

from torchlime._util.checks import check_positive_float, describe
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, tensor_key, zeros
from torchlime.stages.sampling import Rows
from torchlime.typing import BaselineSpec as BaselineSpec
from torchlime.typing import FillName

NAMES: tuple[FillName, ...] = ("zero", "mean", "blur", "min", "max", "signal_mean", "noise", "shuffle")
_FILL_STREAM = 7  # random stream of fills (masks use streams 0-2)


class FillContext(NamedTuple):
    """What a fill may use besides the inputs.

    Attributes:
        labels: long (B, *fshape) mask column of every element (0..F, broadcastable).
        n_columns: F + 1, an upper bound of the labels + 1.
        signal_dims: the dims (>= 1) the feature map varies over.
        key: long (2,) the call's random key.
        input_ids: long (B,) index of every input.
    """

    labels: torch.Tensor
    n_columns: int
    signal_dims: tuple[int, ...]
    key: torch.Tensor
    input_ids: torch.Tensor


class Fill:
    """Base class of named fills: ``fill(inputs, context) -> (B, *shape)``."""

    def __call__(self, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:
        """The fill of ``inputs``.

        Args:
            inputs: (B, *shape) the explained inputs.
            ctx: what else the fill may use (labels, signal dims, the random key).

        Returns:
            (B, *shape) the fill, in the inputs' dtype.
        """
        raise NotImplementedError


def signal_dims(inputs_shape: tuple[int, ...], labels_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Dims >= 1 along which the feature map varies (its size there is the input's, above 1).

    Args:
        inputs_shape: the shape (B, *shape) of the inputs.
        labels_shape: the shape (B or 1, *fshape) of their feature map.

    Returns:
        The signal dims (all dims >= 1 when the feature map varies along none).
    """
    dims = tuple(d for d in range(1, len(inputs_shape)) if labels_shape[d] > 1 and inputs_shape[d] > 1)
    return dims or tuple(range(1, len(inputs_shape)))


#: the element groups and group sizes of ``feature_mean``, by labels (``stages.fixed_cost``)
_GROUPS: ShapeCache[tuple[torch.Tensor, torch.Tensor]] = ShapeCache()


def feature_mean(inputs: torch.Tensor, labels: torch.Tensor, n_features: int) -> torch.Tensor:
    """Per-feature mean of the inputs, broadcast back to the inputs' shape.

    Args:
        inputs: (B, *shape) real or complex inputs.
        labels: long (B, *fshape), fshape broadcastable to shape, ids in [0, n_features).
        n_features: an upper bound of the labels + 1.

    Returns:
        (B, *shape) where every element holds the mean of the elements that share
        its feature (and its index along the dimensions ``labels`` broadcasts over).

    Example:
        >>> x = torch.tensor([[1.0, 3.0, 5.0]]); lab = torch.tensor([[0, 0, 1]])
        >>> feature_mean(x, lab, 2).tolist()
        [[2.0, 2.0, 5.0]]
    """
    if inputs.is_complex():
        return torch.complex(
            feature_mean(inputs.real, labels, n_features), feature_mean(inputs.imag, labels, n_features)
        )
    batch = inputs.shape[0]

    def layout() -> tuple[torch.Tensor, torch.Tensor]:
        """Each element's group (feature x broadcast index), long (B, N), and each group's size, float64."""
        lab = labels.expand(inputs.shape)
        channel = torch.zeros((), dtype=torch.long, device=inputs.device)
        n_channels = 1
        for dim in range(1, inputs.ndim):  # index along the dims the labels broadcast over
            if labels.shape[dim] == 1 and inputs.shape[dim] > 1:
                size = inputs.shape[dim]
                view = [1] * inputs.ndim
                view[dim] = size
                channel = channel * size + torch.arange(size, device=inputs.device).view(view)
                n_channels *= size
        keys = (lab * n_channels + channel).reshape(batch, -1)
        ones = torch.ones(keys.shape, dtype=torch.float64, device=inputs.device)
        counts = torch.zeros(batch, n_features * n_channels, dtype=torch.float64, device=inputs.device)
        return keys, counts.scatter_add_(1, keys, ones).clamp_min(1)

    # the groups depend only on the labels and the shapes: kept for labels passed again (stages.fixed_cost)
    owner = labels if labels._base is None else labels._base
    known_as = tensor_key(labels)
    small = known_as is not None and inputs.numel() <= CACHED_ELEMENTS
    key = (known_as, tuple(inputs.shape), n_features)
    keys, counts = _GROUPS.get(owner, key, layout) if small else layout()
    # sums in float64 for every input dtype: on CUDA scatter_add_ adds in whatever order its atomics
    # land, and float32 sums would differ in the last bit from run to run; float64 sums of float32
    # values rounded back to float32 (the input's dtype) are reproducible (and correctly rounded)
    values = inputs.reshape(batch, -1).to(torch.float64)
    sums = torch.scatter_add(zeros(tuple(counts.shape), values.dtype, inputs.device), 1, keys, values)
    if not inputs.is_floating_point():
        return (sums / counts).gather(1, keys).reshape(inputs.shape).to(inputs.dtype)
    # the float64 quotients rounded to the inputs' dtype as they are written (as ``to`` rounds), then gathered
    means = torch.empty(counts.shape, dtype=inputs.dtype, device=inputs.device)
    return torch.div(sums, counts, out=means).gather(1, keys).reshape(inputs.shape)


def gaussian_blur(x: torch.Tensor, sigma: float, dims: tuple[int, ...]) -> torch.Tensor:
    """Separable Gaussian smoothing of real ``x`` over ``dims``; same shape and dtype.

    Taps ``exp(-t² / 2σ²)`` for |t| <= round(3σ), normalised; reflect padding
    (replicate where a dim is not longer than the radius). Dims of size 1 are skipped.

    Args:
        x: (B, *shape) real values.
        sigma: the Gaussian's standard deviation, in elements.
        dims: the dims to smooth over.

    Returns:
        (B, *shape) the smoothed values, in ``x``'s dtype.

    Example:
        >>> gaussian_blur(torch.ones(1, 8, 8), 1.0, (1, 2)).allclose(torch.ones(1, 8, 8))
        True
    """
    out = x if x.dtype == torch.float64 else x.float()
    radius = max(1, int(round(3 * sigma)))
    taps = torch.arange(-radius, radius + 1, device=x.device, dtype=out.dtype)
    kernel = torch.exp(-0.5 * (taps / sigma) ** 2)
    kernel = (kernel / kernel.sum()).view(1, 1, -1)
    for dim in dims:
        size = out.shape[dim]
        if size < 2:
            continue
        moved = out.movedim(dim, -1)
        flat = moved.reshape(-1, 1, size)
        mode = "reflect" if size > radius else "replicate"
        flat = torch.nn.functional.conv1d(torch.nn.functional.pad(flat, (radius, radius), mode=mode), kernel)
        out = flat.reshape(moved.shape).movedim(-1, dim)
    return out.to(x.dtype)


def _phase(x: torch.Tensor, mag: torch.Tensor) -> torch.Tensor:
    """Unit-magnitude phase factors of complex x (1 where x is 0)."""
    return torch.where(mag > 0, x / mag.clamp_min(torch.finfo(mag.dtype).tiny), torch.ones_like(x))


def _uniform_like(x: torch.Tensor, ctx: FillContext, stream: int) -> torch.Tensor:
    """Uniform [0, 1) numbers shaped like ``x`` (real dtype), from the call's key and input ids."""
    batch, per = x.shape[0], x[0].numel()
    b = ctx.input_ids.to(x.device).repeat_interleave(per)
    e = torch.arange(per, device=x.device).repeat(batch)
    rows = Rows(ctx.key.to(x.device), b, e, b, 0)
    dtype = x.real.dtype if x.is_complex() else (x.dtype if x.is_floating_point() else torch.float32)
    return rows.uniform(_FILL_STREAM + stream).view(x.shape).to(dtype)


@dataclass(frozen=True)
class Blur(Fill):
    """The input smoothed by a Gaussian of ``sigma`` elements over its signal dims.

    Complex inputs blur their magnitude and keep their phase.

    Attributes:
        sigma: the Gaussian's standard deviation in elements; None: a sixteenth of the longest
            signal dim (a 224-pixel image: 14 pixels).
    """

    sigma: Optional[float] = None

    def __post_init__(self) -> None:
        if self.sigma is not None:
            check_positive_float(self.sigma, "sigma")

    def __call__(self, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:
        """The inputs (B, *shape) smoothed over ``ctx.signal_dims``: (B, *shape).

        Args:
            inputs: (B, *shape) the explained inputs.
            ctx: the fill context (its signal dims).
        """
        sigma = self.sigma if self.sigma is not None else max(inputs.shape[d] for d in ctx.signal_dims) / 16
        if inputs.is_complex():
            mag = inputs.abs()
            return gaussian_blur(mag, sigma, ctx.signal_dims) * _phase(inputs, mag)
        return gaussian_blur(inputs, sigma, ctx.signal_dims)


def _statistic(name: str, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:
    """The "min", "max", "signal_mean", "noise" and "shuffle" over the signal dims."""
    dims = ctx.signal_dims
    if name == "shuffle":
        moved = inputs.movedim(dims, tuple(range(-len(dims), 0)))
        flat = moved.reshape(*moved.shape[: -len(dims)], -1)
        perm = _uniform_like(flat, ctx, 1).argsort(-1)
        return flat.gather(-1, perm).reshape(moved.shape).movedim(tuple(range(-len(dims), 0)), dims)
    mag = inputs.abs() if inputs.is_complex() else inputs
    if name == "noise":
        hi = mag.amax(dim=dims, keepdim=True)
        if inputs.is_complex():
            phase = torch.polar(torch.ones_like(mag), 2 * math.pi * _uniform_like(mag, ctx, 2))
            return (_uniform_like(mag, ctx, 3) * hi) * phase
        lo = mag.amin(dim=dims, keepdim=True).clamp_max(0)
        return lo + _uniform_like(inputs, ctx, 3) * (hi - lo)
    reducers: dict[str, Callable[..., torch.Tensor]] = {"min": torch.amin, "max": torch.amax, "signal_mean": torch.mean}
    reduce = reducers[name]
    exact = mag.is_floating_point() or name != "signal_mean"  # min / max of integers are exact as they are
    src = mag if exact else mag.double()  # an integer mean, as "mean" takes it: in float64
    value = reduce(src, dim=dims, keepdim=True).to(mag.dtype).expand(inputs.shape)
    return value * _phase(inputs, mag) if inputs.is_complex() else value.clone()


def resolve_baseline(spec: BaselineSpec, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:  # noqa: C901
    """Materialise the fill as a (B, *shape) tensor on the inputs' device (``inputs`` untouched).

    Args:
        spec: the fill: a number (every hidden element takes it: captum's default 0); a tensor
            broadcastable to the inputs (B, *shape) or to one input (*shape); a callable
            ``inputs -> tensor`` (any of these shapes); a ``Fill``; or a name: "zero" (0: silence for
            spectrograms and waveforms), "mean" (each feature's own mean, separately for every
            position of the dims the feature map broadcasts over: an image superpixel's mean colour,
            lime's ``hide_color=None``; the engine refuses it when every feature is one element, as
            it is then the input itself), "blur" (``Blur()``), "min", "max" or "signal_mean" (the
            input's smallest, largest or mean value per channel), "noise" (uniform noise in
            [min(lo, 0), hi] of the input per channel; complex inputs: a uniform phase) or "shuffle"
            (the input's own elements in a random order per channel; complex: whole bins).
        inputs: (B, *shape) the explained inputs.
        ctx: the fill context (labels, signal dims, the random key).

    Returns:
        (B, *shape) the fill, in the inputs' dtype.

    Raises:
        TypeError / ValueError: for a specification of the wrong type, an unknown name,
            a tensor on another device or of a shape that does not broadcast.
    """
    if isinstance(spec, bool):
        raise TypeError(
            f"`baseline` must be a number, a tensor, a callable or one of {list(NAMES)}, got {describe(spec)}"
        )
    if isinstance(spec, (int, float)):
        return torch.full_like(inputs, spec)
    if isinstance(spec, str):
        if spec == "zero":
            return torch.zeros_like(inputs)
        if spec == "mean":
            return feature_mean(inputs, ctx.labels, ctx.n_columns)
        if spec == "blur":
            return Blur()(inputs, ctx)
        if spec in NAMES:
            return _statistic(spec, inputs, ctx)
        raise ValueError(f"`baseline` string must be one of {list(NAMES)}, got {spec!r}")
    if isinstance(spec, Fill):
        return spec(inputs, ctx)
    if not isinstance(spec, torch.Tensor) and callable(spec):
        made: object = spec(inputs)
        if not isinstance(made, torch.Tensor):
            raise TypeError(f"a callable `baseline` must return a tensor, got {describe(made)}")
        spec = made
    if isinstance(spec, torch.Tensor):
        if spec.device != inputs.device:
            raise ValueError(f"`baseline` must be on the inputs' device ({inputs.device}), got {spec.device}")
        try:
            out = torch.broadcast_to(spec, inputs.shape)
        except RuntimeError:
            raise ValueError(
                f"`baseline` of shape {tuple(spec.shape)} does not broadcast to the inputs' shape {tuple(inputs.shape)}"
            ) from None
        return out.to(inputs.dtype)
    raise TypeError(f"`baseline` must be a number, a tensor, a callable or one of {list(NAMES)}, got {describe(spec)}")


def describe_baseline(spec: object) -> Union[str, float, None]:
    """A plain-data record of a fill for ``Explanation.meta`` (tensors and callables by description).

    Args:
        spec: the fill specification (see ``resolve_baseline``).

    Returns:
        The number or name itself, else a short description.
    """
    if isinstance(spec, (str, int, float)) or spec is None:
        return spec
    if isinstance(spec, Fill):
        return repr(spec)
    return describe(spec)
