"""``Series``: multivariate time series (B, C, T) explained by time windows, channels or both."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional, get_args

import torch

from torchlime._util.checks import check_choice, check_positive_int, check_tensor
from torchlime.engine import Call, Config, Info, Modality, Prepared
from torchlime.stages.features import even_bands
from torchlime.stages.perturb.fills import Fill, FillContext, resolve_baseline
from torchlime.typing import UNSET, Model

SeriesSegments = Literal["window", "channel", "window_channel"]
SeriesFillName = Literal["mean", "interpolate", "noise", "shuffle"]


@dataclass(frozen=True)
class SeriesFill(Fill):
    """What hidden steps of series (B, C, T) become, per channel: ``baseline=SeriesFill(name)``.

    "mean" (the channel's mean, the default fill of ``Series``), "interpolate" (the line between the
    window's neighbouring steps of the series as given; at an edge the one neighbour), "noise" (Gaussian
    of the channel's mean and std) or "shuffle" (its steps in a random order), random ones from
    (seed, index).

    Attributes:
        name: "mean", "interpolate", "noise" or "shuffle".
        n_windows: the windows "interpolate" bridges (``Series`` sets its own).

    Example:
        >>> x = torch.tensor([[[1.0, 2.0, 9.0, 4.0]]])
        >>> SeriesFill("interpolate", n_windows=4)(x, None)[0, 0].tolist()  # each step: its neighbours' line
        [2.0, 5.0, 3.0, 9.0]
    """

    name: SeriesFillName = "mean"
    n_windows: int = 1

    def __post_init__(self) -> None:
        check_choice(self.name, "name", get_args(SeriesFillName))
        check_positive_int(self.n_windows, "n_windows")

    def __call__(self, inputs: torch.Tensor, ctx: FillContext) -> torch.Tensor:
        """The fill (B, C, T) of series (B, C, T); random ones from ``ctx``'s key and input ids."""
        mean, n, k = inputs.mean(2, keepdim=True), inputs.shape[2], self.n_windows
        if self.name == "interpolate":  # every window: the line between its neighbouring steps, else the nearer one
            window = even_bands(n, k, inputs.device)
            start, stop = -(-window * n // k), -(-(window + 1) * n // k)  # (T,) each step's window [start, stop)
            left = inputs.index_select(2, (start - 1).clamp_min(0))
            right = inputs.index_select(2, stop.clamp_max(n - 1))
            frac = (torch.arange(n, device=inputs.device) - start + 1).to(inputs.dtype) / (stop - start + 1)
            edge = torch.where(start > 0, left, torch.where(stop < n, right, mean))  # no neighbour: the mean
            return torch.where((start > 0) & (stop < n), torch.lerp(left, right, frac), edge)
        if self.name == "shuffle":  # the engine's shuffle, over the steps of each channel
            return resolve_baseline("shuffle", inputs, ctx._replace(signal_dims=(2,)))
        if self.name == "mean":
            return mean.expand_as(inputs).clone()
        # the engine's uniform noise of ones is U[0, 1), drawn from the key and each input's index
        uniform = resolve_baseline("noise", torch.ones(inputs.shape, device=inputs.device), ctx)
        normal: torch.Tensor = torch.special.ndtri(uniform.double() + 2.0**-25)  # the midpoints of 2**24 bins: finite
        return (mean + inputs.std(2, keepdim=True, correction=0) * normal).to(inputs.dtype)


@dataclass(frozen=True)
class SeriesInfo(Info):
    """What ``Series`` built (``Explanation.info``; ``meta["series"]`` as plain data).

    Attributes:
        segments: "window", "channel" or "window_channel".
        n_windows: the time windows of the features (1 for "channel": the whole series).
        windows: the ``[start, stop)`` steps of every window.
        fill: the name of the ``SeriesFill`` used, or None for any other ``baseline=``.
    """

    key: ClassVar[str] = "series"

    segments: SeriesSegments
    n_windows: int
    windows: tuple[tuple[int, int], ...]
    fill: Optional[SeriesFillName]


@dataclass(frozen=True)
class Series(Modality):
    """Multivariate time series (B, C, T): C channels (variables) of T time steps.

    Attributes:
        segments: the features: "window" (``n_windows`` contiguous time windows shared by every
            channel), "channel" (one per channel: its whole series) or "window_channel" (one per
            (channel, window) cell, numbered ``channel * n_windows + window``).
        n_windows: time windows, 1..T, of sizes differing by at most 1 (unused by "channel").

    What hidden steps become is the call's ``baseline=``: by default each channel's mean
    (``SeriesFill("mean")``), ``SeriesFill("interpolate" | "noise" | "shuffle")`` for the other series
    fills, or any of the engine's fills.
    """

    owns: ClassVar[frozenset[str]] = frozenset({"perturb_fn", "additional_forward_args"})

    segments: SeriesSegments = "window"
    n_windows: int = 10

    def __post_init__(self) -> None:
        check_choice(self.segments, "segments", get_args(SeriesSegments))
        check_positive_int(self.n_windows, "n_windows")

    def prepare(self, model: Model, inputs: torch.Tensor, how: Config, call: Call) -> Prepared:
        """Check the series (B, C, T), number their features, fit a ``SeriesFill`` to the windows.

        Args:
            model: the caller's model (run as it is).
            inputs: float (B, C, T) the series.
            how: the configuration; an unset ``baseline`` becomes ``SeriesFill("mean")``.
            call: the call (``additional_forward_args`` must be unset).
        """
        series = check_tensor(inputs, "series")
        if series.ndim != 3:
            shape, hint = tuple(series.shape), "one series: series[None], univariate (B, T): series[:, None]"
            raise ValueError(f"`series` must have shape (B, C, T) (C channels of T steps), got {shape}; {hint}")
        if not series.is_floating_point():
            raise TypeError(f"`series` must be a real float tensor, got dtype {series.dtype}; pass series.float()")
        if call.additional_forward_args is not None:
            raise ValueError("`additional_forward_args` is not passed with `Series`: bind it in the model")
        n_channels, n_steps = series.shape[1:]
        k = 1 if self.segments == "channel" else int(self.n_windows)
        if k > n_steps:
            raise ValueError(f"`n_windows` must be in [1, T] = [1, {n_steps}] for these series, got {k}")
        band = even_bands(n_steps, k, series.device).view(1, 1, n_steps)
        channel = torch.arange(n_channels, device=series.device).view(1, n_channels, 1)
        features = {"window": band, "channel": channel, "window_channel": channel * k + band}[self.segments]
        fill = SeriesFill() if how.baseline is UNSET else how.baseline
        if isinstance(fill, SeriesFill):  # the series fills bridge the modality's own windows
            fill = dataclasses.replace(fill, n_windows=k)
            how = dataclasses.replace(how, baseline=fill)
        windows = tuple((-(-w * n_steps // k), -(-(w + 1) * n_steps // k)) for w in range(k))  # even_bands' windows
        info = SeriesInfo(self.segments, k, windows, fill.name if isinstance(fill, SeriesFill) else None)
        return Prepared(series, features, how, call, input_name="series", info=info)
