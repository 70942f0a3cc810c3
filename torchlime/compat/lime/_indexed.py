r"""lime's ``IndexedString`` and ``IndexedCharacters``: a text cut into words, on torchlime's splitter.

The words are ``torchlime.text.split.split_text``'s: a regular expression marks separators
(default ``\W+``), or a callable returns the words in order, or every character is a word. Word ids
follow first occurrence; with ``bow=True`` a word is one id wherever it occurs, else every
occurrence has its own.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from numpy.typing import NDArray

from torchlime._util.checks import describe
from torchlime.text.split import Splitter, SplitText, split_text

__all__ = ["IndexedString", "IndexedCharacters"]


class _Indexed:
    """What both indexed texts share: pieces, word ids, their positions, and the text without some words."""

    def _index(self, split: SplitText, bow: bool, mask_string: str) -> None:
        self.raw = split.text
        self.bow, self.mask_string = bool(bow), mask_string
        self.as_list: list[str] = list(split.pieces)
        self.as_np: NDArray[np.str_] = np.array(self.as_list)
        lengths = [len(p) for p in self.as_list[:-1]]
        self.string_start: NDArray[np.int64] = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        self.inverse_vocab: list[str] = list(split.words)
        where: list[list[int]] = [[] for _ in split.words]
        for i, f in enumerate(split.feature):
            if f >= 0:
                where[f].append(i)
        self.positions: Union[list[list[int]], NDArray[np.int64]] = (
            where if self.bow else np.array([w[0] for w in where], dtype=np.int64)
        )
        self._where = where

    def raw_string(self) -> str:
        """The original text."""
        return self.raw

    def num_words(self) -> int:
        """The number of word ids."""
        return len(self.inverse_vocab)

    def word(self, id_: int) -> str:
        """The word of id ``id_``.

        Args:
            id_: a word id in [0, ``num_words()``).

        Returns:
            The word.
        """
        return self.inverse_vocab[id_]

    def _pieces_of(self, ids: Sequence[int]) -> list[int]:
        """The piece indices of every occurrence of the word ids ``ids``."""
        return [p for i in ids for p in (self._where[i] if self.bow else self._where[i][:1])]

    def string_position(self, id_: int) -> NDArray[np.int64]:
        """The character positions where word ``id_`` occurs (one with ``bow=False``).

        Args:
            id_: a word id.

        Returns:
            The start of each occurrence.
        """
        return self.string_start[self._pieces_of([id_])]

    def inverse_removing(self, words_to_remove: Sequence[int]) -> str:
        """The text without the words ``words_to_remove`` (with ``bow=False``: each replaced by ``mask_string``).

        Args:
            words_to_remove: word ids.

        Returns:
            The perturbed text.
        """
        gone = set(self._pieces_of([int(w) for w in words_to_remove]))
        blank = "" if self.bow else self.mask_string
        return "".join(blank if i in gone else p for i, p in enumerate(self.as_list))


class IndexedString(_Indexed):
    r"""lime's ``IndexedString``: the words of a text and where they occur.

    Attributes:
        raw: the text.
        as_list, as_np: the pieces (words and separators) whose concatenation is the text.
        string_start: the character position of every piece.
        inverse_vocab: the word of every id.
        positions: bow: the pieces of every id (a list per id); else the piece of every id (an array).

    Args:
        raw_string: the text.
        split_expression: separators as a regular expression (default ``\W+``), or a callable
            returning the words in order.
        bow: one id per distinct word (True) or per occurrence (False).
        mask_string: what a removed word becomes with ``bow=False`` (None: "UNKWORDZ"); with
            ``bow=True`` removed words vanish.

    Raises:
        TypeError: a text that is not a str, or a splitter that is neither a str nor callable.
        ValueError: a callable returning words that are not in the text in order.
    """

    def __init__(
        self,
        raw_string: str,
        split_expression: Splitter = r"\W+",
        bow: bool = True,
        mask_string: Optional[str] = None,
    ) -> None:
        if not isinstance(raw_string, str):
            raise TypeError(f"`raw_string` must be a str, got {describe(raw_string)}")
        masked = "UNKWORDZ" if mask_string is None else mask_string
        self._index(split_text(raw_string, split_expression, bow), bow, masked)


class IndexedCharacters(_Indexed):
    """lime's ``IndexedCharacters``: every character of a text is a word.

    Attributes:
        raw, as_list, as_np, string_start, inverse_vocab, positions: as ``IndexedString``'s.

    Args:
        raw_string: the text.
        bow: one id per distinct character (True) or per position (False).
        mask_string: what a removed character becomes with ``bow=False`` (None: ``chr(0)``); with
            ``bow=True`` removed characters vanish.

    Raises:
        TypeError: a text that is not a str.
    """

    def __init__(self, raw_string: str, bow: bool = True, mask_string: Optional[str] = None) -> None:
        if not isinstance(raw_string, str):
            raise TypeError(f"`raw_string` must be a str, got {describe(raw_string)}")
        masked = chr(0) if mask_string is None else mask_string
        self._index(split_text(raw_string, bow=bow, char_level=True), bow, masked)
