"""The text doors, each a text modality in one call.

* ``explain_tokens`` (``Tokens``): token classifiers over token ids; features are tokens, or words (groups
  of sub-word tokens from a word-id map); special tokens and padding are never perturbed; hidden features
  are replaced by a mask id, deleted (the row is re-packed to the left), or re-written by a masked LM
  (``Infiller``).
* ``explain_text`` (``Words``): the words of raw strings, with a function over strings (lime's
  ``classifier_fn``: every chunk of perturbed texts is one call of it) or a Hugging Face fast tokenizer and a
  token-ID model (the texts are tokenized once and the word features become token features).
* ``explain_generation`` (``Generation``): the prompt tokens of a causal LM, the target the teacher-forced
  log-probability of a continuation (``torchlime.targets.Continuation``), given or generated greedily
  (``_generation.Generation`` pads and generates; ``_generated.GenerationInfo`` names the rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol, Union

import torch
from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, documented, explain_with
from torchlime.targets.continuation import Continuation
from torchlime.text._generation import Generation
from torchlime.text._prompts import Tokenizer
from torchlime.text._token_args import InfillSpec, SpecialIds, infer_vocab_size, token_features
from torchlime.text._tokens import Tokens
from torchlime.text._words import Words
from torchlime.text.split import Splitter
from torchlime.typing import UNSET, Device, Model, NSamples, Seed, TargetSpec, Unset

__all__ = [
    "explain_tokens",
    "feature_positions",
    "infer_vocab_size",
    "token_features",
    "word_ids_from_encoding",
    "explain_text",
    "explain_generation",
]


class WordIds(Protocol):
    """A tokenizer's encoding that maps tokens to words (a Hugging Face fast ``BatchEncoding``)."""

    def __getitem__(self, key: str) -> Sequence[object]: ...

    def word_ids(self, batch_index: int) -> list[Optional[int]]:
        """The word of every token of text ``batch_index`` (None: a token the tokenizer added)."""
        ...


def feature_positions(explanation: Explanation) -> torch.Tensor:
    """The first token position of every feature of a token explanation.

    Feature ids skip special tokens and padding, so they are not positions: this maps
    ``top_features`` ids back (one gather, on the device).

    Args:
        explanation: a token explanation (features (B, L), coef (B, T, F)).

    Returns:
        long (B, F): each feature's first position, -1 for the padding features of inputs with fewer.

    Example:
        >>> ids = torch.tensor([[101, 7, 8, 9, 102]])               # [CLS] 7 8 9 [SEP]
        >>> explanation = explain_tokens(lambda t: (t == 9).float().sum(1, keepdim=True), ids, mask_id=0,
        ...                      special_ids=[101, 102], n_samples=64)
        >>> idx, _ = explanation.top_features(1)
        >>> idx.tolist(), feature_positions(explanation).gather(1, idx[:, 0]).tolist()  # feature 2 is position 3
        ([[[2]]], [[3]])
    """
    feats = explanation.features.reshape(explanation.features.shape[0], -1)
    b, length = feats.shape
    f = explanation.coef.shape[-1]
    pos = torch.arange(length, device=feats.device).expand(b, length)
    first = torch.full((b, f + 1), length, dtype=torch.long, device=feats.device)
    first.scatter_reduce_(1, torch.where(feats < 0, f, feats.long()), pos, reduce="amin")
    return torch.where(first[:, :f] == length, -1, first[:, :f])


def word_ids_from_encoding(encoding: WordIds, batch_size: Optional[int] = None) -> torch.Tensor:
    """A long (B, L) word-id map from a Hugging Face ``BatchEncoding`` (None -> -1).

    Args:
        encoding: object with ``word_ids(i)`` returning a list of ints / None per row.
        batch_size: B (default: ``len(encoding["input_ids"])``).
    """
    n = batch_size if batch_size is not None else len(encoding["input_ids"])
    rows = [[-1 if w is None else int(w) for w in encoding.word_ids(i)] for i in range(n)]
    return torch.tensor(rows, dtype=torch.long)


