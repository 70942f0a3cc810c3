"""Pictures of detector explanations (``Boxes`` targets): every explained box of one image, each with its heatmap.

``plot_boxes`` draws one panel per real target box of image ``index`` (padded targets, ``target_valid``
False, are skipped): the image, faded, under the box's coefficients painted through
``Explanation.heatmap`` (one diverging map, ``RdBu_r``, on one symmetric scale for every panel: red
supports the box, blue opposes it), the box outlined, its top-k segments (largest |weight|) contoured,
and a title with the box's label and the surrogate's weighted R². matplotlib is optional:
``pip install torchlime[viz]``.
"""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING, Optional, Sequence

import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_positive_int, describe, require
from torchlime.engine.explanation import Explanation
from torchlime.image._pixels import to_hwc, top_segments
from torchlime.targets import BoxesInfo

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: the box outline: a yellow line on a black halo, visible over red, blue and grey
BOX_COLOUR, HALO_COLOUR = "#ffd700", "black"


def _label_name(label: int, class_names: Optional[_colours.ClassNames]) -> str:
    return "any label" if label < 0 else _colours.class_name(label, class_names, f"label {label}")


def boxes_record(explanation: Explanation) -> Optional[BoxesInfo]:
    """What a ``Boxes`` target explained (its record, ``explanation.run.targets``: the boxes), else None."""
    targets = None if explanation.run is None else explanation.run.targets
    return targets if isinstance(targets, BoxesInfo) else None


def box_caption(
    explanation: Explanation, index: int, target_index: int, class_names: Optional[_colours.ClassNames] = None
) -> Optional[tuple[str, Optional[list[float]]]]:
    """Name the box that target ``target_index`` of image ``index`` explains, for a ``Boxes`` explanation.

    Args:
        explanation: any explanation.
        index: which image.
        target_index: which target (column of ``explanation.target``).
        class_names: names of the labels (a sequence indexed by label or a mapping label -> name).

    Returns:
        ``(caption, corners)``, e.g. ``("box 1 of 2: (0, 0, 8, 8), label 3", [0.0, 0.0, 8.0, 8.0])``, with
        corners None for a padded target; None for an explanation without a ``Boxes`` target.
    """
    record = boxes_record(explanation)
    if record is None:
        return None
    valid = explanation.target_valid
    n = explanation.coef.shape[1] if valid is None else int(valid[index].sum())
    if valid is not None and not bool(valid[index, target_index]):
        return f"target {target_index}: padding (image {index} has {n} box{'es' if n != 1 else ''})", None
    corners = [float(v) for v in record.boxes[index][target_index]]
    label = _label_name(int(explanation.target[index, target_index]), class_names)
    return f"box {target_index} of {n}: ({', '.join(f'{v:g}' for v in corners)}), {label}", corners


def outline(ax: Axes, corners: Sequence[float], scale: float = 1.0, offset: float = 0.0) -> None:
    """Draw a box (x1, y1, x2, y2) in pixels on ``ax``, a yellow line on a black halo.

    Args:
        ax: the panel.
        corners: the box's corners, in the image's pixels.
        scale: panel units per pixel (an image drawn ``scale`` times larger).
        offset: where pixel edge 0 is in panel units (-0.5 for ``imshow`` without ``extent``).
    """
    from matplotlib import patheffects
    from matplotlib.patches import Rectangle

    x1, y1, x2, y2 = (v * scale + offset for v in corners)
    ax.add_patch(Rectangle((x1, y1), x2 - x1, y2 - y1, fill=False, edgecolor=BOX_COLOUR, linewidth=1.8))
    ax.patches[-1].set_path_effects([patheffects.withStroke(linewidth=3.6, foreground=HALO_COLOUR)])


