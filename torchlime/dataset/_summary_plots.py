"""``Summary``: what ``summarize`` returns (per-class importance of every feature), its table, JSON and pictures.

The pictures follow the one colour convention (``torchlime._util.colours``): red supports the target, blue
opposes it. ``plot_bars`` draws the mean |weight| of the top features of each class as horizontal bars,
coloured by the sign of the mean signed weight, with the bootstrap interval as error bars;
``plot_beeswarm`` draws one dot per explanation (a (row, target) pair) at its signed weight. matplotlib
is imported only when a picture is drawn (``pip install torchlime[viz]``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union, cast

import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import check_positive_int, require

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: what ``Summary.to_dict`` writes as its ``format``
FORMAT = "torchlime.summary/1"
Row = dict[str, Union[int, float, str, None]]


def _plain(t: torch.Tensor) -> list[object]:
    """A tensor as nested lists of Python numbers, NaN as None (JSON has no NaN)."""
    values: list[object] = t.tolist()
    if t.is_floating_point():
        return cast(list[object], json.loads(json.dumps(values).replace("NaN", "null")))
    return values


@dataclass(frozen=True, eq=False)
class Summary:
    """Per-class importance of every feature over a result folder (what ``summarize`` returns).

    A class's statistics run over its (row, target) pairs: the rows whose explained target is that class
    (with several targets per row, each pair counts for its class).

    Attributes:
        classes: long (C,) the classes, ascending; -1: every pair pooled (``by_class=False``).
        names: the F feature names.
        mean_abs: float64 (C, F) mean |weight| of each feature per class.
        mean: float64 (C, F) mean signed weight (its sign: supports (> 0) or opposes the class).
        std: float64 (C, F) standard deviation of the signed weight.
        low: float64 (C, F) lower end of the bootstrap 95% interval of ``mean_abs`` (NaN: no row of the
            class in the bootstrap's subsample).
        high: float64 (C, F) upper end of that interval.
        count: long (C,) the (row, target) pairs of each class.
        rows: long (C,) the rows with at least one pair of each class (the units the bootstrap resamples).
        n_rows: the rows read.
        n_boot: bootstrap resamples.
        generator: the seed of the bootstrap.
        bootstrap_rows: the rows the bootstrap drew from (``n_rows`` unless a budget made it subsample).
        dots: float32 (C, D, K) signed weights of up to D pairs per class for the K features of ``dot_features``
            (NaN padding), for ``plot_beeswarm``.
        dot_features: long (C, K) the features of ``dots``: each class's top K by ``mean_abs``.
        notes: what the numbers rest on (a subsample, features compared by count only).
    """

    classes: torch.Tensor
    names: tuple[str, ...]
    mean_abs: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    low: torch.Tensor
    high: torch.Tensor
    count: torch.Tensor
    rows: torch.Tensor
    n_rows: int
    n_boot: int
    generator: int
    bootstrap_rows: int
    dots: torch.Tensor
    dot_features: torch.Tensor
    notes: tuple[str, ...] = ()

    def order(self, k: int = 10) -> torch.Tensor:
        """Long (C, min(k, F)) each class's top k features by mean |weight| (ties: the lower index first).

        Args:
            k: features per class (>= 1).

        Returns:
            long (C, min(k, F)) feature indices, largest mean |weight| first.
        """
        check_positive_int(k, "k")
        return self.mean_abs.argsort(dim=1, descending=True, stable=True)[:, :k]

    def table(self, k: int = 10) -> list[Row]:
        """The top k features of each class as rows, sorted by mean |weight| descending within each class.

        Args:
            k: features per class (>= 1).

        Returns:
            One dict per (class, feature): ``class`` (None when pooled), ``rank`` (1 = first), ``feature``,
            ``name``, ``mean_abs``, ``mean``, ``std``, ``low``, ``high``, ``count``; classes in ascending order.
        """
        top = self.order(k)
        picked = {
            name: getattr(self, name).gather(1, top).tolist() for name in ("mean_abs", "mean", "std", "low", "high")
        }
        out: list[Row] = []
        for i, (c, n) in enumerate(zip(self.classes.tolist(), self.count.tolist())):
            for r, j in enumerate(top[i].tolist()):
                row: Row = {"class": None if c < 0 else c, "rank": r + 1, "feature": j, "name": self.names[j]}
                row.update({name: None if math.isnan(v[i][r]) else v[i][r] for name, v in picked.items()})
                row["count"] = n
                out.append(row)
        return out

    def to_dict(self) -> dict[str, object]:
        """Everything but the beeswarm's dots as plain data (lists, numbers, strings; NaN as None).

        Returns:
            A JSON-ready dict: ``format``, ``classes``, ``names``, ``count``, ``rows``, ``mean_abs``, ``mean``,
            ``std``, ``low``, ``high`` (C x F nested lists), ``n_rows``, ``n_boot``, ``generator``,
            ``bootstrap_rows``, ``notes``.
        """
        stats = ("classes", "count", "rows", "mean_abs", "mean", "std", "low", "high")
        return {
            "format": FORMAT,
            "names": list(self.names),
            **{name: _plain(getattr(self, name)) for name in stats},
            **{name: getattr(self, name) for name in ("n_rows", "n_boot", "generator", "bootstrap_rows")},
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        """``to_dict()`` as a JSON string (indented).

        Returns:
            The JSON text.
        """
        return json.dumps(self.to_dict(), indent=1)

    def save(self, path: Union[str, os.PathLike[str]]) -> Path:
        """Write ``to_json()`` to ``path``.

        Args:
            path: the JSON file.

        Returns:
            The path written.
        """
        out = Path(path)
        out.write_text(self.to_json() + "\n")
        return out

    def plot_bars(
        self, k: int = 10, *, class_names: Optional[_colours.ClassNames] = None, max_classes: int = 6
    ) -> Figure:
        """Horizontal bars of each class's top k features by mean |weight|, with their bootstrap intervals.

        A bar is red when the feature's mean signed weight supports the class, blue when it opposes it
        (``_colours``); the error bar is the bootstrap 95% interval of the mean |weight|.

        Args:
            k: features per class.
            class_names: names of the classes (a sequence indexed by class or a mapping class -> name), for
                the panel titles.
            max_classes: panels drawn at most: the classes with the most pairs.

        Returns:
            The matplotlib ``Figure`` (one panel per class).
        """
        fig, panels = _panels(self, k, max_classes, "plot_bars")
        top = self.order(k)
        for ax, i in panels:
            feats = top[i].flip(0)  # the largest at the top
            width, mean = self.mean_abs[i, feats], self.mean[i, feats]
            err = torch.stack((width - self.low[i, feats], self.high[i, feats] - width)).clamp_min(0).nan_to_num(0)
            colours = [_colours.RED_HEX if float(v) >= 0 else _colours.BLUE_HEX for v in mean]
            ax.barh(range(len(feats)), width.numpy(), xerr=err.numpy(), color=colours, ecolor="#444", capsize=2)
            _label(ax, self, i, feats, class_names, "mean |weight| (95% bootstrap interval)")
        _legend(fig, "mean weight")
        return fig

    def plot_beeswarm(
        self, k: int = 10, *, class_names: Optional[_colours.ClassNames] = None, max_classes: int = 6
    ) -> Figure:
        """Per feature a row of dots, one per explanation (a (row, target) pair), at its signed weight.

        Each class's top k features by mean |weight|; dots are red where the weight supports the class,
        blue where it opposes it, and jittered vertically by a fixed sequence (the same picture every time).
        At most ``DOTS`` pairs per class are drawn (a seeded subsample).

        Args:
            k: features per class (all F when fewer), at most the K features per class the summary keeps dots of.
            class_names: names of the classes (a sequence indexed by class or a mapping class -> name), for
                the panel titles.
            max_classes: panels drawn at most: the classes with the most pairs.

        Returns:
            The matplotlib ``Figure`` (one panel per class).

        Raises:
            ValueError: ``k`` over the features kept per class.
        """
        check_positive_int(k, "k")
        kept, k = self.dot_features.shape[1], min(k, len(self.names))
        if k > kept:
            raise ValueError(f"`k` must be at most {kept} (the features per class with dots kept), got {k}")
        fig, panels = _panels(self, k, max_classes, "plot_beeswarm")
        d = self.dots.shape[1]
        jitter = ((torch.arange(d, dtype=torch.float64) * 0.6180339887498949) % 1.0 - 0.5) * 0.7
        for ax, i in panels:
            feats = self.dot_features[i, :k].flip(0)
            x = self.dots[i, :, :k].flip(1).double()  # (D, k): column r is the feature drawn at height r
            y = torch.arange(x.shape[1], dtype=torch.float64) + jitter.unsqueeze(1)
            shown = ~x.isnan()
            xs, ys = x[shown], y.expand_as(x)[shown]
            colours = [_colours.RED_HEX if v > 0 else _colours.BLUE_HEX if v < 0 else "#999999" for v in xs.tolist()]
            ax.scatter(xs.numpy(), ys.numpy(), c=colours, s=9, alpha=0.7, linewidths=0)
            ax.axvline(0, color="#444", lw=0.8)
            _label(ax, self, i, feats, class_names, "weight of each explanation")
        _legend(fig, "weight")
        return fig


def _panels(summary: Summary, k: int, max_classes: int, what: str) -> tuple[Figure, list[tuple[Axes, int]]]:
    """A figure with one panel per drawn class (those with the most pairs, in class order)."""
    plt = require("matplotlib.pyplot", "viz", what)
    check_positive_int(k, "k")
    check_positive_int(max_classes, "max_classes")
    c = summary.classes.shape[0]
    chosen = summary.count.argsort(descending=True, stable=True)[:max_classes].sort()[0].tolist()
    cols = min(3, len(chosen))
    rows = -(-len(chosen) // cols)
    n = min(k, len(summary.names))
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, (0.32 * n + 1.3) * rows + 0.5), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(chosen) :]:
        ax.axis("off")
    if c > len(chosen):
        fig.suptitle(f"{len(chosen)} of {c} classes (those with the most explanations)", fontsize=9)
    return fig, list(zip(flat, chosen))


def _label(
    ax: Axes, summary: Summary, i: int, feats: torch.Tensor, class_names: Optional[_colours.ClassNames], xlabel: str
) -> None:
    c = int(summary.classes[i])
    title = "every target" if c < 0 else f"class {_colours.class_name(c, class_names)}"
    ax.set_yticks(range(len(feats)), [summary.names[j] for j in feats.tolist()], fontsize=8)
    ax.set_title(f"{title} ({int(summary.count[i])} explanations)", fontsize=9)
    ax.set_xlabel(xlabel, fontsize=8)


def _legend(fig: Figure, what: str) -> None:
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=_colours.RED_HEX, label=f"supports ({what} > 0)"),
        Patch(facecolor=_colours.BLUE_HEX, label=f"opposes ({what} < 0)"),
    ]
    fig.tight_layout(rect=(0, min(0.3, 0.45 / fig.get_figheight()), 1, 1))  # room for the legend (0.45 in)
    fig.legend(handles=handles, title=_colours.LEGEND, loc="lower center", ncol=2, fontsize=7, title_fontsize=7)
