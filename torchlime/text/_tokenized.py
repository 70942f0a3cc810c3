"""``Words`` with a tokenizer: words of the tokenizer's encoding as token features.

The texts are tokenized once (padded, optionally truncated); every token gets the feature of its
word (``bow``: one feature per distinct word string of a text, else per word), special tokens and
padding none; then a ``Tokens`` modality explains the ids (``encode_words``). The texts cut at the
words' character spans go into the record for highlighting, as for a function over strings.

Which tokens are never perturbed: the ones the tokenizer adds (``word_ids()`` is None: [CLS],
[SEP], padding, ...) and special tokens written in a text (a literal "[SEP]"). The unknown token
is not one of them: an [UNK] stands for a word of the text and is perturbed like any other token.
A word made only of never-perturbed tokens is not a feature and is left out of the word list, so
feature j of text b is always ``info.words[b][j]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Optional, Protocol, cast

import torch

from torchlime._util.checks import describe
from torchlime.stages.forward.model import model_placement
from torchlime.text._token_args import InfillSpec
from torchlime.text._tokens import Tokens
from torchlime.text.infill import Infiller
from torchlime.text.split import SplitText, check_word_counts
from torchlime.typing import Device, Model


class CharSpan(Protocol):
    """A word's characters in its text: ``text[start:end]``."""

    start: int
    end: int


class Encoding(Protocol):
    """A fast tokenizer's ``BatchEncoding`` of B texts: (B, L) tensors and the tokens' words."""

    is_fast: bool

    def __getitem__(self, key: str) -> torch.Tensor: ...

    def word_ids(self, batch_index: int) -> list[Optional[int]]:
        """The word of every token of text ``batch_index`` (None: a token the tokenizer added)."""
        ...

    def word_to_chars(self, batch_index: int, word_index: int) -> CharSpan:
        """The characters of word ``word_index`` of text ``batch_index``."""
        ...


class Named(Protocol):
    """A tokenizer's names of token ids."""

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        """The token strings of ``ids``."""
        ...


@dataclass(frozen=True)
class Tokenized:
    """B texts as a Hugging Face tokenizer encodes them, padded to one length.

    Attributes:
        encoding: the tokenizer's ``BatchEncoding``: long (B, L) "input_ids", (B, L) "attention_mask"
            (1 = token, 0 = padding).
        strings: the B texts' L token strings (``token_strings``), padding included.
        fixed_ids: the tokenizer's special ids but its unknown token's: never perturbed where a text
            writes them (an unknown token stands for a word and is perturbed like any other).
        unk_id: the tokenizer's unknown token id, or None.
    """

    encoding: Encoding
    strings: list[list[str]]
    fixed_ids: list[int]
    unk_id: Optional[int]

    @property
    def input_ids(self) -> torch.Tensor:
        """Long (B, L) the texts' token ids, on the CPU."""
        return self.encoding["input_ids"]

    @property
    def attention_mask(self) -> torch.Tensor:
        """(B, L) 1 for the texts' tokens, 0 for padding."""
        return self.encoding["attention_mask"]


def token_strings(tokenizer: object, rows: list[list[int]]) -> Optional[list[list[str]]]:
    """The string of every token id of ``rows`` (the tokenizer's ``convert_ids_to_tokens``).

    Args:
        tokenizer: a Hugging Face tokenizer, or anything else (None included).
        rows: B lists of token ids.

    Returns:
        B lists of strings, an id the tokenizer does not know written as its number; None when
        ``tokenizer`` has no ``convert_ids_to_tokens``.
    """
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    if not callable(convert):
        return None
    named = [cast(Named, tokenizer).convert_ids_to_tokens(row) for row in rows]
    return [[t if isinstance(t, str) else str(i) for t, i in zip(names, row)] for names, row in zip(named, rows)]


