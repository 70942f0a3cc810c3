"""Pictures of image explanations (matplotlib is optional: ``pip install torchlime[viz]``).

``image_and_mask`` is tensor-only (the equivalent of lime's ``get_image_and_mask``;
segment borders come from ``segments.boundaries``);
``plot_image_explanation`` and ``save_image_explanation`` draw a four-panel figure:
input, segment boundaries, heatmap over the image, the top segments by |weight| (red supports the target,
blue opposes it, as in every picture: ``torchlime._util.colours``). Like every picture of torchlime
they take the explanation first, then what is drawn (a save function the path last), then options
by keyword, and a plot function returns the matplotlib ``Figure``.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast

import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_positive_int, require
from torchlime.engine.explanation import Explanation
from torchlime.image._pixels import to_hwc, top_segments
from torchlime.image.segments import boundaries
from torchlime.image.viz_boxes import box_caption, outline

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from numpy.typing import NDArray


def image_and_mask(
    images: torch.Tensor,
    explanation: Explanation,
    *,
    target_index: int = 0,
    positive_only: bool = True,
    negative_only: bool = False,
    k: int = 5,
    hide_rest: bool = False,
    min_weight: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Lime's ``get_image_and_mask`` for a batch, on the images' device.

    Args:
        images: (B, C, H, W) the explained images (``image_and_mask(explanation, images)``, the order of
            ``plot_image_explanation``, works too).
        explanation: their explanation (features (B, 1, H, W)).
        target_index: which explained target (column of ``explanation.target``).
        positive_only: keep only features with weight > min_weight (the default).
        negative_only: with ``positive_only=False``, keep only features with weight < -min_weight.
        min_weight: the weight a kept feature must exceed (in absolute value when neither flag is set).
        k: how many of the strongest features to keep (lime's ``num_features``).
        hide_rest: zero the pixels of the features not kept.

    Returns:
        ``(images_out (B, C, H, W), mask (B, H, W) long)``: mask is 1 for kept
        positive features, -1 for kept negative ones (when neither flag is set), else 0.
    """
    if isinstance(images, Explanation) and isinstance(explanation, torch.Tensor):  # the plotting functions' order
        images, explanation = explanation, images
    check_positive_int(k, "k")
    coef = explanation.coef[:, target_index]  # (B, F)
    key = coef if positive_only else (-coef if negative_only else coef.abs())
    idx = top_segments(key, explanation.valid, k)
    chosen = torch.zeros_like(coef, dtype=torch.bool).scatter_(1, idx, True)
    if positive_only:
        chosen &= coef > min_weight
    elif negative_only:
        chosen &= coef < -min_weight
    else:
        chosen &= coef.abs() > min_weight
    sign = torch.where(coef > 0, 1, -1) * chosen
    labels = explanation.features.reshape(coef.shape[0], -1).clamp_min(0).to(coef.device)
    mask = sign.gather(1, labels).reshape(coef.shape[0], *images.shape[-2:])
    out = images * (mask != 0).unsqueeze(1) if hide_rest else images.clone()
    return out, mask.long()