def plot_boxes(
    explanation: Explanation,
    images: torch.Tensor,
    *,
    index: int = 0,
    k: int = 3,
    class_names: Optional[_colours.ClassNames] = None,
    cols: Optional[int] = None,
    panel_size: float = 3.2,
) -> Figure:
    """One panel per explained box of image ``index``, each with its own heatmap.

    Every real target box (``explanation.target_valid``; padded targets are skipped) gets a panel: the
    image, faded, under its coefficients (B, T, F) painted back through ``explanation.heatmap()``, with a
    diverging colormap (``RdBu_r``) on one symmetric scale shared by the panels (red: the segment supports
    the box, blue: it opposes it) and one colour bar that says so; the box (x1, y1, x2, y2) from
    ``explanation.run.targets.boxes`` (B, T, 4) outlined; its ``k`` top segments (largest
    |weight|) contoured; the title gives the box's label and the weighted R² of its surrogate.

    Args:
        explanation: an explanation with a ``torchlime.targets.Boxes`` target, of image features
            (B, 1, H, W) or (1, 1, H, W).
        images: (B, C, H, W) the explained images (C = 1 or 3 is drawn as is, more as the first 3).
        index: which image.
        k: how many top segments to contour in each panel.
        class_names: names of the labels (``explanation.target``), a sequence indexed by label or a mapping
            label -> name, for the titles.
        cols: panels per row (default: up to 4).
        panel_size: inches per panel.

    Returns:
        The matplotlib figure.

    Raises:
        ValueError: an explanation without boxes, an ``index`` out of range, images of another batch or
            size than the explanation's, or an image without any real box.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> import torchlime
        >>> from torchlime.targets import Boxes
        >>> def detector(x):  # one box whose score is the brightness of the top-left quarter
        ...     s = x[:, :, :4, :4].mean((1, 2, 3))
        ...     return [{"boxes": torch.tensor([[0.0, 0, 4, 4]]), "labels": torch.tensor([1]), "scores": v[None]}
        ...             for v in s]
        >>> x = torch.rand(2, 1, 8, 8) + 1
        >>> exp = torchlime.explain(detector, x, torch.arange(64).view(1, 1, 8, 8) // 16,
        ...                         target=Boxes(score_threshold=0.1), n_samples=64)
        >>> fig = plot_boxes(exp, x, index=1)
        >>> [ax.get_title().split(" ·")[0] for ax in fig.axes[:-1]]  # one panel per box, then the colour bar
        ['box 0: label 1']
    """
    plt = require("matplotlib.pyplot", "viz", "plot_boxes")

    check_positive_int(k, "k")
    targets = boxes_record(explanation)
    if targets is None:
        found = None if explanation.run is None else explanation.run.targets
        raise ValueError(
            "`explanation` must come from a Boxes target (explanation.run.targets a BoxesInfo), got targets "
            f"{describe(found)}"
        )
    b, t, _ = explanation.coef.shape
    if isinstance(index, bool) or not isinstance(index, int) or not -b <= index < b:
        raise ValueError(f"`index` must be an int in [0, {b}), got {index!r}")
    index = index % b
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[0] != b:
        raise ValueError(f"`images` must be the ({b}, C, H, W) explained images, got {describe(images)}")
    h, w = images.shape[-2:]
    if tuple(explanation.features.shape[-2:]) != (h, w):
        raise ValueError(
            f"`images` of {h}x{w} pixels do not match the explanation's features of "
            f"{tuple(explanation.features.shape[-2:])}"
        )
    valid = [True] * t if explanation.target_valid is None else explanation.target_valid[index].tolist()
    shown = [j for j in range(t) if valid[j]]
    if not shown:
        raise ValueError(f"image {index} has no explained box (every target is padding)")
    boxes = targets.boxes[index]
    labels = explanation.target[index].tolist()
    scores = explanation.score[index].tolist()
    heat = explanation.heatmap()[index].detach().float().cpu().reshape(t, -1, h, w)[:, 0]  # (T, H, W)
    lim = max(float(heat[shown].abs().max()), 1e-12)
    feats = explanation.features[min(index, explanation.features.shape[0] - 1)].reshape(-1, h, w)[0].cpu()
    coef = explanation.coef[index].detach().float().cpu()
    top = top_segments(coef.abs(), explanation.valid[index].cpu().expand_as(coef), k)  # (T, k') segment ids
    img = to_hwc(images[index])

    n = len(shown)
    ncols = min(n, 4) if cols is None else check_positive_int(cols, "cols")
    nrows = math.ceil(n / ncols)
    fig: Figure
    size = (panel_size * ncols + 1.0, panel_size * nrows + 0.6)  # laid out when drawn: titles and bar fit
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False, layout="constrained")
    extent = (0.0, float(w), float(h), 0.0)  # pixel units: boxes are drawn in the detector's coordinates
    image = None
    for ax, j in zip(axes.flat, shown):
        ax.imshow(img, cmap="gray", alpha=0.35, extent=extent, interpolation="nearest")
        image = ax.imshow(heat[j].numpy(), cmap=_colours.CMAP, vmin=-lim, vmax=lim, alpha=0.75, extent=extent)
        kept = torch.isin(feats, top[j]).float().numpy()
        if kept.any() and not kept.all():
            centres = (torch.arange(w) + 0.5).numpy(), (torch.arange(h) + 0.5).numpy()
            ax.contour(*centres, kept, levels=[0.5], colors="black", linewidths=1.0, linestyles="dashed")
        outline(ax, boxes[j])
        ax.set_xlim(0, w)
        ax.set_ylim(h, 0)
        ax.set_title(f"box {j}: {_label_name(int(labels[j]), class_names)} · R² {scores[j]:.2f}", fontsize=9)
        ax.axis("off")
    for ax in list(axes.flat)[n:]:
        fig.delaxes(ax)
    assert image is not None  # every shown box drew its panel (there is at least one)
    bar = fig.colorbar(image, ax=list(axes.flat)[:n], fraction=0.046, pad=0.02)
    bar.set_label(_colours.label("weight (target: the box)"), fontsize=8)
    title = f"image {index}: {n} explained box{'es' if n > 1 else ''}\n(dashed: top {k} segments by |weight|)"
    unreliable = None if explanation.run is None else explanation.run.unreliable
    if unreliable:
        why = textwrap.fill(f"unreliable fit: {unreliable}", int(8 * size[0]))
        fig.suptitle(f"{title}\n{why}", color="#d62728", fontsize=9)
    else:
        fig.suptitle(title, fontsize=10)
    return fig
