"""Prompts given as text, and the record that names a generation explanation's tokens.

``explain_generation`` tokenizes text prompts as ``explain_text`` tokenizes texts (``_tokenized.tokenize``,
the one path from strings to ids), and names the prompt's features and the continuation's tokens with the
tokenizer's ``convert_ids_to_tokens`` (``_tokenized.token_strings``) for the views (``_generated``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Protocol, Sequence, cast

import torch

from torchlime._util.checks import describe
from torchlime.engine.explanation import Explanation
from torchlime.stages.forward.model import model_placement
from torchlime.text._generated import GenerationInfo
from torchlime.text._token_args import SpecialIds
from torchlime.text._tokenized import token_strings, tokenize
from torchlime.text.viz import feature_strings


class Tokenizer(Protocol):
    """What ``explain_generation`` uses of a tokenizer (a Hugging Face one): decoding rows of ids.

    With text prompts it also encodes them (a call on a list of texts, as ``explain_text`` makes); its
    ``convert_ids_to_tokens``, where it has one, names the tokens the views show.
    """

    def batch_decode(self, sequences: list[list[int]], /) -> Sequence[str]:
        """The text of every row of ids."""
        ...


def text_prompts(
    model: Callable[..., object],
    prompts: object,
    tokenizer: Optional[Tokenizer],
    attention_mask: Optional[torch.Tensor],
    special_ids: SpecialIds,
) -> tuple[torch.Tensor, torch.Tensor, SpecialIds]:
    """Text prompts as token ids, tokenized as ``explain_text`` tokenizes texts (``_tokenized.tokenize``).

    Args:
        model: the causal LM (its device is where the ids go).
        prompts: a str or a list of B str.
        tokenizer: the Hugging Face tokenizer of ``model``.
        attention_mask: must be None (the tokenizer makes it).
        special_ids: the ids never perturbed; None: the tokenizer's special ids but its unknown token's.

    Returns:
        ``(input_ids, attention_mask, special_ids)``: long (B, L_p) ids and (B, L_p) mask on the model's device.

    Raises:
        TypeError: no tokenizer, or a list that holds something else than strings.
        ValueError: an ``attention_mask`` besides text.
    """
    if tokenizer is None:
        raise TypeError(
            f"`input_ids` given as text ({describe(prompts)}) needs `tokenizer=` (the model's Hugging Face "
            "tokenizer) to become token ids, got tokenizer=None"
        )
    texts = [prompts] if isinstance(prompts, str) else list(cast(Sequence[object], prompts))
    if not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`input_ids` must be a tensor of ids, a str or a list of str, got {describe(prompts)}")
    if attention_mask is not None:
        raise ValueError("`attention_mask` must be None with text prompts (the tokenizer makes it), got a mask")
    tokenized = tokenize(tokenizer, cast(list[str], texts))
    dev = model_placement(model, tokenized.input_ids)[0]
    fixed = tokenized.fixed_ids if special_ids is None else special_ids
    return tokenized.input_ids.to(dev), tokenized.attention_mask.to(dev), fixed


def is_text(prompts: object) -> bool:
    """Whether prompts are text: a str, or a non-empty list or tuple that holds a str."""
    return isinstance(prompts, str) or (isinstance(prompts, (list, tuple)) and any(isinstance(p, str) for p in prompts))


def generation_info(
    explanation: Explanation, rows: torch.Tensor, g: int, per_token: bool, tokenizer: Optional[Tokenizer]
) -> GenerationInfo:
    """The record of the explained rows: the prompt's features and the continuation's tokens, named.

    Args:
        explanation: the token explanation of ``rows`` (features (B, L)).
        rows: long (B, L) the rows explained, their last ``g`` tokens the continuation.
        g: G, the continuation's length.
        per_token: whether the targets are the continuation's tokens too.
        tokenizer: names the tokens where it has ``convert_ids_to_tokens``; else the ids are written out.

    Returns:
        The ``GenerationInfo`` (``token_info`` unset): one host read of the rows and the features.
    """
    ids = rows.tolist()
    named = token_strings(tokenizer, ids)
    shown = named if named is not None else [[str(i) for i in row] for row in ids]
    features, counts = explanation.features.cpu(), explanation.n_features.cpu()
    host = dataclasses.replace(explanation, features=features, n_features=counts)
    prompt = [feature_strings(host, shown[b], b) for b in range(len(ids))]
    generated = None if named is None else [row[-g:] for row in named]
    return GenerationInfo(prompt, [row[-g:] for row in ids], generated, per_token)
