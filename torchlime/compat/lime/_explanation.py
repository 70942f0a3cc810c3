"""lime's explanation objects: ``Explanation`` (text, tabular) and ``ImageExplanation``, with lime's accessors.

They hold what lime's hold (``local_exp``, ``intercept``, ``score``, ``local_pred``, ``top_labels``,
``predict_proba``, ...) and the torchlime ``Explanation`` they were read from (``.result``).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np
from numpy.typing import NDArray

from torchlime._util.checks import require
from torchlime.compat.lime._common import RandomState, ranked
from torchlime.compat.lime._domain import DomainMapper, TableDomainMapper
from torchlime.compat.lime._html import highlighted_text
from torchlime.engine.explanation import Explanation as Result

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class Explanation:
    """A lime ``Explanation`` of one text or table row.

    Attributes:
        mode: "classification" or "regression".
        class_names: the class names ("0", "1", ... when none were given).
        local_exp: label -> [(feature id, weight)], largest |weight| first (lime's ``as_map``).
        intercept: label -> the surrogate's intercept.
        score: the weighted R² of the surrogate of the label lime explains last (the top one with
            ``top_labels``, else the last of ``labels``).
        local_pred: the surrogate's prediction at the instance, last label (an array of one value).
        predict_proba: (K,) the model's scores of the instance (classification).
        top_labels: the labels by descending score when ``top_labels`` was asked, else None.
        predicted_value, min_value, max_value: regression: the prediction and the range of the
            samples' predictions.
        result: the torchlime ``Explanation`` underneath (coef (1, T, F), samples, quality).
        domain_mapper: names the feature ids for ``as_list`` (lime's ``TextDomainMapper`` or
            ``TableDomainMapper``).
        random_state: the explainer's generator (None: numpy's global one).

    Args:
        result: the torchlime ``Explanation`` of one input (coef (1, T, F)).
        names: the F feature names (words, or tabular conditions such as "age <= 30.00").
        mode: "classification" or "regression".
        class_names: the class names, or None for "0", "1", ...
        keep: how many features each label's ``local_exp`` keeps (lime's ``num_features``).
        chosen_only: keep only features with a weight (lime's "lasso_path" may choose fewer than ``keep``).
        last: which of the T labels gives ``score`` and ``local_pred`` (lime reports the last it fitted).
        reference: (K,) the model's scores of the instance (classification), or its (1,) prediction
            (regression); None when unknown.
        score_range: regression: the smallest and largest prediction over the samples.
        instance_html: the instance rendered as HTML for ``as_html``.
        domain_mapper: names the feature ids (default: ``names``, in a ``TableDomainMapper``).
        random_state: the explainer's generator, kept as lime keeps it.

    A text explanation also knows its ``text`` and every word's ``word_starts`` (character positions),
    from which ``as_html`` draws lime's "Text with highlighted words" panel.
    """

    def __init__(  # noqa: PLR0913
        self,
        result: Result,
        names: Sequence[str],
        *,
        mode: str = "classification",
        class_names: Optional[Sequence[object]] = None,
        keep: int,
        chosen_only: bool = False,
        last: int = -1,
        reference: Optional[NDArray[np.float64]] = None,
        score_range: tuple[float, float] = (0.0, 1.0),
        instance_html: str = "",
        domain_mapper: Optional[DomainMapper] = None,
        random_state: RandomState = None,
    ) -> None:
        self.result, self.names, self.mode = result, list(names), mode
        self.random_state = random_state
        self.domain_mapper: DomainMapper = (
            domain_mapper
            if domain_mapper is not None
            else TableDomainMapper(self.names, [""] * len(self.names), np.zeros(len(self.names)), [])
        )
        self.instance_html = instance_html
        self.local_exp: dict[int, list[tuple[int, float]]] = {}
        self.intercept: dict[int, float] = {}
        self.top_labels: Optional[list[int]] = None
        self.predict_proba: Optional[NDArray[np.float64]] = None
        self.dummy_label = 1
        self.word_starts: Optional[list[list[int]]] = None  # text: every word's character positions
        self.text: Optional[str] = None  # text: the explained text, for the highlighted panel of ``as_html``
        targets = [int(t) for t in result.target[0].tolist()]
        n = int(result.n_features[0])
        for j, label in enumerate(targets):
            self.local_exp[label] = ranked(result.coef[0, j], n, keep, chosen_only)
            self.intercept[label] = float(result.intercept[0, j])
        self.score = float(result.score[0, last])
        self.local_pred = np.array([float(result.local_pred[0, last])])
        if mode == "regression":
            self.class_names = ["negative", "positive"]
            self.predicted_value = float(np.ravel(reference)[0]) if reference is not None else None
            self.min_value, self.max_value = score_range
            self.intercept[1] = self.intercept[0]
            self.local_exp[1] = list(self.local_exp[0])
            self.local_exp[0] = [(f, -w) for f, w in self.local_exp[1]]
        else:
            self.predict_proba = None if reference is None else np.asarray(reference, dtype=float)
            width = len(reference) if reference is not None else max(targets) + 1
            self.class_names = (
                [str(c) for c in class_names] if class_names is not None else [str(x) for x in range(width)]
            )

    # ------------------------------------------------------------------ lime's accessors
    def available_labels(self) -> list[int]:
        """The explained labels (``top_labels`` order when it was asked)."""
        if self.mode != "classification":
            raise NotImplementedError("Not supported for regression explanations.")
        return list(self.top_labels) if self.top_labels else list(self.local_exp)

    def _label(self, label: int) -> int:
        key = label if self.mode == "classification" else self.dummy_label
        if key not in self.local_exp:
            raise KeyError(f"label {label} was not explained; explained labels: {sorted(self.local_exp)}")
        return key

    def as_list(self, label: int = 1, **kwargs: bool) -> list[tuple[str, float]]:
        """(feature name, weight) of one label, largest |weight| first.

        Args:
            label: the class (lime's default 1; any label for regression).
            **kwargs: passed to ``domain_mapper.map_exp_ids`` (for text, ``positions=True`` appends
                each word's character positions).

        Returns:
            The named weights.
        """
        pairs = self.local_exp[self._label(label)]
        return [(name, float(w)) for name, w in self.domain_mapper.map_exp_ids(pairs, **kwargs)]

    def as_map(self) -> dict[int, list[tuple[int, float]]]:
        """Label -> [(feature id, weight)] (lime's ``local_exp``)."""
        return self.local_exp

    def as_pyplot_figure(self, label: int = 1, figsize: tuple[float, float] = (4, 4), **kwargs: bool) -> Figure:
        """A horizontal bar chart of ``as_list(label)`` (matplotlib figure).

        Args:
            label: the class.
            figsize: the figure's size in inches.
            **kwargs: passed to ``as_list``.

        Returns:
            The matplotlib ``Figure``.
        """
        plt = require("matplotlib.pyplot", "viz", "as_pyplot_figure")
        exp = self.as_list(label=label, **kwargs)[::-1]
        fig: Figure = plt.figure(figsize=figsize)
        vals = [w for _, w in exp]
        plt.barh(np.arange(len(exp)) + 0.5, vals, align="center", color=["green" if v > 0 else "red" for v in vals])
        plt.yticks(np.arange(len(exp)) + 0.5, [n for n, _ in exp])
        title = (
            f"Local explanation for class {self.class_names[label]}"
            if self.mode == "classification"
            else ("Local explanation")
        )
        plt.title(title)
        return fig

    def as_html(
        self,
        labels: Optional[Sequence[int]] = None,
        predict_proba: bool = True,
        show_predicted_value: bool = True,
        **kwargs: bool,
    ) -> str:
        """A self-contained HTML page: the scores, each label's weights as bars, and the instance.

        A text is shown as lime shows it: the words of the first label's explanation highlighted in
        place, in the colour of the class each supports (lime's class colours), more opaque the larger
        its |weight| (``text_html``).

        Args:
            labels: the labels to show (default: every explained one).
            predict_proba: show the model's scores.
            show_predicted_value: show a regression's predicted value.
            **kwargs: lime's page options: ``show_table`` / ``show_all`` (a table's feature / value table,
                of the explained columns or of all), ``text`` / ``opacity`` (a text's highlighted words,
                shaded by weight or not); and ``positions`` (passed to ``as_list``).

        Returns:
            The HTML string (no scripts).

        Raises:
            TypeError: another keyword.
        """
        unknown = sorted(set(kwargs) - {"show_table", "show_all", "text", "opacity", "positions"})
        if unknown:
            raise TypeError(
                f"as_html() got unexpected keywords {unknown}: lime's are show_table, show_all, text and opacity "
                f"(and positions, for as_list)"
            )
        listed = {"positions": True} if kwargs.get("positions") else {}
        if labels is None:
            labels = self.available_labels() if self.mode == "classification" else [self.dummy_label]
        parts = ["<div class='torchlime-lime'>"]
        if predict_proba and self.predict_proba is not None:
            rows = "".join(
                f"<tr><td>{html.escape(self.class_names[i])}</td><td>{p:.3f}</td></tr>"
                for i, p in enumerate(self.predict_proba)
            )
            parts.append(f"<b>Prediction probabilities</b><table>{rows}</table>")
        elif self.mode == "regression" and show_predicted_value:
            parts.append(f"<b>Predicted value</b>: {self.predicted_value}")
        for label in labels:
            pairs = self.as_list(label, **listed)
            top = max((abs(w) for _, w in pairs), default=0.0) or 1.0
            bars = "".join(
                f"<tr><td style='text-align:right'>{html.escape(str(n))}</td><td><div style='background:"
                f"{'#2ca02c' if w > 0 else '#d62728'};width:{int(150 * abs(w) / top)}px;height:10px'></div>"
                f"</td><td>{w:+.4f}</td></tr>"
                for n, w in pairs
            )
            name = self.class_names[label] if self.mode == "classification" else "value"
            parts.append(f"<b>{html.escape(str(name))}</b><table>{bars}</table>")
        if isinstance(self.domain_mapper, TableDomainMapper) and labels:
            table = {k: bool(kwargs[k]) for k in ("show_table", "show_all") if k in kwargs}
            first = self.local_exp[self._label(labels[0])]
            parts.append(self.domain_mapper.visualize_instance_html(first, labels[0], "", "", **table))
        parts.append(self.instance_html)
        if self.text is not None and self.word_starts is not None and labels and kwargs.get("text", True):
            parts.append(self.text_html(labels[0], opacity=bool(kwargs.get("opacity", True))))
        parts.append("</div>")
        return "".join(parts)

    def text_html(self, label: int = 1, opacity: bool = True) -> str:
        """Lime's "Text with highlighted words" panel: the text, each explained word highlighted in place.

        Every occurrence of the words of ``local_exp[label]`` takes the colour of the class it supports,
        as lime draws it: with two classes, class 1's colour for a positive weight and class 0's for a
        negative one; with more, the label's colour for a positive weight and lime's "NOT label" colour
        for a negative one; its opacity is |weight| over the largest |weight| shown.

        Args:
            label: the class whose explanation is drawn (any label for regression).
            opacity: shade each word by its |weight| (False: every explained word fully coloured).

        Returns:
            An HTML fragment (empty for an explanation of no text).
        """
        if self.text is None or self.word_starts is None:
            return ""
        key = self._label(label)
        return highlighted_text(
            self.text, self.word_starts, self.names, self.local_exp[key], key, len(self.class_names), opacity
        )

    def show_in_notebook(
        self, labels: Optional[Sequence[int]] = None, predict_proba: bool = True, **kwargs: bool
    ) -> None:
        """Display ``as_html`` in a notebook (IPython).

        Args:
            labels: as in ``as_html``.
            predict_proba: as in ``as_html``.
            **kwargs: as in ``as_html``.
        """
        display = require("IPython.display", "notebook", "show_in_notebook")
        display.display(display.HTML(self.as_html(labels=labels, predict_proba=predict_proba, **kwargs)))

    def save_to_file(self, file_path: str, labels: Optional[Sequence[int]] = None, **kwargs: bool) -> None:
        """Write ``as_html`` to ``file_path``.

        Args:
            file_path: the HTML file to write.
            labels: as in ``as_html``.
            **kwargs: as in ``as_html``.
        """
        with open(file_path, "w", encoding="utf8") as f:
            f.write(self.as_html(labels=labels, **kwargs))

    def _repr_html_(self) -> str:
        return self.as_html()


class ImageExplanation:
    """lime's ``ImageExplanation``: superpixel weights of one image.

    Attributes:
        image: the (H, W, C) image as given.
        segments: (H, W) integer superpixels (lime's segmentation ids).
        local_exp: label -> [(segment id, weight)], largest |weight| first.
        intercept: label -> the surrogate's intercept.
        score, local_pred: the last label's weighted R² and prediction at the image.
        top_labels: the labels by descending score (when ``top_labels`` was asked).
        result: the torchlime ``Explanation`` underneath.

    Args:
        image: (H, W, C) the image as given.
        segments: (H, W) integer superpixels.
        result: the torchlime ``Explanation`` of the image (coef (1, T, F), one column per superpixel).
        ids: the F segment ids, in the order of the surrogate's columns.
        keep: how many superpixels each label's ``local_exp`` keeps (lime's ``num_features``).
        last: which of the T labels gives ``score`` and ``local_pred``.
        chosen_only: keep only superpixels with a weight (lime's "lasso_path").
    """

    def __init__(
        self,
        image: NDArray[np.number],
        segments: NDArray[np.integer],
        result: Result,
        ids: Sequence[int],
        keep: int,
        last: int = -1,
        chosen_only: bool = False,
    ) -> None:
        self.image, self.segments, self.result = image, segments, result
        self.local_exp: dict[int, list[tuple[int, float]]] = {}
        self.intercept: dict[int, float] = {}
        self.top_labels: Optional[list[int]] = None
        n = int(result.n_features[0])
        for j, label in enumerate(int(t) for t in result.target[0].tolist()):
            self.local_exp[label] = [(int(ids[f]), w) for f, w in ranked(result.coef[0, j], n, keep, chosen_only)]
            self.intercept[label] = float(result.intercept[0, j])
        self.score = float(result.score[0, last])
        self.local_pred = np.array([float(result.local_pred[0, last])])

    def get_image_and_mask(
        self,
        label: int,
        positive_only: bool = True,
        negative_only: bool = False,
        hide_rest: bool = False,
        num_features: int = 5,
        min_weight: float = 0.0,
    ) -> tuple[NDArray[np.number], NDArray[np.integer]]:
        """The image with its top superpixels shown, and their mask, as lime returns them.

        Args:
            label: the class.
            positive_only: only superpixels for the class.
            negative_only: only superpixels against it.
            hide_rest: zero the rest of the image.
            num_features: how many superpixels.
            min_weight: the smallest |weight| shown.

        Returns:
            ``(image (H, W, C), mask (H, W))``: mask 1 for shown superpixels (-1 for negative ones
            when both signs are shown), for ``skimage.segmentation.mark_boundaries``.

        Raises:
            KeyError: a label that was not explained.
            ValueError: ``positive_only`` and ``negative_only`` both set.
        """
        if label not in self.local_exp:
            raise KeyError("Label not in explanation")
        if positive_only and negative_only:
            raise ValueError("Positive_only and negative_only cannot be true at the same time.")
        exp, segs = self.local_exp[label], self.segments
        mask = np.zeros(segs.shape, segs.dtype)
        out = np.zeros(self.image.shape) if hide_rest else self.image.copy()
        if positive_only or negative_only:
            sign = 1 if positive_only else -1
            chosen = [f for f, w in exp if sign * w > 0 and abs(w) > min_weight][:num_features]
            shown = np.isin(segs, chosen)
            out[shown] = self.image[shown]
            mask[shown] = 1
            return out, mask
        for f, w in exp[:num_features]:
            if abs(w) < min_weight:
                continue
            where = segs == f
            mask[where] = -1 if w < 0 else 1
            out[where] = self.image[where]
            out[where, 0 if w < 0 else 1] = np.max(self.image)
        return out, mask
