"""``explain_text``: LIME over the words of raw strings, for a function over strings or a tokenizer and model.

Words are the features (a word repeated in a text is one feature with ``bow=True``). With a
function over strings (lime's ``classifier_fn``), the engine runs on the texts' pieces and every
chunk of perturbed texts is one call of the function. With a Hugging Face tokenizer (a fast one:
it maps tokens to words) and a token-ID model, the texts are tokenized once and the word features
become token features for ``explain_tokens``: special tokens are never perturbed (an unknown token
stands for a word and is), and hidden words are deleted (every sample gets its own attention mask)
or replaced by the mask token.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch

from torchlime._checks import describe
from torchlime.engine.explainer import execute
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import UNSET, resolve
from torchlime.engine.registry import resolve_kernel
from torchlime.engine.request import Request
from torchlime.text._tokenized import explain_tokenized
from torchlime.text.split import Splitter, check_word_counts, feature_tensor, split_text, with_words
from torchlime.text.strings import StringPerturbation, string_model

_RESERVED = ("inputs", "features", "baseline", "perturb_fn", "input_ids", "attention_mask", "word_ids")


def _texts(texts: Any) -> list[str]:
    """The texts as a list of B >= 1 strings."""
    if isinstance(texts, np.ndarray) and texts.dtype.kind in "US" and texts.ndim == 1:
        texts = texts.tolist()  # a numpy array of strings, as lime's users pass them
    listed = [texts] if isinstance(texts, str) else texts
    if not isinstance(listed, (list, tuple)) or not listed or not all(isinstance(t, str) for t in listed):
        raise TypeError(f"`texts` must be a string or a non-empty list of strings, got {describe(texts)}")
    return list(listed)


def _check_kernel(kernel: Any, preset: Any) -> None:
    """Refuse input-space kernels: they would compare piece indices or token ids as numbers."""
    chosen = resolve(preset, dict(kernel=kernel), "text")["kernel"]
    if chosen is not UNSET and chosen is not None and resolve_kernel(chosen).space == "input":
        raise ValueError(
            f"`kernel` must measure distances on the masks (space='mask') for text: an input-space "
            f"kernel such as {chosen!r} would compare word positions as numbers"
        )


def explain_text(
    model: Callable[..., Any],
    texts: Union[str, Sequence[str]],
    *,
    tokenizer: Any = None,
    split_expression: Splitter = r"\W+",
    bow: bool = True,
    char_level: bool = False,
    mask_string: Optional[str] = None,
    mode: Optional[str] = None,
    max_length: Optional[int] = None,
    device: Union[None, str, torch.device] = None,
    **kwargs: Any,
) -> Explanation:
    r"""Explain B texts with LIME over their words.

    Args:
        model: without ``tokenizer``, a function over a list of c strings returning scores
            (c, K) or (c,) as a tensor or numpy array (lime's ``classifier_fn``); with
            ``tokenizer``, a token-ID model taking ``(input_ids, attention_mask)`` (c, L) each and
            returning logits (c, K) or an object with ``.logits`` (``AutoModelForSequenceClassification``).
        texts: one string or a list of B strings.
        tokenizer: None, or a Hugging Face fast tokenizer whose ids ``model`` reads; words are then
            the tokenizer's words and ``split_expression`` / ``char_level`` are not used. A word the
            tokenizer maps to its unknown token is a feature like any other; the tokens it adds
            ([CLS], [SEP], padding, ...) and special tokens written in a text are never perturbed,
            and a word made only of those is not a feature (it is left out of ``meta["words"]``).
        split_expression: separators as a regular expression (lime's default ``\W+``), or a
            callable returning a text's words in order.
        bow: one feature per distinct word (True) or per occurrence (False).
        char_level: every character is a feature.
        mask_string: None removes hidden words when ``bow`` is True (lime's behaviour) and writes
            ``"UNKWORDZ"`` (``chr(0)`` for characters) in their place otherwise; a string replaces
            every hidden word. With ``tokenizer``: see ``mode``.
        mode: with ``tokenizer``: "delete" (hidden words' tokens are dropped and every sample gets
            its own attention mask; the default with ``bow``), "replace" (hidden tokens become the
            tokenizer's mask token, or ``mask_id``; the default without ``bow``) or "infill".
        max_length: with ``tokenizer``: truncate longer texts to this many tokens.
        device: where the masks and the fit run (default: the model's device with a tokenizer,
            else the CPU).
        **kwargs: ``explain`` keywords (target, n_samples, preset, sampler, kernel, surrogate,
            generator, batch_size, softmax, progress, return_samples, ...), and with a tokenizer
            ``explain_tokens`` ones (mask_id, model_inputs, infill, ...).

    Returns:
        ``Explanation`` with coef (B, T, F) over the words (F = the most words of any text);
        ``meta["words"]`` holds every text's F_b words, ``coef[b, :, j]`` being the weight of
        ``meta["words"][b][j]`` (``n_features[b]`` = F_b), ``meta["texts"]`` the texts and
        ``meta["pieces"]`` / ``meta["piece_features"]`` the texts cut into words and separators
        (``torchlime.text.viz.text_html`` highlights them).

    Raises:
        TypeError / ValueError: naming the argument, what was expected and what came.
        ValueError: a text with fewer than 2 words that can be features (an empty text, one word,
            only special tokens).

    Example:
        >>> def positive(texts):  # a "model" over strings: P(positive) grows with "good"
        ...     p = torch.tensor([min(1.0, 0.2 + 0.4 * t.split().count("good")) for t in texts])
        ...     return torch.stack((1 - p, p), 1)
        >>> exp = explain_text(positive, "a good movie with a good cast", target=1, n_samples=500)
        >>> words = exp.meta["words"][0]
        >>> words[int(exp.coef[0, 0].argmax())]
        'good'
    """
    bad = [k for k in kwargs if k in _RESERVED]
    if bad:
        raise TypeError(f"explain_text() does not take {bad}: features are the words of `texts`")
    listed = _texts(texts)
    for name, flag in (("bow", bow), ("char_level", char_level)):
        if not isinstance(flag, bool):
            raise TypeError(f"`{name}` must be True or False, got {describe(flag)}")
    if mask_string is not None and not isinstance(mask_string, str):
        raise TypeError(f"`mask_string` must be None or a str, got {describe(mask_string)}")
    if not callable(model):
        raise TypeError(f"`model` must be callable (a function over strings or a token model), got {describe(model)}")
    _check_kernel(kwargs.get("kernel", UNSET), kwargs.get("preset"))
    if tokenizer is not None:
        return explain_tokenized(model, listed, tokenizer, bow, mode, max_length, device, kwargs)
    if mode is not None or max_length is not None:
        raise ValueError("`mode` and `max_length` apply with a `tokenizer`; without one, pass `mask_string`")
    splits = [split_text(t, split_expression, bow, char_level) for t in listed]
    how = "characters" if char_level else f"split_expression {split_expression!r}"
    check_word_counts(splits, lambda b: f"{how} (separators are never words)")
    dev = torch.device("cpu") if device is None else torch.device(device)
    pieces, feats = feature_tensor(splits, dev)
    if mask_string is None and not bow:
        mask_string = chr(0) if char_level else "UNKWORDZ"
    options = dict(kwargs, perturb_fn=StringPerturbation(splits, mask_string))
    exp = execute(Request(model, pieces, feats, options, modality="text", input_name="texts", adapter=string_model))
    return with_words(exp, splits)
