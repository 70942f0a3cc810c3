"""lime's "Text with highlighted words" panel: the words of an explanation coloured in place."""

from __future__ import annotations

import html
from typing import Sequence

#: lime's class colours (d3's category10, category20 from 10 classes) and its colour of "NOT label"
_CATEGORY10 = tuple("#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #7f7f7f #bcbd22 #17becf".split())
_CATEGORY20 = tuple(
    "#1f77b4 #aec7e8 #ff7f0e #ffbb78 #2ca02c #98df8a #d62728 #ff9896 #9467bd #c5b0d5 "
    "#8c564b #c49c94 #e377c2 #f7b6d2 #7f7f7f #c7c7c7 #bcbd22 #dbdb8d #17becf #9edae5".split()
)
_NOT_LABEL = "#5F9EA0"


def highlighted_text(
    text: str,
    word_starts: Sequence[Sequence[int]],
    names: Sequence[str],
    pairs: Sequence[tuple[int, float]],
    label: int,
    n_classes: int,
    opacity: bool = True,
) -> str:
    """The text with every occurrence of the explained words coloured by the class it supports.

    With two classes, class 1's colour for a positive weight and class 0's for a negative one; with more,
    the label's colour for a positive weight and lime's "NOT label" colour for a negative one; the
    opacity is |weight| over the largest |weight| shown (1 without ``opacity``).

    Args:
        text: the explained text.
        word_starts: every word's character positions.
        names: every word.
        pairs: ``(word, weight)`` of the explanation of ``label``.
        label: the class drawn.
        n_classes: how many classes the model has.
        opacity: shade each word by its |weight|.

    Returns:
        An HTML fragment.
    """
    palette = _CATEGORY10 if n_classes < 10 else _CATEGORY20
    if n_classes == 2:
        against, support = palette[0], palette[1]
    else:
        against, support = _NOT_LABEL, palette[label % len(palette)]
    top = max((abs(w) for _, w in pairs), default=0.0)
    marks = sorted(
        (start, start + len(names[f]), support if w > 0 else against, abs(w) / top if top > 0 and opacity else 1.0)
        for f, w in pairs
        for start in word_starts[f]
    )
    out, at = [], 0
    for start, stop, colour, alpha in marks:
        if start < at:  # overlapping occurrences (characters): the first is drawn
            continue
        r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        out.append(html.escape(text[at:start]))
        out.append(f"<span style='background-color:rgba({r},{g},{b},{alpha:.3f})'>")
        out.append(f"{html.escape(text[start:stop])}</span>")
        at = stop
    out.append(html.escape(text[at:]))
    return (
        "<div class='lime text_div'><h3>Text with highlighted words</h3>"
        f"<span style='white-space:pre-wrap'>{''.join(out)}</span></div>"
    )
