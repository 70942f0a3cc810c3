r"""Strings cut into words: the interpretable features of ``explain_text``.

A text becomes a list of pieces (words and the separators between them); every word piece
belongs to a feature. With ``bow=True`` a word is one feature wherever it occurs (lime's
bag of words); with ``bow=False`` every occurrence is a feature of its own. The rules are
lime's ``IndexedString`` / ``IndexedCharacters``: a regular expression (default ``\W+``)
marks separators, or a callable returns the words in order, or every character is a word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import numpy as np
import torch

from torchlime._util.checks import describe

Splitter = Union[str, Callable[[str], Sequence[str]]]


@dataclass(frozen=True)
class SplitText:
    """One text cut into pieces.

    Attributes:
        text: the text.
        pieces: the P pieces (words and separators) whose concatenation is the text.
        feature: P ints, the feature of every piece (-1: a separator, never hidden).
        words: F strings, the word of every feature (in order of first occurrence).
    """

    text: str
    pieces: list[str]
    feature: list[int]
    words: list[str]

    @property
    def n_features(self) -> int:
        """F, the number of features."""
        return len(self.words)

    def without(self, hidden: Sequence[int], mask_string: Optional[str] = None) -> str:
        """The text with the features ``hidden`` removed (or replaced by ``mask_string``).

        Args:
            hidden: feature ids to hide.
            mask_string: None removes hidden words; a string replaces each of their pieces.

        Returns:
            The perturbed text.
        """
        gone = set(int(h) for h in hidden)
        out = [
            (p if f not in gone else ("" if mask_string is None else mask_string))
            for p, f in zip(self.pieces, self.feature)
        ]
        return "".join(out)


def _segment(text: str, tokens: Sequence[str]) -> list[str]:
    """Pieces of ``text`` around ``tokens`` found in order (the text between them is a piece too)."""
    pieces, at = [], 0
    for tok in tokens:
        found = text.find(tok, at)
        if found < 0:
            raise ValueError(f"`split_expression` returned the token {tok!r}, which is not in the text after {at}")
        if found > at:
            pieces.append(text[at:found])
        pieces.append(tok)
        at = found + len(tok)
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def split_text(text: str, split_expression: Splitter = r"\W+", bow: bool = True, char_level: bool = False) -> SplitText:
    """Cut ``text`` into words and separators, as lime's text explainer does.

    Args:
        text: the string.
        split_expression: a regular expression matching separators, or a callable returning the
            words of a text in order (the text between them becomes separators).
        bow: one feature per distinct word (True) or per occurrence (False).
        char_level: every character is a word (``split_expression`` is not used).

    Returns:
        The ``SplitText``.

    Raises:
        TypeError: a text that is not a string, or a splitter that is neither a string nor callable.

    Example:
        >>> s = split_text("the cat saw the dog")
        >>> s.words, s.feature
        (['the', 'cat', 'saw', 'dog'], [0, -1, 1, -1, 2, -1, 0, -1, 3])
    """
    if not isinstance(text, str):
        raise TypeError(f"a text must be a str, got {describe(text)}")
    if char_level:
        pieces, is_word = list(text), [True] * len(text)
    elif callable(split_expression):
        tokens = list(split_expression(text))
        pieces = _segment(text, tokens)
        vocab = set(tokens)
        is_word = [p in vocab for p in pieces]
    elif isinstance(split_expression, str):
        splitter = re.compile(rf"({split_expression})|$")
        pieces = [p for p in splitter.split(text) if p]
        is_word = [splitter.match(p) is None for p in pieces]
    else:
        raise TypeError(
            f"`split_expression` must be a regular expression (str) or a callable, got {describe(split_expression)}"
        )
    ids: dict[str, int] = {}
    words: list[str] = []
    feature: list[int] = []
    for piece, word in zip(pieces, is_word):
        if not word:
            feature.append(-1)
            continue
        if bow and piece in ids:
            feature.append(ids[piece])
            continue
        ids.setdefault(piece, len(words))
        feature.append(len(words))
        words.append(piece)
    return SplitText(text, pieces, feature, words)


def feature_tensor(splits: Sequence[SplitText], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The piece indices and feature map of B split texts, padded to the longest.

    Args:
        splits: B split texts.
        device: where the tensors go.

    Returns:
        ``(pieces, features)``: long (B, P) piece index (-1 past a text's end) and long (B, P)
        feature of every piece (-1: a separator or padding).
    """
    length = max((len(s.pieces) for s in splits), default=0)
    feats = np.full((len(splits), max(length, 1)), -1, dtype=np.int64)
    for b, s in enumerate(splits):
        feats[b, : len(s.feature)] = s.feature
    at = np.arange(feats.shape[1])
    pos = np.where(at < np.array([[len(s.pieces)] for s in splits]), at, -1)
    return torch.from_numpy(pos).to(device), torch.from_numpy(feats).to(device)


def check_word_counts(splits: Sequence[SplitText], detail: Callable[[int], str]) -> None:
    """Refuse texts with fewer than 2 words that can be features (LIME needs 2 to compare).

    Args:
        splits: the B split texts.
        detail: ``detail(b)``, how text b was cut (its tokens, the splitter), for the message.

    Raises:
        ValueError: naming the texts with fewer than 2 words, the first one's words and ``detail``.
    """
    short = [b for b, s in enumerate(splits) if s.n_features < 2]
    if short:
        b = short[0]
        text = splits[b].text if len(splits[b].text) <= 60 else splits[b].text[:57] + "..."
        raise ValueError(
            f"every text needs at least 2 words to explain; `texts` {short} have fewer: text {b} {text!r} "
            f"has {splits[b].n_features} word(s) {splits[b].words}, from {detail(b)}"
        )
