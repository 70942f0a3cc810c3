"""Looking at text explanations: HTML highlighting and a bar chart of the top features.

Every token string goes through ``html.escape(..., quote=True)`` before it is
placed in the page, so text such as ``<script>`` or a quote in the input is
shown as text and never becomes markup. One colour convention, as in every
picture of torchlime (``torchlime._util.colours``): positive weights (supporting the
explained target) are red, negative ones (opposing it) blue, the ends of the
``RdBu_r`` map; the colour's opacity grows with |weight| / max |weight|, and the
legend says so. matplotlib is imported only by ``plot_top_features``, which
returns the matplotlib ``Figure``.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Optional, Sequence, Union, cast

import torch

from torchlime._util import colours as _colours
from torchlime._util.checks import describe, require
from torchlime.engine.explanation import Explanation
from torchlime.text._generated import GenerationInfo, generation_record, prompt_tokens

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def legend_html(scale: float) -> str:
    """A small legend: red supports the target, blue opposes it, opacity = |weight|.

    Args:
        scale: the |weight| drawn at full opacity.

    Returns:
        A ``<div>`` string: two swatches and the convention in words.
    """
    return (
        '<div class="torchlime-legend" style="font:12px sans-serif;margin-top:6px">'
        f'<span style="background:{_colours.rgba(1.0, 1.0)};padding:1px 6px;border-radius:3px">'
        "supports the target</span> "
        f'<span style="background:{_colours.rgba(-1.0, 1.0)};padding:1px 6px;border-radius:3px">'
        "opposes the target</span> "
        f'<span style="color:#666">{_colours.LEGEND}; opacity: |weight| up to {scale:.3g}</span></div>'
    )


def tokens_html(
    tokens: Sequence[str],
    weights: Union[Sequence[Optional[float]], torch.Tensor],
    *,
    title: Optional[str] = None,
    legend: bool = True,
    scale: Optional[float] = None,
) -> str:
    """HTML of tokens highlighted by their weights.

    Args:
        tokens: n strings (escaped here; pass them raw).
        weights: n floats (None: shown without colour, e.g. special tokens).
        title: optional heading (escaped).
        legend: append the colour legend.
        scale: |weight| that gets full opacity (default: the largest |weight|).

    Returns:
        A self-contained ``<div>`` string.
    """
    if isinstance(weights, torch.Tensor):
        weights = weights.detach().float().cpu().tolist()
    if len(tokens) != len(weights):
        raise ValueError(f"`weights` must have one value per token ({len(tokens)}), got {len(weights)}")
    known = [abs(float(w)) for w in weights if w is not None]
    scale = float(scale) if scale is not None else (max(known) if known else 0.0)
    parts = ['<div class="torchlime-text" style="font:14px/1.9 sans-serif">']
    if title is not None:
        parts.append(f'<div style="font-weight:bold">{html.escape(title, quote=True)}</div>')
    for tok, w in zip(tokens, weights):
        text = html.escape(str(tok), quote=True)
        if w is None:
            parts.append(f'<span style="color:#888;padding:1px 2px">{text}</span> ')
        else:
            parts.append(
                f'<span title="{float(w):+.4g}" style="background:{_colours.rgba(float(w), scale)};'
                f'padding:1px 2px;border-radius:3px">{text}</span> '
            )
    if legend:
        parts.append(legend_html(scale))
    parts.append("</div>")
    return "".join(parts)


def feature_strings(
    explanation: Explanation, tokens: Sequence[str], index: int = 0, continuation: str = "##"
) -> list[str]:
    """The text of each feature of input ``index``: its tokens joined (F_b strings).

    WordPiece continuation pieces (``continuation`` prefix) are glued to the
    previous piece; other tokens of one feature are joined with a space.

    Args:
        explanation: a token explanation (features (B, L)).
        tokens: the L token strings of input ``index``.
        index: which explained input.
        continuation: the prefix of word-continuation pieces (WordPiece's "##").

    Returns:
        One string per feature of input ``index``.
    """
    feats = explanation.features[index].reshape(-1).tolist()
    if len(feats) != len(tokens):
        raise ValueError(f"`tokens` must have one string per position ({len(feats)}), got {len(tokens)}")
    out = [""] * int(explanation.n_features[index])
    for tok, f in zip(tokens, feats):
        if f >= 0:
            piece = str(tok)
            if out[f] and continuation and piece.startswith(continuation):
                out[f] += piece[len(continuation) :]
            else:
                out[f] = f"{out[f]} {piece}" if out[f] else piece
    return out


def explanation_html(
    explanation: Explanation,
    tokens: Union[Sequence[str], int, None] = None,
    index: int = 0,
    target_index: Optional[int] = None,
    *,
    merge_words: bool = True,
    show_fixed: bool = False,
    continuation: str = "##",
    title: Optional[str] = None,
) -> str:
    """Highlight input ``index`` of a token/word explanation.

    Args:
        explanation: from ``explain_tokens`` (features (B, L)), or ``explain_generation``.
        tokens: the L token strings of that input (raw, e.g. ``tokenizer.convert_ids_to_tokens``); None
            for an ``explain_generation`` explanation: the prompt tokens it recorded, every target a row
            (``generation_html``). An int here is ``index``: ``explanation_html(exp, 1)``.
        index: which explained input.
        target_index: which explained target (column of ``explanation.target``); None: target 0, or
            every target of a generation explanation.
        merge_words: show each word once (consecutive tokens of one feature joined).
        show_fixed: also show never-perturbed tokens (special tokens, padding) in grey.
        continuation: the prefix of word-continuation pieces (WordPiece's "##"), dropped when joined.
        title: optional heading (escaped).

    Returns:
        A self-contained ``<div>`` string.

    Raises:
        TypeError: a bool as ``tokens``.
        ValueError: no ``tokens`` for an explanation that recorded none, or two different inputs
            (an int ``tokens`` and ``index``).
    """
    exp = explanation
    if isinstance(tokens, bool):
        raise TypeError(f"`tokens` must be token strings, None or an input's index, got {describe(tokens)}")
    if tokens is None or isinstance(tokens, int):
        if tokens is not None and index not in (0, tokens):
            raise ValueError(
                f"`tokens` given as an int is the input's index, so `index` must be left out or equal, got "
                f"tokens={tokens} and index={index}"
            )
        index = index if tokens is None else tokens
        if not isinstance(exp.info, GenerationInfo):
            raise ValueError(
                f"`tokens` must be the L token strings of input {index} (only explain_generation records its "
                f"prompt's tokens; for explain_text, text_html shows the words), got {describe(tokens)}"
            )
        return generation_html(exp, index, target_index, title=title)
    target_index = 0 if target_index is None else target_index
    coef = exp.coef[index, target_index].detach().float().cpu()
    feats = exp.features[index].reshape(-1).tolist()
    if len(feats) != len(tokens):
        raise ValueError(f"`tokens` must have one string per position ({len(feats)}), got {len(tokens)}")
    shown: list[str] = []
    weights: list[Optional[float]] = []
    last = None
    for tok, f in zip(tokens, feats):
        if f < 0:
            last = None
            if show_fixed:
                shown.append(str(tok))
                weights.append(None)
            continue
        piece = str(tok)
        if merge_words and f == last:
            glue = continuation and piece.startswith(continuation)
            shown[-1] += piece[len(continuation) :] if glue else " " + piece
            continue
        shown.append(piece)
        weights.append(float(coef[f]))
        last = f
    if title is None:
        title = f"target {int(exp.target[index, target_index])}"
    return tokens_html(shown, weights, title=title, scale=float(coef.abs().max()) if coef.numel() else None)


def generation_html(
    explanation: Explanation, index: int = 0, target_index: Optional[int] = None, *, title: Optional[str] = None
) -> str:
    """Input ``index`` of an ``explain_generation`` explanation: its prompt's tokens, one row per target.

    Every row highlights the prompt's features (named by their tokens: ``prompt_tokens``) by their weight
    for one target: the whole continuation, then each generated token (``GenerationInfo.target_labels``),
    all on one scale. Every string is escaped.

    Args:
        explanation: from ``explain_generation`` (its info is a ``GenerationInfo``).
        index: which prompt (of the B).
        target_index: one target's row only; None: every target's.
        title: optional heading (escaped).

    Returns:
        A self-contained ``<div>`` string.

    Raises:
        ValueError: an explanation of another kind, a ``target_index`` out of range, or a record that
            names another count of features than the explanation has.
    """
    names = prompt_tokens(explanation, index)
    rows = generation_record(explanation).target_labels(index)
    n = int(explanation.n_features[index])
    if len(names) != n:
        raise ValueError(
            f"`explanation` must have one coefficient per prompt feature of input {index}: its info names "
            f"{len(names)}, got n_features {n}"
        )
    if target_index is not None and not 0 <= target_index < len(rows):
        raise ValueError(f"`target_index` must be None or in [0, {len(rows)}), got {describe(target_index)}")
    shown = list(range(len(rows))) if target_index is None else [target_index]
    coef = explanation.coef[index, :, :n].detach().float().cpu()
    scale = float(coef[shown].abs().max()) if coef.numel() else 0.0
    parts = ['<div class="torchlime-generation">']
    if title is not None:
        parts.append(f'<div style="font:bold 14px sans-serif">{html.escape(title, quote=True)}</div>')
    parts += [tokens_html(names, coef[t], title=rows[t], legend=False, scale=scale) for t in shown]
    parts.append(legend_html(scale))
    parts.append("</div>")
    return "".join(parts)


def text_html(explanation: Explanation, index: int = 0, target_index: int = 0, *, title: Optional[str] = None) -> str:
    """Text ``index`` of an ``explain_text`` explanation, every word highlighted in place.

    Args:
        explanation: from ``explain_text`` (``info`` holds the texts' pieces and their features).
        index: which text (of the B).
        target_index: which explained target (column of ``explanation.target``).
        title: optional heading (default: the target).

    Returns:
        A self-contained ``<div>`` string: the text as written, each word coloured by its weight.

    Raises:
        ValueError: for an explanation without texts (not from ``explain_text``), or whose words
            and coefficients do not match one to one.
    """
    exp = explanation
    text = exp.info.text_pieces(index) if exp.info is not None else None
    if text is None:
        raise ValueError("`explanation` must come from explain_text (its info holds the texts); use explanation_html")
    pieces, feats = text
    words, n = exp.info.feature_labels(index) if exp.info is not None else None, int(exp.n_features[index])
    named = max(max((int(f) for f in feats), default=-1) + 1, len(words or []))
    if named != n:
        raise ValueError(
            f"`explanation` must have one coefficient per word of text {index}: its info names {named} words, "
            f"got n_features {n}"
        )
    coef = exp.coef[index, target_index].detach().float().cpu()
    scale = float(coef.abs().max()) if coef.numel() else 0.0
    if title is None:
        title = f"target {int(exp.target[index, target_index])}"
    parts = ['<div class="torchlime-text" style="font:14px/1.9 sans-serif;white-space:pre-wrap">']
    parts.append(f'<div style="font-weight:bold">{html.escape(title, quote=True)}</div>')
    for piece, f in zip(pieces, feats):
        escaped = html.escape(str(piece), quote=True)
        if f < 0:
            parts.append(escaped)
            continue
        w = float(coef[f])
        parts.append(
            f'<span title="{w:+.4g}" style="background:{_colours.rgba(w, scale)};border-radius:3px">{escaped}</span>'
        )
    parts.append(legend_html(scale))
    parts.append("</div>")
    return "".join(parts)


def plot_top_features(
    explanation: Explanation,
    names: Sequence[str],
    *,
    index: int = 0,
    target_index: int = 0,
    k: int = 10,
    class_names: Optional[_colours.ClassNames] = None,
    ax: Optional[Axes] = None,
) -> Figure:
    """Horizontal bar chart of the k features with the largest |coefficient|.

    Bars of features that support the target are red, those that oppose it blue (the x label says so, naming
    the class: "weight for 'positive'").

    Args:
        explanation: the explanation (coef (B, T, F)).
        names: a string per feature of input ``index`` (e.g. ``feature_strings``).
        index: which explained input.
        target_index: which explained target (column of ``explanation.target``).
        k: how many features to show.
        class_names: the classes' names, a sequence indexed by class or a mapping class -> name, for the
            x label (default: the class index).
        ax: a matplotlib Axes to draw into (default: a new figure's).

    Returns:
        The matplotlib ``Figure`` (the one of ``ax`` when it is given; the bars are in ``fig.axes[0]``
        for a new figure). It returned the Axes before 0.2.0.
    """
    exp = explanation
    plt = require("matplotlib.pyplot", "viz", "plot_top_features")

    top, weights = exp.top_features(k, by="abs")
    idx, vals = top[index, target_index].tolist(), weights[index, target_index].tolist()
    n = int(exp.n_features[index])
    keep = [(i, v) for i, v in zip(idx, vals) if i < n][::-1]  # largest at the top
    new: Optional[Figure] = None
    if ax is None:
        new, ax = plt.subplots(figsize=(6, 0.35 * max(len(keep), 1) + 1.4))
    colours = [_colours.RED_HEX if v >= 0 else _colours.BLUE_HEX for _, v in keep]
    ax.barh(range(len(keep)), [v for _, v in keep], color=colours)
    ax.set_yticks(range(len(keep)), [str(names[i]) for i, _ in keep])
    ax.axvline(0, color="#444", lw=0.8)
    name = _colours.class_name(int(exp.target[index, target_index]), class_names)
    ax.set_xlabel(f"weight for '{name}'\n{_colours.LEGEND}")
    if new is not None:  # room for the two-line label; a given ax's figure is laid out by its owner
        new.tight_layout()
    return cast("Figure", ax.figure)  # a SubFigure for the axes of a subfigure
