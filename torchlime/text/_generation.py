"""``Generation``: the text a causal language model generates, explained over its prompt's tokens or words.

The target is the teacher-forced log-probability of a continuation (``torchlime.targets.Continuation``):
the whole continuation's and each of its tokens'. ``prepare`` checks the prompts (ids, or text tokenized by
``_tokenized.tokenize``), moves their padding to the left, generates the continuation greedily where none
is given (one batched model call per new token, no ``model.generate``: any causal LM callable works), and
hands the engine the (B, L_p + G) rows of prompt and continuation as a ``Tokens`` call in which the
continuation is never perturbed, so every position keeps its place; ``finish`` names the prompt's
features and the continuation's tokens (``GenerationInfo``, ``_generated``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable, ClassVar, Optional

import torch

from torchlime._util.checks import check_choice, check_integer, check_tensor, describe, from_numpy
from torchlime.engine import Call, Config, Explanation, Modality, Prepared
from torchlime.targets.continuation import Continuation
from torchlime.text._generation_plan import RowTokens, fresh_rows, greedy_rows, in_range, prompt_plan
from torchlime.text._generation_plan import left_pad as left_pad  # its home before the plan
from torchlime.text._prompts import Tokenizer, generation_info, is_text, text_prompts
from torchlime.text._token_args import TokenArgs, infer_vocab_size
from torchlime.text._tokenized import default_mask_id
from torchlime.text._tokens import OWNED, TokensPrepared, finish_tokens, refuse_owned
from torchlime.text.edits import MODEL_INPUTS
from torchlime.typing import UNSET, Model


def takes_positions(model: Callable[..., object]) -> bool:
    """Whether ``model`` (an ``nn.Module``'s ``forward``, or a function) takes a ``position_ids`` keyword."""
    fn = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        return "position_ids" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


class WithPositions(torch.nn.Module):
    """A causal LM called with ``position_ids`` from the attention mask (each token's rank among the tokens).

    Args:
        model: a model whose ``forward`` takes ``input_ids``, ``attention_mask`` and ``position_ids``.
    """

    def __init__(self, model: Callable[..., object]) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        """``model(input_ids=, attention_mask=, position_ids=(attention_mask.cumsum(1) - 1).clamp_min(0))``."""
        positions = (attention_mask.long().cumsum(1) - 1).clamp_min(0)
        return self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions)


def _positioned(adapter: Callable[[Model], Model], model: Model) -> Model:
    """The token adapter around ``WithPositions(model)``: the model the engine runs gets its positions."""
    return adapter(WithPositions(model))


@dataclass(frozen=True)
class GenerationPrepared(TokensPrepared):
    """A generation call's hand-over: the token call of the rows, and what ``finish`` records of them.

    Attributes:
        rows: long (B, L) the rows explained (left-padded prompt, then the continuation).
        rows_attention: (B, L) their attention mask.
        continuation: long (B, G) the continuation ids.
        per_token: whether targets 1..G are the continuation's tokens.
    """

    rows: Optional[torch.Tensor] = None
    rows_attention: Optional[torch.Tensor] = None
    continuation: Optional[torch.Tensor] = None
    per_token: bool = True


