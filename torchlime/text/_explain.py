"""``explain_tokens``: LIME for token classifiers, batched on the device (the ``Tokens`` modality in one call).

Features are tokens, or words (groups of sub-word tokens from a word-id map). Special tokens and
padding are never perturbed. Hidden features are replaced by a mask id, deleted (the row is
re-packed to the left), or re-written by a masked LM (``Infiller``); see ``_tokens.Tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Protocol, Union

import torch
from typing_extensions import Unpack

from torchlime.engine import Call, ExplainOptions, Explanation, documented, explain_with
from torchlime.text._token_args import InfillSpec, SpecialIds, infer_vocab_size, token_features
from torchlime.text._tokens import Tokens
from torchlime.typing import UNSET, Model, NSamples, Seed, TargetSpec, Unset

__all__ = ["explain_tokens", "feature_positions", "infer_vocab_size", "token_features", "word_ids_from_encoding"]


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
