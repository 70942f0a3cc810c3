"""``explain_text`` with a tokenizer: words of the tokenizer's encoding as token features.

The texts are tokenized once (padded, optionally truncated); every token gets the feature of its
word (``bow``: one feature per distinct word string of a text, else per word), special tokens and
padding none; then ``explain_tokens`` explains the ids. The texts cut at the words' character
spans go into ``meta`` for highlighting, as for a function over strings.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import torch

from torchlime._checks import describe
from torchlime.engine.explanation import Explanation
from torchlime.stages.forward.model import model_placement
from torchlime.text._explain import explain_tokens
from torchlime.text.split import SplitText, with_words


def _encode(tokenizer: Any, texts: list[str], max_length: Optional[int]) -> Any:
    """The padded encoding of ``texts`` (a fast tokenizer's ``BatchEncoding``)."""
    if not callable(tokenizer):
        raise TypeError(f"`tokenizer` must be a Hugging Face tokenizer (callable on texts), got {describe(tokenizer)}")
    enc = tokenizer(texts, padding=True, truncation=max_length is not None, max_length=max_length, return_tensors="pt")
    if not getattr(enc, "is_fast", False):
        raise TypeError(
            f"`tokenizer` must be a fast tokenizer (it maps tokens to words and characters), got "
            f"{type(tokenizer).__name__}; load it with use_fast=True, or pass a function over strings as `model`"
        )
    return enc


def word_features(enc: Any, texts: list[str], bow: bool) -> tuple[torch.Tensor, list[SplitText]]:
    """The feature of every token, and every text cut at its words' character spans.

    Args:
        enc: a fast tokenizer's ``BatchEncoding`` of the B texts, (B, L) ids.
        texts: the B texts.
        bow: one feature per distinct word string (True) or per word (False).

    Returns:
        ``(features, splits)``: long (B, L) feature of every token (-1: special token or padding),
        and the B ``SplitText``s of the words the encoding holds.
    """
    batch, length = enc["input_ids"].shape
    feats = torch.full((batch, length), -1, dtype=torch.long)
    splits = []
    for b, text in enumerate(texts):
        word_of = enc.word_ids(b)
        spans = {w: enc.word_to_chars(b, w) for w in sorted({w for w in word_of if w is not None})}
        ids: dict[Any, int] = {}
        fid: dict[int, int] = {}
        pieces: list[str] = []
        feature: list[int] = []
        words: list[str] = []
        at = 0
        for w, span in spans.items():
            word = text[span.start : span.end]
            key = word if bow else w
            if key not in ids:
                ids[key] = len(words)
                words.append(word)
            fid[w] = ids[key]
            if span.start > at:
                pieces.append(text[at : span.start])
                feature.append(-1)
            pieces.append(word)
            feature.append(fid[w])
            at = max(at, span.end)
        if at < len(text):
            pieces.append(text[at:])
            feature.append(-1)
        feats[b] = torch.tensor([-1 if w is None else fid[w] for w in word_of], dtype=torch.long)
        splits.append(SplitText(text, pieces, feature, words))
    return feats, splits


def _mask_id(tokenizer: Any) -> Optional[int]:
    """The tokenizer's mask token id, else its unknown token id, else its padding id."""
    for name in ("mask_token_id", "unk_token_id", "pad_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return None


def explain_tokenized(
    model: Any,
    texts: list[str],
    tokenizer: Any,
    bow: bool,
    mode: Optional[str],
    max_length: Optional[int],
    device: Union[None, str, torch.device],
    kwargs: dict[str, Any],
) -> Explanation:
    """``explain_text`` for a tokenizer and a token-ID model (arguments as there)."""
    enc = _encode(tokenizer, texts, max_length)
    feats, splits = word_features(enc, texts, bow)
    dev = model_placement(model, feats)[0] if device is None else torch.device(device)
    options = dict(kwargs)
    options.setdefault("mask_id", _mask_id(tokenizer))
    pad = getattr(tokenizer, "pad_token_id", None)
    options.setdefault("pad_id", pad if isinstance(pad, int) else 0)
    exp = explain_tokens(
        model,
        enc["input_ids"].to(dev),
        attention_mask=enc["attention_mask"].to(dev),
        word_ids=feats.to(dev),
        special_ids=list(getattr(tokenizer, "all_special_ids", [])),
        mode=mode if mode is not None else ("delete" if bow else "replace"),
        **options,
    )
    tokens = [tokenizer.convert_ids_to_tokens(row) for row in enc["input_ids"].tolist()]
    return with_words(exp, splits, tokens=tokens)