@documented
def explain_tokens(  # noqa: D417, PLR0913
    model: Model,
    input_ids: torch.Tensor,
    *,
    attention_mask: Optional[torch.Tensor] = None,
    word_ids: Optional[torch.Tensor] = None,
    special_ids: SpecialIds = None,
    mode: str = "replace",
    mask_id: Optional[int] = None,
    pad_id: int = 0,
    vocab_size: Optional[int] = None,
    model_inputs: str = "auto",
    infill: InfillSpec = None,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain B token sequences with LIME over their tokens or words.

    ``Explainer(...).explain(model, input_ids, Tokens(...))`` in one call: the same numbers.

    Args:
        model: classifier taking ``(input_ids, attention_mask)`` and returning
            logits / probabilities (c, K) or an object with ``.logits``.
        input_ids: integer (B, L) token ids (padding anywhere, marked by the mask).
        attention_mask: (B, L) 1 = token, 0 = padding (default all ones).
        word_ids: the feature map: (B or 1, L) word of every token (-1: none), e.g. from
            ``word_ids_from_encoding``; None makes every token its own feature.
        special_ids: ids never perturbed (CLS, SEP, ...), wherever they stand. Padding never is
            either. Leave the unknown token out when [UNK] tokens stand for words of the text
            (``tokenizer.all_special_ids`` holds it): else those words are no features. Feature
            ids are renumbered ``0..F_b-1`` over what is perturbed, so a word or token made only
            of special ids has no coefficient and the next ones shift: read ``exp.features`` (or
            ``feature_positions``) to map coefficients back, not the word ids given.
        mode: "replace" (hidden tokens -> ``mask_id``), "delete" (dropped, rows
            re-padded to the left with ``pad_id``) or "infill" (masked-LM proposals).
        mask_id: id of hidden tokens (replace) / of the MLM's mask token (infill).
        pad_id: padding id written by "delete".
        vocab_size: checks the ids; default: the model's input-embedding size, if any.
        model_inputs: "auto" (positional with a mask, ids alone without),
            "positional", "keywords" or "ids".
        infill: an ``Infiller`` or a masked LM (wrapped with default settings).
        generator: seed or ``torch.Generator`` (masks and infill sampling).
        **options: the engine's options (``ExplainOptions``) but ``baseline`` (the fill is ``mode``),
            ``perturb_fn``, ``normalize``, ``chunk_format`` and ``additional_forward_args``; a
            ``kernel`` measures distances on the masks, or is a ``HybridKernel`` (weights from the
            perturbed text); ``preset="lime"`` or ``"lime_text"``: lime's text explainer.

    Returns:
        ``Explanation`` with coef (B, T, F), features (B, L) (-1 never perturbed), input_shape (L,),
        ``info`` a ``TokensInfo`` (``meta["text_tokens"]``); ``meta`` keeps "mode", "model_rows"
        (the samples' rows and those the objectives spent) and, with "infill", "infill",
        "objective", "strategy" and "mlm_rows".

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.

    Example:
        >>> ids = torch.tensor([[101, 7, 8, 9, 102]])               # [CLS] 7 8 9 [SEP]
        >>> exp = explain_tokens(lambda t: (t == 9).float().sum(1, keepdim=True), ids, mask_id=0,
        ...                      special_ids=[101, 102], n_samples=64)
        >>> exp.features.tolist(), exp.meta["mode"]
        ([[-1, 0, 1, 2, -1]], 'replace')
    """
    modality = Tokens(attention_mask, word_ids, special_ids, mode, mask_id, pad_id, vocab_size, model_inputs, infill)
    return explain_with(model, input_ids, modality, Call(target, n_samples, generator), options, "explain_tokens")


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


@documented
def explain_generation(  # noqa: D417, PLR0913
    model: Model,
    input_ids: Union[torch.Tensor, str, Sequence[str]],
    *,
    attention_mask: Optional[torch.Tensor] = None,
    word_ids: Optional[torch.Tensor] = None,
    special_ids: SpecialIds = None,
    mode: str = "replace",
    mask_id: Optional[int] = None,
    pad_id: int = 0,
    vocab_size: Optional[int] = None,
    model_inputs: str = "auto",
    infill: InfillSpec = None,
    tokenizer: Optional[Tokenizer] = None,
    target: Union[Continuation, None, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
) -> Explanation:
    """Explain what a causal LM generates after B prompts, with LIME over the prompts' tokens or words.

    ``Explainer(...).explain(model, input_ids, Generation(...), target=...)`` in one call: the same numbers.
    The modality's fields are described on ``torchlime.text.Generation``.

    Args:
        model: causal LM taking ids (c, L) and a mask (see ``model_inputs``), returning logits (c, L, V)
            or an object with ``.logits`` (a Hugging Face ``*ForCausalLM``).
        input_ids: integer (B, L_p) prompts, or text: a str or a list of B str with ``tokenizer``.
        attention_mask: (B, L_p) 1 = token, 0 = padding, as in ``Generation``.
        word_ids: (B or 1, L_p) word of every prompt token, as in ``Generation``.
        special_ids: ids never perturbed (BOS, ...), as in ``Generation``.
        mode: "replace", "delete" or "infill", as in ``Generation``.
        mask_id: the id hidden prompt tokens become, as in ``Generation``.
        pad_id: the padding id of "delete" rows, as in ``Generation``.
        vocab_size: the model's vocabulary size, as in ``Generation``.
        model_inputs: how the model takes ids and mask, as in ``Generation``.
        infill: the masked LM of ``mode="infill"``, as in ``Generation``.
        tokenizer: tokenizes text prompts and names the tokens, as in ``Generation``.
        target: a ``Continuation`` (unset or None: ``Continuation()``): its ``token_ids`` (B, G), or G =
            ``max_new_tokens`` ids generated greedily; ``per_token`` gives T = 1 + G, else T = 1.
        generator: seed or ``torch.Generator`` of the masks.
        **options: the engine's options (``ExplainOptions``) but those the modality sets itself
            (``baseline``: the fill is ``mode``; ``perturb_fn``, ``normalize``, ``chunk_format``,
            ``additional_forward_args``).

    Returns:
        ``Explanation`` over the (B, L) rows: coef (B, T, F), features (B, L) (-1 on padding, special
        ids and the continuation), with ``return_samples`` outputs (B, S, T) log-probabilities; ``info``
        a ``GenerationInfo``: the continuation (B, G) and the rows explained with their mask (B, L)
        (``info.continuation``, ``info.input_ids``, ``info.attention_mask``), the prompt's features and
        the generated tokens named (``prompt_tokens``, ``generated_tokens``) for
        ``torchlime.text.viz.explanation_html(exp, index)`` and the notebook display.

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.

    Example:
        >>> lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4
        >>> exp = explain_generation(lm, torch.tensor([[3, 5, 7]]), mask_id=0, n_samples=64,
        ...                          target=Continuation(max_new_tokens=2))
        >>> exp.coef.shape, exp.info.continuation.shape          # (B, 1 + G, F), (B, G)
        (torch.Size([1, 3, 3]), torch.Size([1, 2]))
    """
    modality = Generation(
        attention_mask, word_ids, special_ids, mode, mask_id, pad_id, vocab_size, model_inputs, infill, tokenizer
    )
    call = Call(target, n_samples, generator)
    return explain_with(model, input_ids, modality, call, options, "explain_generation")
