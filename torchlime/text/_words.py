"""``Words``: raw strings explained over their words, for a function over strings or a tokenizer and model.

Words are the features (a word repeated in a text is one feature with ``bow=True``). With a function
over strings (lime's ``classifier_fn``), the engine runs on the texts' pieces and every chunk of
perturbed texts is one call of the function. With a Hugging Face tokenizer (a fast one: it maps tokens
to words) and a token-ID model, the texts are tokenized once and the word features become token
features of a ``Tokens`` modality: special tokens are never perturbed (an unknown token stands for a
word and is), and hidden words are deleted (every sample gets its own attention mask) or replaced by
the mask token.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Optional, cast

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.engine import Call, Config, Explanation, Modality, Prepared
from torchlime.engine.info import lengths, sized
from torchlime.text._token_args import InfillSpec
from torchlime.text._tokenized import encode_words
from torchlime.text._tokens import OWNED, TokensInfo, TokensPrepared, attach, finish_tokens, refuse_owned
from torchlime.text._with_tokens import WithTokens, rows
from torchlime.text.split import Splitter, SplitText, check_word_counts, feature_tensor, split_text
from torchlime.text.strings import StringPerturbation, string_model
from torchlime.typing import Device, Model


@dataclass(frozen=True)
class WordsInfo(WithTokens):
    """What a word explanation records (``Explanation.info``; ``meta`` shows it under "text_words").

    ``coef[b, :, j]`` is the weight of ``words[b][j]``; ``pieces[b]`` (words and separators) joined is
    ``texts[b]``, ``piece_features[b]`` the feature of every piece (-1: a separator, never hidden).

    Attributes:
        texts: the B texts.
        words: F_b words per text.
        pieces: the texts cut into words and separators.
        piece_features: the feature of every piece.
        tokens: with a tokenizer, the token strings of every text (padding included); else None.
        token_info: with a tokenizer, the ``TokensInfo`` of the token explanation; else None.
    """

    key: ClassVar[str] = "text_words"
    required: ClassVar[frozenset[str]] = frozenset({"texts", "words", "pieces", "piece_features"})
    labelled: ClassVar[str] = "words"  # the features' labels: each text's words, in feature order
    per_input: ClassVar[tuple[str, ...]] = ("texts", "words", "pieces", "piece_features", "tokens")

    texts: list[str]
    words: list[list[str]]
    pieces: list[list[str]]
    piece_features: list[list[int]]
    tokens: Optional[list[list[str]]] = None

    @classmethod
    def of(cls, splits: Sequence[SplitText], tokens: Optional[list[list[str]]] = None) -> WordsInfo:
        """The record of B split texts (and their token strings).

        Args:
            splits: the B split texts.
            tokens: the B texts' token strings, or None.

        Returns:
            The record.
        """
        return cls(
            [s.text for s in splits],
            [list(s.words) for s in splits],
            [list(s.pieces) for s in splits],
            [list(s.feature) for s in splits],
            tokens,
        )

    @classmethod
    def _from_fields(cls, plain: Mapping[str, object], tokens: Optional[TokensInfo]) -> WordsInfo:
        """WordsInfo's fields from checked plain data, the token record beside them (``WithTokens.from_plain``)."""
        texts, fields = list(cast(list[str], plain["texts"])), ("words", "pieces", "piece_features", "tokens")
        return cls(texts, *(rows(plain.get(name)) for name in fields), token_info=tokens)

    def top_level(self) -> dict[str, object]:
        """``meta``'s top-level "texts", "words", "pieces", "piece_features" (and "tokens", "mode"...)."""
        shown = super().top_level()
        shown.update(texts=list(self.texts), words=[list(w) for w in self.words], pieces=[list(p) for p in self.pieces])
        shown["piece_features"] = [list(f) for f in self.piece_features]
        if self.tokens is not None:
            shown["tokens"] = [list(t) for t in self.tokens]
        return shown

    def describe(self, count: int, shape: tuple[int, ...]) -> str:
        """The texts and their words as written (a repeated word counts each time), and their tokens.

        Args:
            count: B, the texts.
            shape: the explanation's ``input_shape`` (the pieces; unused).

        Returns:
            e.g. "2 texts of 9 and 7 words", with a tokenizer "... (12 and 10 tokens)".
        """
        said = sized("text", [sum(f >= 0 for f in feats) for feats in self.piece_features], "word")
        tokens = None if self.token_info is None else self.token_info.lengths
        return said if tokens is None else f"{said} ({lengths(tokens, 'token')})"

    def text_pieces(self, index: int) -> tuple[list[str], list[int]]:
        """Text ``index``'s words and separators, and each one's feature (-1: a separator).

        Args:
            index: the text.

        Returns:
            ``(pieces, piece_features)``; the pieces joined are the text.
        """
        return list(self.pieces[index]), list(self.piece_features[index])


