"""lime's domain mappers: how an explanation names its feature ids (``Explanation.domain_mapper``).

``TextDomainMapper`` names word ids by their word (``positions=True`` appends where each occurs);
``TableDomainMapper`` names columns by their condition ("age <= 30.00", "sex=female") or name.
``Explanation.as_list`` reads its pairs through ``domain_mapper.map_exp_ids``, as lime's does.
"""

from __future__ import annotations

import html
from typing import Any, Optional, Sequence, Union

import numpy as np
from numpy.typing import NDArray

from torchlime._util.argdocs import with_args
from torchlime.compat.lime._indexed import IndexedCharacters, IndexedString

__all__ = ["DomainMapper", "TextDomainMapper", "TableDomainMapper"]

Pairs = Sequence[tuple[int, float]]
#: the arguments of every ``visualize_instance_html`` (lime's), described once
_HTML_ARGS = {
    "exp": "pairs of one label.",
    "label": "the label.",
    "div_name": "lime's name of the page's element.",
    "exp_object_name": "lime's name of the explanation's script object.",
    "**kwargs": "unused.",
}


class DomainMapper:
    """lime's ``DomainMapper``: feature ids to what a reader sees (ids, unchanged, by default)."""

    def map_exp_ids(self, exp: Pairs, **kwargs: Any) -> list[tuple[Any, float]]:
        """The ``(feature id, weight)`` pairs ``exp`` with readable features.

        Args:
            exp: pairs of one label.
            **kwargs: options of the subclass.

        Returns:
            The pairs, here unchanged.
        """
        return [(f, w) for f, w in exp]

    @with_args(_HTML_ARGS)
    def visualize_instance_html(  # noqa: D417 (the other arguments: _HTML_ARGS)
        self, exp: Pairs, label: int, div_name: str, exp_object_name: str, **kwargs: Any
    ) -> str:
        """The instance as HTML (none by default).

        Args:
            **kwargs: options of the subclass.

        Returns:
            An HTML fragment.
        """
        return ""


class TextDomainMapper(DomainMapper):
    """lime's ``TextDomainMapper``: word ids named by their word.

    Args:
        indexed_string: the explained text's ``IndexedString`` or ``IndexedCharacters``.
    """

    def __init__(self, indexed_string: Union[IndexedString, IndexedCharacters]) -> None:
        self.indexed_string = indexed_string

    def map_exp_ids(self, exp: Pairs, positions: bool = False, **kwargs: Any) -> list[tuple[Any, float]]:
        """``(word, weight)`` pairs (``word_3-17`` with the character positions when ``positions``).

        Args:
            exp: ``(word id, weight)`` pairs.
            positions: append every occurrence's character position to the word, joined by "-".
            **kwargs: ignored.

        Returns:
            The named pairs.
        """
        text = self.indexed_string
        if positions:
            return [(f"{text.word(f)}_{'-'.join(str(p) for p in text.string_position(f))}", w) for f, w in exp]
        return [(text.word(f), w) for f, w in exp]

    @with_args(_HTML_ARGS)
    def visualize_instance_html(
        self, exp: Pairs, label: int, div_name: str, exp_object_name: str, **kwargs: Any
    ) -> str:
        """The text, HTML-escaped (the explanation's ``text_html`` draws its highlighted words).

        Returns:
            An HTML fragment.
        """
        return f"<div>{html.escape(self.indexed_string.raw_string())}</div>"


class TableDomainMapper(DomainMapper):
    """lime's ``TableDomainMapper``: columns named by their condition, or by their name.

    Attributes:
        exp_feature_names: the name each column has in an explanation (the conditions when discretized).
        feature_names: the columns' names.
        feature_values: the instance's values, as shown.
        scaled_row: the instance as the surrogate saw it.
        categorical_features: the columns read as categories.

    Args:
        feature_names: D column names.
        feature_values: D values of the instance, as shown.
        scaled_row: (D,) the instance as the surrogate saw it.
        categorical_features: the categorical (or discretized) columns.
        discretized_feature_names: D names with conditions ("x <= 1.00", "c=red"), or None.
        feature_indexes: the columns of a sparse row that hold values, or None.
    """

    def __init__(
        self,
        feature_names: Sequence[str],
        feature_values: Sequence[object],
        scaled_row: NDArray[np.float64],
        categorical_features: Sequence[int],
        discretized_feature_names: Optional[Sequence[str]] = None,
        feature_indexes: Optional[Sequence[int]] = None,
    ) -> None:
        self.feature_names = list(feature_names)
        self.feature_values = list(feature_values)
        self.scaled_row = scaled_row
        self.categorical_features = list(categorical_features)
        self.discretized_feature_names = None if discretized_feature_names is None else list(discretized_feature_names)
        self.feature_indexes = None if feature_indexes is None else list(feature_indexes)
        self.exp_feature_names = self.discretized_feature_names or self.feature_names

    def map_exp_ids(self, exp: Pairs, **kwargs: Any) -> list[tuple[Any, float]]:
        """``(column name or condition, weight)`` pairs.

        Args:
            exp: ``(column, weight)`` pairs.
            **kwargs: ignored.

        Returns:
            The named pairs.
        """
        return [(self.exp_feature_names[f], w) for f, w in exp]

    @with_args(_HTML_ARGS)
    def visualize_instance_html(  # noqa: D417 (the other arguments: _HTML_ARGS)
        self,
        exp: Pairs,
        label: int,
        div_name: str,
        exp_object_name: str,
        show_table: bool = True,
        show_all: bool = False,
        **kwargs: Any,
    ) -> str:
        """The instance's columns and values as an HTML table (lime's feature / value table).

        Args:
            show_table: draw the table at all.
            show_all: every column, not only those of the explanation (in its order).

        Returns:
            An HTML fragment ("" without ``show_table``).
        """
        if not show_table:
            return ""
        columns = range(len(self.feature_names)) if show_all else [f for f, _ in exp]
        rows = "".join(
            f"<tr><td>{html.escape(str(self.feature_names[f]))}</td><td>{html.escape(str(self.feature_values[f]))}</td></tr>"
            for f in columns
        )
        return f"<table><tr><th>Feature</th><th>Value</th></tr>{rows}</table>"
