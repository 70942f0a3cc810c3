"""Pictures of deletion / insertion / region-perturbation curves (matplotlib: ``pip install torchlime[viz]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, cast

import torch

from torchlime._util.checks import check_tensor, describe, require
from torchlime.metrics._common import trapezoid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def plot_curves(
    curves: torch.Tensor,
    x: torch.Tensor,
    labels: Optional[Sequence[str]] = None,
    *,
    ax: Optional[Axes] = None,
    title: Optional[str] = None,
) -> Figure:
    """Draw score curves against the fraction of features changed, with each curve's AUC in the legend.

    Args:
        curves: (P,), (n, P) or (B, T, P) scores (``metrics.deletion(..., return_curves=True).curves``).
        x: fractions of features changed: (P,), (n, P), or (B, P) for (B, T, P) curves.
        labels: one name per curve (default "input b, target t" or "curve i"); the legend adds
            ``AUC = Σ_j (x_j+1 - x_j)(y_j + y_j+1) / 2``.
        ax: matplotlib axes to draw on (default: a new figure).
        title: the axes' title.

    Returns:
        The matplotlib ``Figure`` (the one of ``ax`` when it is given; the curves are in ``fig.axes[0]``
        for a new figure). It returned the Axes before 0.2.0.

    Raises:
        ImportError: without matplotlib (names the ``viz`` extra).
        TypeError / ValueError: curves and x that do not match, labels of the wrong count.

    Example:
        >>> y = torch.tensor([[1.0, 0.5, 0.0], [1.0, 0.9, 0.8]])
        >>> fig = plot_curves(y, torch.tensor([0.0, 0.5, 1.0]), ["sharp", "flat"])
        >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        ['sharp (AUC 0.500)', 'flat (AUC 0.900)']
        >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    plt = require("matplotlib.pyplot", "viz", "plot_curves")
    check_tensor(curves, "curves")
    check_tensor(x, "x")
    if curves.ndim not in (1, 2, 3):
        raise ValueError(f"`curves` must be (P,), (n, P) or (B, T, P), got shape {tuple(curves.shape)}")
    y = curves.detach().float().cpu()
    xs = x.detach().float().cpu()
    if y.ndim == 3 and xs.ndim == 2:
        xs = xs.unsqueeze(1)
    try:
        xs = torch.broadcast_to(xs, y.shape)
    except RuntimeError:
        raise ValueError(f"`x` {tuple(x.shape)} must match `curves` {tuple(curves.shape)} (P = the last dim)") from None
    if y.ndim == 3:
        default = [f"input {b}, target {t}" for b in range(y.shape[0]) for t in range(y.shape[1])]
    else:
        default = [f"curve {i}" for i in range(y.shape[0])] if y.ndim == 2 else ["curve"]
    y, xs = y.reshape(-1, y.shape[-1]), xs.reshape(-1, y.shape[-1])
    if labels is None:
        labels = default
    elif isinstance(labels, str) or len(labels) != y.shape[0]:
        raise ValueError(f"`labels` must hold {y.shape[0]} names (one per curve), got {describe(labels)}")
    auc = trapezoid(y, xs).tolist()
    if ax is None:  # laid out when drawn: the axis labels and the legend stay on the canvas
        _, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    for xi, yi, name, a in zip(xs.tolist(), y.tolist(), labels, auc):
        ax.plot(xi, yi, marker="." if len(xi) <= 40 else None, label=f"{name} (AUC {a:.3f})")
    ax.set_xlabel("fraction of features changed")
    ax.set_ylabel("target score")
    ax.set_xlim(0, 1)
    if title is not None:
        ax.set_title(title)
    ax.legend(fontsize="small")
    return cast("Figure", ax.figure)  # a SubFigure for the axes of a subfigure