def tokenize(tokenizer: object, texts: list[str], max_length: Optional[int] = None) -> Tokenized:
    """Encode B texts with a Hugging Face tokenizer, padded to one length, with their token strings.

    Every text front door that takes strings with ``tokenizer=`` goes through here (``explain_text``,
    ``explain_generation``). The texts are padded as the tokenizer pads (to the longest); a single text
    needs no padding token.

    Args:
        tokenizer: a Hugging Face tokenizer (callable on a list of texts).
        texts: the B texts.
        max_length: truncate longer texts to this many tokens (None: no truncation).

    Returns:
        The ``Tokenized`` texts: ids and attention mask (B, L), token strings, never-perturbed ids.

    Raises:
        TypeError: a tokenizer that is not callable on texts.
        ValueError: several texts and a tokenizer without a padding token.
    """
    if not callable(tokenizer):
        raise TypeError(f"`tokenizer` must be a Hugging Face tokenizer (callable on texts), got {describe(tokenizer)}")
    padded = getattr(tokenizer, "pad_token_id", 0) is not None
    if len(texts) > 1 and not padded:
        raise ValueError(
            f"`tokenizer` must have a padding token to pad {len(texts)} texts to one length, got pad_token None; "
            "set one (e.g. tokenizer.pad_token = tokenizer.eos_token: padding is never attended nor perturbed)"
        )
    enc = cast(
        Encoding,
        tokenizer(texts, padding=padded, truncation=max_length is not None, max_length=max_length, return_tensors="pt"),
    )
    unk = getattr(tokenizer, "unk_token_id", None)
    unk = unk if isinstance(unk, int) else None
    special = {int(i) for i in getattr(tokenizer, "all_special_ids", [])}
    named = token_strings(tokenizer, enc["input_ids"].tolist())
    strings = named if named is not None else [[str(i) for i in row] for row in enc["input_ids"].tolist()]
    return Tokenized(enc, strings, sorted(special - {unk}), unk)


def word_features(
    enc: Encoding, texts: list[str], bow: bool, fixed_ids: Collection[int] = ()
) -> tuple[torch.Tensor, list[SplitText]]:
    """The feature of every token, and every text cut at its words' character spans.

    A token is never perturbed (feature -1) when the tokenizer added it (``word_ids()`` is None)
    or its id is in ``fixed_ids``. A word whose tokens are all never perturbed is no feature: it
    is left out of the words and its text becomes a piece of feature -1, so the features of a
    text are ``0..F_b-1`` in the order of the words, one per word of ``SplitText.words``.

    Args:
        enc: a fast tokenizer's ``BatchEncoding`` of the B texts, (B, L) ids.
        texts: the B texts.
        bow: one feature per distinct word string (True) or per word (False).
        fixed_ids: token ids never perturbed where they stand for text (special tokens written
            in a text); the unknown token's id does not belong here.

    Returns:
        ``(features, splits)``: long (B, L) feature of every token (-1: never perturbed or
        padding), and the B ``SplitText``s of the words the encoding holds.
    """
    batch, length = enc["input_ids"].shape
    fixed = {int(i) for i in fixed_ids}
    feats = torch.full((batch, length), -1, dtype=torch.long)
    splits: list[SplitText] = []
    for b, text in enumerate(texts):
        word_of = enc.word_ids(b)
        free = [w is not None and t not in fixed for w, t in zip(word_of, enc["input_ids"][b].tolist())]
        live = {w for w, ok in zip(word_of, free) if ok}
        spans = {w: enc.word_to_chars(b, w) for w in sorted({w for w in word_of if w is not None})}
        ids: dict[object, int] = {}
        fid: dict[int, int] = {}
        pieces: list[str] = []
        feature: list[int] = []
        words: list[str] = []
        at = 0
        for w, span in spans.items():
            word = text[span.start : span.end]
            if w in live:
                key = word if bow else w
                if key not in ids:
                    ids[key] = len(words)
                    words.append(word)
                fid[w] = ids[key]
            if span.start > at:
                pieces.append(text[at : span.start])
                feature.append(-1)
            pieces.append(word)
            feature.append(fid.get(w, -1))
            at = max(at, span.end)
        if at < len(text):
            pieces.append(text[at:])
            feature.append(-1)
        feats[b] = torch.tensor(
            [fid[w] if ok and w is not None else -1 for w, ok in zip(word_of, free)], dtype=torch.long
        )
        splits.append(SplitText(text, pieces, feature, words))
    return feats, splits


def _never_proposed(infill: InfillSpec, unk: Optional[int]) -> InfillSpec:
    """``infill`` as an ``Infiller`` that never proposes the unknown token (``unk``)."""
    if infill is None or unk is None:
        return infill
    infiller = infill if isinstance(infill, Infiller) else Infiller(infill)
    return dataclasses.replace(infiller, exclude_ids=(*infiller.exclude_ids, unk))


