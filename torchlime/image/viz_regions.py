"""``plot_regions``: one panel per explained region of an image, its heatmap and its outline.

An explanation made with ``target=Region(...)`` saves the targets' classes (``Explanation.target``) and
which of them exist (``target_valid``), but not the regions' pixels (``meta["targets"]`` is plain data:
kind, reduce, probability, where the regions came from). Its bound target (``Explanation.scorer``, in
memory only, not saved; a slice keeps its own inputs') holds them; otherwise the outlines are drawn from
``regions=``: the masks given to ``Region`` (or the ``Region`` itself), or the model's predicted label
map, from which the region of class k is recomputed as its pixels predicted k, as ``Region()`` did.
Matplotlib is optional (``pip install torchlime[viz]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_positive_int, describe, require
from torchlime.engine.explanation import Explanation
from torchlime.image._pixels import to_hwc
from torchlime.targets.region import Region

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the colour bar's label: the map and what red and blue mean, as every torchlime picture says
LEGEND = _colours.label("weight")


def region_masks(
    explanation: Explanation, regions: object, index: int, targets: Sequence[int], size: tuple[int, int]
) -> list[Optional[torch.Tensor]]:
    """The region of each listed target of input ``index``, at the image's size.

    Args:
        explanation: a ``Region`` explanation (B inputs, T targets).
        regions: None: the (B, T, H, W) regions that ``explanation.scorer`` keeps in memory, when it
            has them for this batch (not after loading or slicing: then no outlines); a ``Region`` with a
            mask or its masks: bool / 0-1 (H, W), (R, H, W) or (B, R, H, W), one region per target (R = T);
            or an integer label map, the model's prediction (B, H, W), (B, 1, H, W) or (H, W) for input
            ``index``: target t's region is where it equals ``explanation.target[index, t]``.
        index: the input.
        targets: the targets (columns of ``explanation.target``).
        size: (H, W) of the image; regions of another size are resized (nearest).

    Returns:
        A bool (H, W) region per target, or None per target without ``regions``.

    Raises:
        TypeError / ValueError: regions of another layout, batch or count than the explanation's.
    """
    if regions is None:  # the regions the explanation's bound target keeps in memory (a slice: its own)
        kept = None if explanation.scorer is None else getattr(explanation.scorer.info, "regions", None)
        if not isinstance(kept, torch.Tensor) or kept.shape[:2] != explanation.target.shape:
            return [None] * len(targets)
        regions = kept
    if isinstance(regions, Region):
        if regions.mask is None:
            raise ValueError("`regions` is a Region without mask=: pass the model's predicted label map instead")
        regions = regions.mask
    if not isinstance(regions, torch.Tensor):
        raise TypeError(f"`regions` must be a tensor or a Region, got {describe(regions)}")
    regions = regions.detach().cpu()
    b, t = explanation.target.shape
    if regions.dtype.is_floating_point or regions.dtype == torch.bool:  # masks, one per target
        if regions.ndim not in (2, 3, 4) or (regions.ndim == 4 and regions.shape[0] not in (1, b)):
            raise ValueError(f"`regions` masks must be (H, W), (R, H, W) or ({b}, R, H, W), got {describe(regions)}")
        per = regions[index % regions.shape[0]] if regions.ndim == 4 else regions.reshape(-1, *regions.shape[-2:])
        if per.shape[0] != t:
            raise ValueError(f"`regions` must hold one mask per target ({t}), got {per.shape[0]}")
        chosen = per[list(targets)] > 0
    else:  # a label map: target t's region is its class's predicted pixels
        if regions.ndim == 4 and regions.shape[1] == 1:
            regions = regions[:, 0]
        if regions.ndim not in (2, 3) or (regions.ndim == 3 and regions.shape[0] != b):
            raise ValueError(f"`regions` label maps must be ({b}, H, W) or (H, W), got {describe(regions)}")
        labels = regions if regions.ndim == 2 else regions[index]
        classes = explanation.target[index, list(targets)].cpu()
        chosen = labels.unsqueeze(0) == classes.view(-1, 1, 1)
    if tuple(chosen.shape[-2:]) != tuple(size):
        chosen = torch.nn.functional.interpolate(chosen[None].float(), size=size, mode="nearest")[0] > 0
    return list(chosen)


def plot_regions(
    explanation: Explanation,
    images: torch.Tensor,
    *,
    index: int = 0,
    regions: object = None,
    class_names: Optional[_colours.ClassNames] = None,
    ncols: int = 4,
) -> Figure:
    """One panel per valid target of image ``index``: the coefficient heatmap, the region outlined.

    Each panel shows the image (faded) under ``explanation.heatmap()`` of one target in one diverging
    colour map (``RdBu_r``) shared by all panels (red: the segment supports the target; blue: it opposes
    it), the target's region outlined (black on a white halo) when ``regions`` says where it is, and a
    title with the class and the surrogate's weighted R². Padded targets (``explanation.target_valid``
    False) are skipped.

    Args:
        explanation: an explanation of (B, C, H, W) images, usually with ``target=Region(...)``.
        images: (B, C, H, W) the explained images.
        index: which image.
        regions: where the regions are (see ``region_masks``): None (those the explanation's bound
            target keeps in memory; no outlines for a loaded or sliced explanation), the ``Region`` or
            masks (H, W) / (R, H, W) / (B, R, H, W) given to it, or the model's predicted label map
            (B, H, W), e.g. ``model(images)["out"].argmax(1)``.
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            titles (default: the class index).
        ncols: the most panels per row.

    Returns:
        The matplotlib figure.

    Raises:
        ValueError: an index out of range, images of another batch or size, or no valid target to draw.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> import torchlime
        >>> seg = torch.nn.Conv2d(3, 4, 1)
        >>> x = torch.rand(2, 3, 8, 8)
        >>> exp = torchlime.explain(seg, x, torch.arange(64).view(1, 1, 8, 8) // 16, target=Region(), n_samples=64)
        >>> fig = plot_regions(exp, x, index=1, regions=seg(x).argmax(1))
        >>> len([ax for ax in fig.axes if ax.images]) == int(exp.target_valid[1].sum())
        True
    """
    plt = require("matplotlib.pyplot", "viz", "plot_regions")
    check_positive_int(ncols, "ncols")
    b, n_t = explanation.target.shape
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or images.shape[0] != b:
        raise ValueError(f"`images` must be the ({b}, C, H, W) explained images, got {describe(images)}")
    if tuple(explanation.input_shape[-2:]) != tuple(images.shape[-2:]):
        raise ValueError(f"`images` are {tuple(images.shape[-2:])}, the explanation's {explanation.input_shape}")
    if isinstance(index, bool) or not isinstance(index, int) or not -b <= index < b:
        raise ValueError(f"`index` must be an int in [0, {b}), got {index!r}")
    index = index % b
    valid = explanation.target_valid
    targets = [t for t in range(n_t) if valid is None or bool(valid[index, t])]
    if not targets:
        raise ValueError(f"image {index} has no valid target to draw (explanation.target_valid[{index}] is all False)")
    size = (int(images.shape[-2]), int(images.shape[-1]))
    masks = region_masks(explanation, regions, index, targets, size)
    heat = explanation.heatmap()[index].detach().float().cpu().reshape(n_t, -1, *size)[:, 0]  # (T, H, W)
    lim = max(float(heat[targets].abs().max()), 1e-12)
    img = to_hwc(images[index])
    record = None if explanation.run is None else explanation.run.targets
    word = "target" if record is None else record.noun
    rows, cols = -(-len(targets) // ncols), min(ncols, len(targets))
    fig: Figure
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.1 * cols + 1.4, 3.0 * rows + 0.4), squeeze=False, layout="constrained"
    )
    used = []
    for ax, t, mask in zip(axes.flat, targets, masks):
        ax.imshow(img, alpha=0.35, cmap="gray")
        im = ax.imshow(heat[t].numpy(), cmap=_colours.CMAP, vmin=-lim, vmax=lim, alpha=0.75)
        if mask is not None and bool(mask.any()):
            ring = torch.nn.functional.pad(mask.float(), (1, 1, 1, 1)).numpy()  # closed at the image's borders
            grid = (range(-1, size[1] + 1), range(-1, size[0] + 1))
            for colour, width in (("white", 3.0), ("black", 1.4)):  # black on a white halo: seen on red and blue
                ax.contour(*grid, ring, levels=[0.5], colors=colour, linewidths=width)
            ax.set_xlim(-0.5, size[1] - 0.5)
            ax.set_ylim(size[0] - 0.5, -0.5)
        name = _colours.class_name(int(explanation.target[index, t]), class_names)
        ax.set_title(f"{word} {name}: R² {float(explanation.score[index, t]):.2f}", fontsize=9)
        used.append(ax)
    for ax in axes.flat:
        ax.axis("off")
    bar = fig.colorbar(im, ax=used, fraction=0.046, pad=0.02)
    bar.set_label(LEGEND, fontsize=8)
    outline = "outline: the region" if any(m is not None for m in masks) else "no outline: pass regions="
    fig.suptitle(f"image {index}: {len(targets)} target(s); {outline}", fontsize=10)
    unreliable = None if explanation.run is None else explanation.run.unreliable
    if unreliable:
        fig.text(0.5, 0.01, f"unreliable fit: {unreliable}", color="#d62728", ha="center")
    return fig