def plot_image_explanation(
    explanation: Explanation,
    images: torch.Tensor,
    *,
    index: int = 0,
    target_index: int = 0,
    k: int = 5,
    class_names: Optional[_colours.ClassNames] = None,
    truth: Optional[torch.Tensor] = None,
) -> Figure:
    """A matplotlib figure with four panels for input ``index``.

    Panels: the input; segment boundaries; the coefficient heatmap over a faded image (one diverging map,
    ``RdBu_r``: red supports the target, blue opposes it); the top ``k`` segments by |weight|, the
    supporting ones tinted and outlined red, the opposing ones blue, the rest faded (segments of weight 0
    are never shown; the title says when fewer than ``k`` are left, the panel says why when none is).
    ``truth`` (H, W) bool, when known, is outlined in the last panel. For a ``torchlime.targets.Boxes``
    explanation the title names the explained box (``"box 1 of 2: (x1, y1, x2, y2), label 3"``, from
    ``explanation.run.targets``), outlined on the input and the heatmap.

    Args:
        explanation: the explanation of ``images`` (features (B, 1, H, W)).
        images: (B, C, H, W) the explained images.
        index: which image.
        target_index: which explained target (column of ``explanation.target``).
        k: how many top segments (largest |weight|) the last panel shows.
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            legend ("supports 'cat'"; default: the class index).
        truth: optional bool (H, W) ground-truth region, outlined in the last panel.

    Returns:
        The matplotlib ``Figure``.
    """
    exp = explanation
    plt = require("matplotlib.pyplot", "viz", "plot_image_explanation")
    from matplotlib.patches import Patch

    check_positive_int(k, "k")
    b = len(exp)
    if isinstance(index, torch.Tensor) and index.ndim == 0 and not index.is_floating_point():
        index = int(index)  # labels-style 0-d indices, as before
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not -b <= index < b:
        raise IndexError(f"`index` must be an int in [-{b}, {b}) for an explanation of {b} image(s), got {index!r}")
    index = int(index) % b
    # drawn at a few times the resolution of small images, so borders are thin lines
    zoom = max(1, 256 // max(images.shape[-2:]))

    def up(t: torch.Tensor) -> torch.Tensor:
        return t.repeat_interleave(zoom, -2).repeat_interleave(zoom, -1)

    img = to_hwc(up(images[index]))
    labels = up(exp.features[index : index + 1, 0].cpu())
    edge_t = boundaries(labels)[0]
    halo = torch.nn.functional.max_pool2d(edge_t[None, None].float(), 3, 1, 1)[0, 0].bool().numpy()
    edges = edge_t.numpy()
    heat = up(exp.heatmap(target_index)[index, 0].detach().float().cpu()).numpy()
    one = _slice(exp, index)
    _, mask = image_and_mask(images[index : index + 1], one, target_index=target_index, k=k, positive_only=False)
    sign = up(mask[0].cpu())  # 1: a top segment that supports the target, -1: one that opposes it, else 0
    coef = one.coef[0, target_index, : int(one.n_features[0])].detach().cpu()
    counts = (int((coef != 0).sum()), int(coef.numel()))  # segments of non-zero weight, segments
    target = int(exp.target[index, target_index])
    name = _colours.class_name(target, class_names)
    box = box_caption(exp, index, target_index, class_names)  # a Boxes target: which box, named
    name = name if box is None else f"box {target_index}"
    fig: Figure
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.9))
    axes[0].imshow(img)
    axes[0].set_title("input")
    over = (img.copy() if img.ndim == 3 else plt.cm.gray(img)[..., :3]).copy()
    over[halo] = (0.0, 0.0, 0.0)  # borders: white on a black halo, visible on any image
    over[edges] = (1.0, 1.0, 1.0)
    axes[1].imshow(over)
    axes[1].set_title(f"{int(exp.n_features[index])} segments")
    lim = max(abs(heat).max(), 1e-12)
    axes[2].imshow(img, alpha=0.35, cmap="gray")
    im = axes[2].imshow(heat, cmap=_colours.CMAP, vmin=-lim, vmax=lim, alpha=0.75)
    bar = fig.colorbar(im, ax=axes[2], fraction=0.046, pad=0.04)
    bar.set_label(_colours.label(f"weight for '{name}'"), fontsize=7)
    axes[2].set_title(f"weights (R² {float(exp.score[index, target_index]):.2f})")
    handles = [
        Patch(color=_colours.RED_HEX, label=f"supports '{name}'"),
        Patch(color=_colours.BLUE_HEX, label=f"opposes '{name}'"),
    ]
    _draw_top(axes[3], over, sign, k, counts)
    if truth is not None:
        axes[3].contour(up(truth.cpu()).numpy().astype(float), levels=[0.5], colors="lime", linewidths=1.2)
        chosen = torch.from_numpy(sign.numpy() > 0)  # the top segments that support the target
        truth_up = up(truth.cpu()).bool()
        covered = float((chosen & truth_up).sum()) / max(1, int(truth_up.sum()))
        axes[3].set_title(axes[3].get_title() + f"\n(green: truth, {100 * covered:.0f}% covered by red)")
    columns = 2 if len(name) <= 12 else 1  # a long name: one swatch a line, within the panel
    axes[3].legend(
        handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=columns, fontsize=8, frameon=False
    )
    if box is not None and box[1] is not None:
        for ax in (axes[0], axes[2]):
            outline(ax, box[1], zoom, -0.5)
    unreliable = None if exp.run is None else exp.run.unreliable
    title = ([] if box is None else [box[0]]) + ([f"unreliable fit: {unreliable}"] if unreliable else [])
    if title:
        fig.suptitle("\n".join(title), color="#d62728" if unreliable else "black", fontsize=10)
    for ax in axes:
        ax.axis("off")
    fig.tight_layout()
    return fig