def default_mask_id(tokenizer: object) -> Optional[int]:
    """The tokenizer's mask token id, else its unknown token id, else its padding id."""
    for name in ("mask_token_id", "unk_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return None


@dataclass(frozen=True)
class Encoded:
    """Texts tokenized for a token-ID model: the ids and the ``Tokens`` modality that explains them.

    Attributes:
        input_ids: long (B, L) the texts' ids, on the device the call runs on.
        tokens: the ``Tokens`` modality (mask, word features, special ids, mode, ...).
        splits: the B texts cut at their words' character spans.
        strings: the B texts' token strings (``convert_ids_to_tokens``), padding included.
    """

    input_ids: torch.Tensor
    tokens: Tokens
    splits: list[SplitText]
    strings: list[list[str]]


def encode_words(  # noqa: PLR0913
    model: Model,
    texts: list[str],
    tokenizer: object,
    bow: bool,
    mode: Optional[str],
    max_length: Optional[int],
    device: Device,
    mask_id: Optional[int],
    pad_id: Optional[int],
    vocab_size: Optional[int],
    model_inputs: str,
    infill: InfillSpec,
) -> Encoded:
    """Tokenize ``texts`` once and make their words the features of a ``Tokens`` modality.

    Args:
        model: the token-ID model (its device is the default ``device``).
        texts: the B texts.
        tokenizer: a Hugging Face fast tokenizer.
        bow: one feature per distinct word string (True) or per word (False).
        mode: "delete", "replace" or "infill"; None: "delete" with ``bow``, else "replace".
        max_length: truncate longer texts to this many tokens (None: no truncation).
        device: where the ids go (None: the model's device).
        mask_id: hidden tokens' id; None: the tokenizer's mask token (else unknown, else padding).
        pad_id: the padding id of "delete"; None: the tokenizer's (else 0).
        vocab_size: as in ``Tokens``.
        model_inputs: as in ``Tokens``.
        infill: as in ``Tokens`` (it never proposes the unknown token).

    Returns:
        The ``Encoded`` texts.

    Raises:
        TypeError: a tokenizer that is not a fast one.
        ValueError: a text with fewer than 2 words that can be features.
    """
    tokenized = tokenize(tokenizer, texts, max_length)
    enc, strings, fixed, unk = tokenized.encoding, tokenized.strings, tokenized.fixed_ids, tokenized.unk_id
    if not getattr(enc, "is_fast", False):
        raise TypeError(
            f"`tokenizer` must be a fast tokenizer (it maps tokens to words and characters), got "
            f"{type(tokenizer).__name__}; load it with use_fast=True, or pass a function over strings as `model`"
        )
    feats, splits = word_features(enc, texts, bow, fixed)
    cut = "" if max_length is None else f", after truncation to max_length={max_length}"
    check_word_counts(
        splits,
        lambda b: (
            f"tokens {_shown(strings[b], enc['attention_mask'][b])}{cut}; the tokenizer's special tokens "
            "are never perturbed"
        ),
    )
    dev = model_placement(model, feats)[0] if device is None else torch.device(device)
    pad = getattr(tokenizer, "pad_token_id", None)
    mode = mode if mode is not None else ("delete" if bow else "replace")
    tokens = Tokens(
        attention_mask=enc["attention_mask"].to(dev),
        word_ids=feats.to(dev),
        special_ids=fixed,
        mode=mode,
        mask_id=mask_id if mask_id is not None else default_mask_id(tokenizer),
        pad_id=pad_id if pad_id is not None else (pad if isinstance(pad, int) else 0),
        vocab_size=vocab_size,
        model_inputs=model_inputs,
        infill=_never_proposed(infill, unk) if mode == "infill" else infill,  # [UNK] is a feature, no proposal
    )
    return Encoded(enc["input_ids"].to(dev), tokens, splits, strings)


def _shown(tokens: list[str], attention: torch.Tensor, most: int = 12) -> str:
    """The attended tokens of a text, at most ``most`` of them, for an error message."""
    kept = [t for t, a in zip(tokens, attention.tolist()) if a]
    return repr(kept[:most])[:-1] + (f", ... ({len(kept)} in all)]" if len(kept) > most else "]")