@dataclass(frozen=True)
class Words(Modality):
    r"""Raw strings explained over their words.

    Attributes:
        tokenizer: None (the model is a function over a list of strings), or a Hugging Face fast
            tokenizer whose ids the model reads; words are then the tokenizer's words and
            ``split_expression`` / ``char_level`` are not used.
        split_expression: separators as a regular expression (lime's default ``\W+``), or a callable
            returning a text's words in order.
        bow: one feature per distinct word (True) or per occurrence (False).
        char_level: every character is a feature.
        mask_string: None removes hidden words when ``bow`` is True (lime's behaviour) and writes
            ``"UNKWORDZ"`` (``chr(0)`` for characters) in their place otherwise; a string replaces
            every hidden word. With a tokenizer: see ``mode``.
        mode: with a tokenizer: "delete" (the default with ``bow``), "replace" (the default without)
            or "infill".
        max_length: with a tokenizer: truncate longer texts to this many tokens.
        device: where the masks and the fit run (default: the model's device with a tokenizer,
            else the CPU).
        mask_id: with a tokenizer: the id hidden tokens become; None: its mask token (else its
            unknown token, else its padding token).
        pad_id: with a tokenizer: the padding id of "delete"; None: its padding token (else 0).
        vocab_size: with a tokenizer: as in ``Tokens``.
        model_inputs: with a tokenizer: as in ``Tokens``.
        infill: with a tokenizer and ``mode="infill"``: an ``Infiller`` or a masked LM.

    Example:
        >>> from torchlime.engine import Explainer
        >>> def positive(texts):  # P(positive) grows with "good"
        ...     p = torch.tensor([min(1.0, 0.2 + 0.4 * t.split().count("good")) for t in texts])
        ...     return torch.stack((1 - p, p), 1)
        >>> exp = Explainer().explain(positive, ["a good movie"], Words(), target=1, n_samples=200)
        >>> exp.info.words, exp.info.words[0][int(exp.coef[0, 0].argmax())]
        ([['a', 'good', 'movie']], 'good')
    """

    owns: ClassVar[frozenset[str]] = OWNED

    tokenizer: object = None
    split_expression: Splitter = r"\W+"
    bow: bool = True
    char_level: bool = False
    mask_string: Optional[str] = None
    mode: Optional[str] = None
    max_length: Optional[int] = None
    device: Device = None
    mask_id: Optional[int] = None
    pad_id: Optional[int] = None
    vocab_size: Optional[int] = None
    model_inputs: str = "auto"
    infill: InfillSpec = None

    def prepare(self, model: Model, inputs: object, how: Config, call: Call) -> Prepared:
        """Check the texts and settings, cut the texts into words, build the perturbation.

        Args:
            model: a function over a list of strings, or with ``tokenizer`` a token-ID model.
            inputs: one string or a list of B strings (a numpy array of strings too).
            how: the configuration (its kernel must measure distances on the masks).
            call: the call.

        Returns:
            The hand-over: piece indices (B, P) with their word features, or with a tokenizer
            the token hand-over of ``Tokens``; the record is a ``WordsInfo``.

        Raises:
            TypeError / ValueError: naming the argument, what was expected and what came.
            ValueError: a text with fewer than 2 words that can be features.
        """
        refuse_owned("Words", "`mask_string` (`mode` with a tokenizer)", how, call)
        listed = _texts(inputs)
        for name, flag in (("bow", self.bow), ("char_level", self.char_level)):
            if not isinstance(flag, bool):
                raise TypeError(f"`{name}` must be True or False, got {describe(flag)}")
        if self.mask_string is not None and not isinstance(self.mask_string, str):
            raise TypeError(f"`mask_string` must be None or a str, got {describe(self.mask_string)}")
        if not callable(model):
            raise TypeError(
                f"`model` must be callable (a function over strings or a token model), got {describe(model)}"
            )
        how.refuse_input_kernel("text", "would compare word positions as numbers")
        if self.tokenizer is not None:
            enc = encode_words(
                model,
                listed,
                self.tokenizer,
                self.bow,
                self.mode,
                self.max_length,
                self.device,
                self.mask_id,
                self.pad_id,
                self.vocab_size,
                self.model_inputs,
                self.infill,
            )
            prepared = enc.tokens.prepare(model, enc.input_ids, how, call)
            return dataclasses.replace(prepared, info=WordsInfo.of(enc.splits, enc.strings))
        token_only = [
            name
            for name, value in (
                ("mode", self.mode),
                ("max_length", self.max_length),
                ("mask_id", self.mask_id),
                ("pad_id", self.pad_id),
                ("vocab_size", self.vocab_size),
                ("infill", self.infill),
                ("model_inputs", None if self.model_inputs == "auto" else self.model_inputs),
            )
            if value is not None
        ]
        if token_only:
            names = " and ".join(f"`{n}`" for n in token_only)
            raise ValueError(f"{names} apply with a `tokenizer`; without one, pass `mask_string`")
        splits = [split_text(t, self.split_expression, self.bow, self.char_level) for t in listed]
        cut = "characters" if self.char_level else f"split_expression {self.split_expression!r}"
        check_word_counts(splits, lambda b: f"{cut} (separators are never words)")
        dev = torch.device("cpu") if self.device is None else torch.device(self.device)
        pieces, feats = feature_tensor(splits, dev)
        mask_string = self.mask_string
        if mask_string is None and not self.bow:
            mask_string = chr(0) if self.char_level else "UNKWORDZ"
        call = dataclasses.replace(call, perturb_fn=StringPerturbation(splits, mask_string))
        return Prepared(pieces, feats, how, call, string_model, "text", "texts", info=WordsInfo.of(splits))

    def finish(self, explanation: Explanation, prepared: Prepared) -> Explanation:
        """The record, with the token record of a tokenizer's run.

        ``meta`` shows "texts", "words", "pieces", "piece_features" at its top level (and "tokens" with a
        tokenizer, besides the token explanation's entries): ``WordsInfo.top_level``.

        Args:
            explanation: the engine's result.
            prepared: the hand-over it came from.

        Returns:
            The explanation the caller gets.
        """
        info = prepared.info
        if not isinstance(info, WordsInfo):
            raise TypeError(f"`prepared` must come from Words.prepare, got {describe(prepared)}")
        if isinstance(prepared, TokensPrepared):
            explanation, tokens = finish_tokens(explanation, prepared)
            info = dataclasses.replace(info, token_info=tokens)
        return attach(explanation, info)


def _texts(texts: object) -> list[str]:
    """The texts as a list of B >= 1 strings."""
    if isinstance(texts, np.ndarray) and texts.dtype.kind in "US" and texts.ndim == 1:
        texts = texts.tolist()  # a numpy array of strings, as lime's users pass them
    listed = [texts] if isinstance(texts, str) else texts
    if not isinstance(listed, (list, tuple)) or not listed or not all(isinstance(t, str) for t in listed):
        raise TypeError(f"`texts` must be a string or a non-empty list of strings, got {describe(texts)}")
    return [str(t) for t in listed]