def _draw_top(ax: Axes, over: NDArray[np.float32], sign: torch.Tensor, k: int, counts: tuple[int, int]) -> None:
    """The top-segments panel: (H, W, 3) ``over`` faded, the kept segments tinted and outlined by ``sign``.

    Args:
        ax: the panel.
        over: (H, W, 3) the image with its segment borders, in [0, 1].
        sign: long (H, W): 1 on the top segments that support the target, -1 on those that oppose it, else 0.
        k: how many top segments were asked for.
        counts: (segments of non-zero weight, segments) of the input.
    """
    import numpy as np

    pos, neg = (sign > 0).numpy(), (sign < 0).numpy()
    shown = over * 0.15
    for where, rgb in ((pos, _colours.RED), (neg, _colours.BLUE)):
        shown[where] = 0.4 * over[where] + 0.6 * np.asarray(rgb, dtype=np.float32) / 255
    ax.imshow(shown)
    for where, colour in ((pos, _colours.RED_HEX), (neg, _colours.BLUE_HEX)):
        if where.any() and not where.all():
            ax.contour(where.astype(float), levels=[0.5], colors=colour, linewidths=1.5)
    nonzero, total = counts
    n = min(k, nonzero)
    if n == 0:
        why = "every segment has weight 0" if total else "the input has no segment"
        ax.set_title("top segments by |weight|: none")
        box = dict(boxstyle="round", fc="white", alpha=0.9)  # readable on the faded image
        ax.text(0.5, 0.5, f"nothing to show:\n{why}", transform=ax.transAxes, ha="center", va="center", bbox=box)
        return
    title = f"top {n} segments by |weight|"
    if n < k:
        title += f" (of {total}" + (f"; {total - nonzero} weigh 0)" if nonzero < total else ")")
    ax.set_title(title)


def _slice(exp: Explanation, index: int) -> Explanation:
    """The explanation of input ``index`` alone (B = 1)."""
    keep = slice(index, index + 1)
    return Explanation(
        exp.coef[keep],
        exp.intercept[keep],
        exp.score[keep],
        exp.local_pred[keep],
        exp.target[keep],
        exp.features[keep],
        exp.n_features[keep],
        exp.input_shape,
    )


