"""A picture of a series explanation: every channel, its steps shaded by their features' weights."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np
import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_tensor, require
from torchlime.engine import Explanation

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_series(
    explanation: Explanation,
    series: torch.Tensor,
    *,
    index: int = 0,
    target_index: int = 0,
    title: str = "",
    class_names: Optional[_colours.ClassNames] = None,
) -> Figure:
    """One panel per channel: the series, each step shaded by its feature's LIME weight.

    One diverging colormap ("RdBu_r") centred at 0: red supports the target, blue opposes it (the colour
    bar under the panels says so).

    Args:
        explanation: from ``explain_series`` (or any explanation of (B, C, T) series).
        series: (B, C, T) the explained series.
        index: which series.
        target_index: which explained target (column of ``explanation.target``).
        title: the figure's title (default: the series and its target).
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            title and the colour bar ("weight for 'rising'"; default: the class index).

    Returns:
        The matplotlib ``Figure``.

    Raises:
        TypeError / ValueError / IndexError: series of another shape than the explained ones, an
            index or target out of range.
    """
    shape = (explanation.coef.shape[0], *explanation.input_shape)
    if len(shape) != 3 or tuple(check_tensor(series, "series").shape) != shape:
        raise ValueError(f"`series` must be the explained (B, C, T) series, shape {shape}, got {tuple(series.shape)}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < shape[0]:
        raise ValueError(f"`index` must be an int in [0, {shape[0]}), got {index!r}")
    plt = require("matplotlib.pyplot", "viz", "plot_series")
    heat = explanation.heatmap(target_index)[index].detach().cpu().float().numpy()  # (C, T)
    x = series[index].detach().cpu().float().numpy()
    lim = float(np.abs(heat).max()) or 1.0
    fig: Figure
    size = (8, 1.6 + 1.2 * shape[1])  # laid out when drawn, the colour bar under the panels: its label fits
    fig, axes = plt.subplots(shape[1], 1, sharex=True, squeeze=False, figsize=size, layout="constrained")
    for channel, ax in enumerate(axes[:, 0]):
        lo, hi = float(x[channel].min()), float(x[channel].max())
        box = (-0.5, shape[2] - 0.5, lo - 0.1 * (hi - lo) - 0.1, hi + 0.1 * (hi - lo) + 0.1)
        shade = ax.imshow(
            heat[channel][None], aspect="auto", cmap=_colours.CMAP, vmin=-lim, vmax=lim, alpha=0.5, extent=box
        )
        ax.plot(np.arange(shape[2]), x[channel], color="k", linewidth=1)
        ax.set_ylabel(f"channel {channel}")
    axes[-1, 0].set_xlabel("time step")
    name = _colours.class_name(int(explanation.target[index, target_index]), class_names)
    bar = fig.colorbar(shade, ax=list(axes[:, 0]), location="bottom", aspect=40)
    bar.set_label(_colours.label(f"weight for '{name}'"), fontsize=8)
    fig.suptitle(title or f"series {index}, target {name}")
    return fig