@dataclass(frozen=True)
class Generation(TokenArgs, Modality):
    """Prompts (B, L_p) of a causal LM, explained by what it generates after them (a ``Continuation`` target).

    Padding is moved to the left of each prompt (right-padded prompts are re-packed, the tokens keeping
    their order), then each prompt is followed by its continuation (B, G): the rows explained are
    (B, L = L_p + G), the continuation at their end. Only prompt tokens are features. Hidden ones become
    ``mask_id`` ("replace"), a masked LM's proposal ("infill", with ``infill=``), or are deleted
    ("delete": the row is re-packed to the right behind a padding column, so the continuation keeps its
    place at the end while the prompt shortens). A model whose ``forward`` takes ``position_ids`` (Hugging
    Face causal LMs) gets them from the attention mask (``cumsum - 1``), so the tokens of left-padded and
    shortened prompts keep the positions they would have unpadded; other callables get ids and mask only.
    A sample that deletes every prompt token leaves the first continuation token no context: its score is
    the model's output at a padding position. The target (``target=``) is a ``Continuation`` (default
    ``Continuation()``): its ``token_ids`` (B, G), or G = ``max_new_tokens`` ids generated greedily;
    ``per_token`` gives T = 1 + G, else T = 1.

    Attributes:
        attention_mask: (B, L_p) 1 = token, 0 = padding (default all ones; None with text prompts).
        word_ids: (B or 1, L_p) word of every prompt token (-1: none); None: one feature per token.
        special_ids: ids never perturbed (BOS, ...); None with text prompts: the tokenizer's special ids
            but its unknown token's, as in ``explain_text``.
        mode: "replace", "delete" or "infill" (pass ``infill=``).
        mask_id: the id hidden prompt tokens become (needed by "replace" and "infill", not by "delete");
            None with ``tokenizer`` in "replace": its mask token, else its unknown, else its padding token.
        pad_id: the id of the padding column a "delete" row is re-packed behind.
        vocab_size: the model's vocabulary size (checks ``mask_id`` and the ids), as in ``Tokens``; None:
            the model's input-embedding size, else the width of the logits the continuation was generated
            from (when it was generated).
        model_inputs: "keywords" ``model(input_ids=, attention_mask=)``, "positional", "ids", or "auto":
            keywords when ``attention_mask`` is given (a Hugging Face causal LM's second positional
            argument is its cache, not the mask), ids alone otherwise.
        infill: the masked LM of ``mode="infill"``, as in ``Tokens``.
        tokenizer: optional: tokenizes text prompts (a str or a list of B str, padded to the longest, as
            ``explain_text`` tokenizes them), decodes the continuations (``info.continuation_text``)
            and names the tokens the views show (``convert_ids_to_tokens``).

    Example:
        >>> from torchlime.engine import Explainer
        >>> lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4
        >>> exp = Explainer().explain(lm, torch.tensor([[3, 5, 7]]), Generation(mask_id=0), n_samples=64,
        ...                           target=Continuation(max_new_tokens=2))
        >>> exp.coef.shape, exp.info.generated_ids  # (B, 1 + G, F); the G generated ids of every prompt
        (torch.Size([1, 3, 3]), [[5, 7]])
    """

    owns: ClassVar[frozenset[str]] = OWNED

    tokenizer: Optional[Tokenizer] = None

    def prepare(self, model: Model, inputs: object, how: Config, call: Call) -> GenerationPrepared:
        """Check the prompts, left-pad them, generate the continuation, hand over the rows as a token call.

        Args:
            model: the causal LM (called here ``max_new_tokens`` times when the continuation is generated).
            inputs: integer (B, L_p) prompt ids, or with ``tokenizer`` a str or a list of B str.
            how: the configuration.
            call: the call; its target a ``Continuation`` or unset.

        Returns:
            The ``Tokens`` hand-over of the (B, L_p + G) rows, with the target prepared on them.

        Raises:
            TypeError / ValueError: naming the argument, expected and got value.
        """
        refuse_owned("Generation", "`mode`", how, call)
        check_choice(self.mode, "mode", ("replace", "delete", "infill"))
        target = Continuation() if call.target is None or call.target is UNSET else call.target
        if not isinstance(target, Continuation):
            raise TypeError(f"`target` must be a torchlime.targets.Continuation or None, got {describe(target)}")
        check_choice(self.model_inputs, "model_inputs", MODEL_INPUTS)
        ids, attention_mask, special_ids = inputs, self.attention_mask, self.special_ids
        if is_text(ids):
            ids, attention_mask, special_ids = text_prompts(model, ids, self.tokenizer, attention_mask, special_ids)
        ids = check_tensor(from_numpy(ids), "input_ids")
        attention_mask = from_numpy(attention_mask)
        check_integer(ids, "input_ids")
        if ids.ndim != 2 or ids.shape[1] == 0:
            raise ValueError(f"`input_ids` must have shape (B, L) with L >= 1, got shape {tuple(ids.shape)}")
        how_inputs = self.model_inputs
        if how_inputs == "auto":
            how_inputs = "keywords" if attention_mask is not None else "ids"
        positions = takes_positions(model) and how_inputs != "positional"
        lm = WithPositions(model) if positions else model  # positions from the mask: padding moves no token
        how_inputs = "keywords" if positions else how_inputs
        target.check(ids.shape[0])
        g = target.n_tokens
        if isinstance(special_ids, Iterable) and not isinstance(special_ids, torch.Tensor):
            special_ids = tuple(special_ids)  # read by the plan and the token call both: an iterator only once
        plan = prompt_plan(ids, attention_mask, self.word_ids, special_ids, g, self.mode, self.pad_id)
        mask_id = self.mask_id
        if self.mode == "replace" and mask_id is None and self.tokenizer is not None:
            mask_id = default_mask_id(self.tokenizer)
        if self.mode != "delete" and mask_id is None:  # before the continuation is generated
            raise ValueError(f"mode={self.mode!r} needs `mask_id` (the id hidden prompt tokens take), got None")
        vocab_size = self.vocab_size
        if target.token_ids is None:
            rows, rows_attn, packed, width = greedy_rows(lm, plan, g, how_inputs)
            if vocab_size is None:  # checks mask_id before the batched pass: the embedding's size, else the logits'
                vocab_size = infer_vocab_size(lm) or width
            # (B, G) the continuation: a view of one prompt's row, a contiguous copy of several
            cont = rows[:, rows.shape[1] - g :].long().contiguous()
            known_range = in_range(plan, vocab_size, width)
        else:
            rows, rows_attn, packed = fresh_rows(plan)
            known_range = False  # the given continuation is read with the rows
            cont = target.token_ids.to(ids.device)
            rows[:, rows.shape[1] - g :] = cont
        tokens = RowTokens(
            rows_attn,
            None,
            special_ids,
            self.mode,
            mask_id,
            self.pad_id,
            vocab_size,
            how_inputs,
            self.infill,
            features=plan.features,
            packed=packed,
            in_range=known_range,
        )
        call = dataclasses.replace(call, target=target.prepared(cont, rows.shape[1] - g))  # one start: the rows' layout
        prepared = tokens.prepare(lm, rows, how, call)
        adapter = prepared.adapter
        if positions and adapter is not None:
            adapter = functools.partial(_positioned, adapter)
        fields = {f.name: getattr(prepared, f.name) for f in dataclasses.fields(prepared)}
        # the tokens of every row, known with the plan: the record need not read them
        tokens_info = (
            None if prepared.tokens is None else dataclasses.replace(prepared.tokens, lengths=list(plan.lengths))
        )
        fields.update(adapter=adapter, rows=rows, rows_attention=rows_attn, continuation=cont, tokens=tokens_info)
        return GenerationPrepared(**fields, per_token=target.per_token)

    def finish(self, explanation: Explanation, prepared: Prepared) -> Explanation:
        """The token explanation's completion, then the generation record that names prompt and continuation.

        The record keeps the continuation (B, G) ids, the rows explained and their attention mask (B, L),
        with a tokenizer the decoded continuations; ``meta`` renders it under "text_generation" (the token
        record nested in it, not beside it) and those four at its top level.

        Args:
            explanation: the engine's result over the (B, L) rows.
            prepared: the ``GenerationPrepared`` it came from.

        Returns:
            The explanation with its ``GenerationInfo``.
        """
        if not isinstance(prepared, GenerationPrepared) or prepared.rows is None or prepared.continuation is None:
            raise TypeError(f"`prepared` must come from Generation.prepare, got {describe(prepared)}")
        explanation, tokens = finish_tokens(explanation, prepared)
        rows, cont = prepared.rows, prepared.continuation
        record = generation_info(explanation, rows, cont.shape[1], prepared.per_token, self.tokenizer)
        text = None if self.tokenizer is None else list(self.tokenizer.batch_decode(cont.tolist()))
        record = dataclasses.replace(
            record,
            token_info=tokens,
            continuation=cont,
            input_ids=rows,
            attention_mask=prepared.rows_attention,
            continuation_text=text,
        )
        return dataclasses.replace(explanation, info=record)
