"""``explain_text``: LIME over the words of raw strings (the ``Words`` modality in one call).

Words are the features (a word repeated in a text is one feature with ``bow=True``). With a
function over strings (lime's ``classifier_fn``), the engine runs on the texts' pieces and every
chunk of perturbed texts is one call of the function. With a Hugging Face tokenizer (a fast one:
it maps tokens to words) and a token-ID model, the texts are tokenized once and the word features
become token features (see ``_words.Words``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, documented, explain_with
from torchlime.text._token_args import InfillSpec
from torchlime.text._words import Words
from torchlime.text.split import Splitter
from torchlime.typing import UNSET, Device, Model, NSamples, Seed, TargetSpec, Unset


@documented
def explain_text(  # noqa: D417, PLR0913
    model: Model,
    texts: Union[str, Sequence[str]],
    *,
    tokenizer: object = None,
    split_expression: Splitter = r"\W+",
    bow: bool = True,
    char_level: bool = False,
    mask_string: Optional[str] = None,
    mode: Optional[str] = None,
    max_length: Optional[int] = None,
    device: Device = None,
    mask_id: Optional[int] = None,
    pad_id: Optional[int] = None,
    vocab_size: Optional[int] = None,
    model_inputs: str = "auto",
    infill: InfillSpec = None,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    r"""Explain B texts with LIME over their words.

    ``Explainer(...).explain(model, texts, Words(...))`` in one call: the same numbers.

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
            and a word made only of those is not a feature (it is left out of ``info.words``).
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
        mask_id: with ``tokenizer``: the id hidden tokens become ("replace"; the masked LM's mask
            id for "infill"); None: the tokenizer's mask token, else its unknown, else its padding token.
        pad_id: with ``tokenizer``: the padding id "delete" writes; None: the tokenizer's (else 0).
        vocab_size: with ``tokenizer``: checks the ids (default: the model's input-embedding size).
        model_inputs: with ``tokenizer``: how the model takes ids and mask (see ``explain_tokens``).
        infill: with ``tokenizer`` and ``mode="infill"``: an ``Infiller`` or a masked LM.
        **options: the engine's options (``ExplainOptions``) but ``baseline`` (hidden words are
            removed or masked: ``mask_string``, ``mode``), ``perturb_fn``, ``normalize``,
            ``chunk_format`` and ``additional_forward_args``; a ``kernel`` measures distances on the
            masks; ``preset="lime"`` or ``"lime_text"``: lime's text explainer.

    Returns:
        ``Explanation`` with coef (B, T, F) over the words (F = the most words of any text);
        ``info`` is its ``WordsInfo``: ``info.words[b]`` holds text b's F_b words, ``coef[b, :, j]``
        being the weight of ``info.words[b][j]`` (``n_features[b]`` = F_b), ``info.texts`` the
        texts and ``info.pieces`` / ``info.piece_features`` the texts cut into words and
        separators (``torchlime.text.viz.text_html`` highlights them). ``meta["text_words"]`` is the
        record as plain data; the keys "words", "texts", "pieces", "piece_features" of ``meta``
        repeat it for code written for 0.1.

    Raises:
        TypeError / ValueError: naming the argument, what was expected and what came (an unknown
            keyword is Python's TypeError).
        ValueError: a text with fewer than 2 words that can be features (an empty text, one word,
            only special tokens).

    Example:
        >>> def positive(texts):  # a "model" over strings: P(positive) grows with "good"
        ...     p = torch.tensor([min(1.0, 0.2 + 0.4 * t.split().count("good")) for t in texts])
        ...     return torch.stack((1 - p, p), 1)
        >>> exp = explain_text(positive, "a good movie with a good cast", target=1, n_samples=500)
        >>> words = exp.info.words[0]
        >>> words[int(exp.coef[0, 0].argmax())]
        'good'
    """
    modality = Words(
        tokenizer,
        split_expression,
        bow,
        char_level,
        mask_string,
        mode,
        max_length,
        device,
        mask_id,
        pad_id,
        vocab_size,
        model_inputs,
        infill,
    )
    return explain_with(model, texts, modality, Call(target, n_samples, generator), options, "explain_text")