def save_image_explanation(
    explanation: Explanation, images: torch.Tensor, path: Union[str, Path], *, index: int = 0, **kwargs: Any
) -> Path:
    """Draw ``plot_image_explanation`` and write it as a PNG.

    Args:
        explanation: the explanation of ``images`` (features (B, 1, H, W)).
        images: (B, C, H, W) the explained images.
        path: the PNG file to write (its folder is created).
        index: which image.
        **kwargs: ``plot_image_explanation``'s options (target_index, k, class_names, truth).

    Returns:
        ``path`` as a ``Path``.
    """
    plt = require("matplotlib.pyplot", "viz", "save_image_explanation")

    fig = plot_image_explanation(explanation, images, index=index, **kwargs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # every label inside the PNG
    plt.close(fig)
    return path


def plot_coefficients_with_uncertainty(
    explanation: Explanation,
    *,
    index: int = 0,
    target_index: int = 0,
    z: float = 1.96,
    feature_names: Optional[list[str]] = None,
    class_names: Optional[_colours.ClassNames] = None,
    ax: Optional[Axes] = None,
) -> Figure:
    """Coefficients of one (input, target) with error bars ``coef +- z * coef_se`` (95 % for z = 1.96).

    For explanations with standard errors (``Explanation.coef_se``: ridge's by default, the posterior sd
    ``coef_std`` of ``surrogate="bayes"``, a lasso's bootstrap with kept samples): one bar per feature of
    input ``index`` (its F_b features), whiskers from coef - z se to coef + z se; bars whose
    interval excludes 0 are solid, the others faded; red bars support the target, blue ones oppose it
    (the legend says so, naming the class: "supports 'cat'"). Any modality's explanation works.

    Args:
        explanation: an explanation with ``coef_se`` (B, T, F).
        index: which input.
        target_index: which explained target (column of ``explanation.target``).
        z: half-width of the intervals in standard errors.
        feature_names: labels of the F_b features (default: their ids).
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            title and legend (default: the class index).
        ax: a matplotlib axes to draw into (default: a new figure).

    Returns:
        The matplotlib ``Figure`` (the one of ``ax`` when it is given).

    Raises:
        ValueError: ``explanation`` without ``coef_se``, an index out of range, or a wrong number of names.

    Example:
        >>> import matplotlib; matplotlib.use("Agg")
        >>> from torchlime import explain
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> exp = explain(model, torch.rand(1, 1, 8), torch.arange(8).view(1, 1, 8), surrogate="bayes", n_samples=100)
        >>> fig = plot_coefficients_with_uncertainty(exp, index=0)
        >>> len(fig.axes[0].patches)  # one bar per feature
        8
    """
    from torchlime._util.checks import check_positive_float

    exp = explanation
    plt = require("matplotlib.pyplot", "viz", "plot_coefficients_with_uncertainty")
    from matplotlib.patches import Patch

    check_positive_float(z, "z")
    se = exp.coef_se
    if se is None:
        raise ValueError(
            f"`explanation` must carry standard errors (coef_se), as ridge, KernelSHAP and bayes explanations do "
            f"and lasso ones with return_samples=True; got one without (se_method {exp.se_method!r})"
        )
    b, t, _ = exp.coef.shape
    if not -b <= index < b or not -t <= target_index < t:
        raise ValueError(f"`index` must be in [0, {b}) and `target_index` in [0, {t}), got {index} and {target_index}")
    n = int(exp.n_features[index])
    coef = exp.coef[index, target_index, :n].detach().double().cpu()
    half = z * se[index, target_index, :n].detach().double().cpu()
    names = [str(i) for i in range(n)] if feature_names is None else [str(s) for s in feature_names]
    if len(names) != n:
        raise ValueError(f"`feature_names` must name the {n} features of input {index}, got {len(names)} names")
    sure = ((coef - half > 0) | (coef + half < 0)).tolist()
    colours = [(_colours.RED_HEX if c > 0 else _colours.BLUE_HEX) for c in coef.tolist()]
    fig: Figure = (
        cast("Figure", ax.figure)  # a SubFigure for the axes of a subfigure
        if ax is not None
        else plt.subplots(figsize=(max(4.0, 0.35 * n + 2), 3.2))[0]
    )
    ax = ax if ax is not None else fig.axes[0]
    bars = ax.bar(range(n), coef.numpy(), color=colours, yerr=half.numpy(), capsize=2, ecolor="black")
    for bar, solid in zip(bars, sure):
        bar.set_alpha(1.0 if solid else 0.35)
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(range(n))
    ax.set_xticklabels(names, rotation=90 if n > 12 else 0, fontsize=8)
    ax.set_xlabel("feature")
    ax.set_ylabel(f"weight (± {z:g} se)")
    name = _colours.class_name(int(exp.target[index, target_index]), class_names)
    ax.legend(
        handles=[
            Patch(color=_colours.RED_HEX, label=f"supports '{name}'"),
            Patch(color=_colours.BLUE_HEX, label=f"opposes '{name}'"),
        ],
        fontsize=8,
        title=_colours.LEGEND,
        title_fontsize=8,
    )
    ax.set_title(f"input {index}, target {name}\nsolid: the interval excludes 0", fontsize=9)
    fig.tight_layout()
    return fig
