"""``explain_generation``: LIME for the text a causal language model generates.

The prompt's tokens are the features; the target is the teacher-forced log-probability of a continuation
(``torchlime.targets.Continuation``): the whole continuation's and each of its tokens'. The continuation is
given, or generated greedily once for the B unperturbed prompts (one batched model call per new token, no
``model.generate``: any causal LM callable works). Each prompt, left-padded, is followed by its
continuation; ``explain_tokens`` then explains these (B, L) rows in replace mode, the continuation's
positions never perturbed, so that every position keeps its place. Prompts given as text are tokenized as
``explain_text`` tokenizes them (``_tokenized.tokenize``); the explanation's ``GenerationInfo`` names the
prompt's features and the continuation's tokens for the views (``_generated``).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Iterable, Optional, Sequence, Union, cast

import torch

from torchlime._checks import check_choice, check_integer, check_tensor, describe, from_numpy
from torchlime.engine import documented
from torchlime.engine.explanation import Explanation
from torchlime.stages.forward.model import eval_mode
from torchlime.targets._base import tensor_output
from torchlime.targets.continuation import Continuation
from torchlime.text._explain import explain_tokens
from torchlime.text._generated import with_record
from torchlime.text._prompts import Tokenizer, generation_info, is_text, text_prompts
from torchlime.text._token_args import InfillSpec, infer_vocab_size
from torchlime.text._tokenized import default_mask_id
from torchlime.text.edits import MODEL_INPUTS, call_token_model
from torchlime.typing import (
    UNSET,
    AccelerateMode,
    BatchSize,
    KernelSpec,
    MemorySpec,
    NSamples,
    PresetName,
    SamplerSpec,
    SurrogateSpec,
    Unset,
)


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


def left_pad(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, word_ids: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """Move every row's padding to its left, the tokens keeping their order (left-padded rows are unchanged).

    Args:
        input_ids: (B, L) token ids.
        attention_mask: (B, L) 1 for tokens, 0 for padding.
        word_ids: (B or 1, L) word of every token, or None.

    Returns:
        ``(input_ids, attention_mask, word_ids)`` (B, L), re-ordered alike.

    Example:
        >>> left_pad(torch.tensor([[5, 6, 0]]), torch.tensor([[1, 1, 0]]))[0].tolist()
        [[0, 5, 6]]
    """
    order = torch.argsort((attention_mask != 0).to(torch.uint8), dim=1, stable=True)
    if word_ids is not None:
        word_ids = word_ids.expand_as(input_ids).gather(1, order)
    return input_ids.gather(1, order), attention_mask.gather(1, order), word_ids


def greedy_continuation(
    model: Callable[..., object],
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    max_new_tokens: int,
    how: str = "keywords",
) -> tuple[torch.Tensor, int]:
    """Generate ``max_new_tokens`` tokens greedily for B left-padded prompts, all at once.

    Each step calls the model once on the whole batch (B, L + g) and appends the argmax of the last
    position's logits; no cache, no stopping at an end-of-sequence id.

    Args:
        model: causal LM returning logits (B, L, V) or an object with ``.logits``.
        input_ids: (B, L) left-padded prompts.
        attention_mask: (B, L) their attention mask.
        max_new_tokens: G >= 1.
        how: how the model takes its inputs ("keywords", "positional", "ids": see ``call_token_model``).

    Returns:
        ``(ids, V)``: long (B, G) the generated ids, and the width V of the model's logits.

    Raises:
        ValueError: the model returns no (B, L, V) logits.
    """
    ids, attn = input_ids, attention_mask
    ones = torch.ones(ids.shape[0], 1, dtype=attn.dtype, device=attn.device)
    new, width = [], 0
    with torch.inference_mode(), eval_mode(model):
        for _ in range(max_new_tokens):
            logits = tensor_output(call_token_model(model, ids, attn, how), "explain_generation", ("logits",))
            if logits.ndim != 3:
                raise ValueError(f"`model` must return next-token logits (B, L, V), got {describe(logits)}")
            width = logits.shape[-1]
            nxt = logits[:, -1].argmax(-1).to(ids.dtype).unsqueeze(1)
            new.append(nxt)
            ids, attn = torch.cat([ids, nxt], 1), torch.cat([attn, ones], 1)
    return torch.cat(new, 1).long(), width


@documented
def explain_generation(  # noqa: D417 (the engine's keywords: ``documented``)
    model: Callable[..., object],
    input_ids: Union[torch.Tensor, str, Sequence[str]],
    *,
    attention_mask: Optional[torch.Tensor] = None,
    target: Optional[Continuation] = None,
    special_ids: Union[None, int, Iterable[int], torch.Tensor] = None,
    mask_id: Optional[int] = None,
    word_ids: Optional[torch.Tensor] = None,
    mode: str = "replace",
    model_inputs: str = "auto",
    tokenizer: Optional[Tokenizer] = None,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Union[None, int, torch.Generator] = None,
    pad_id: int = 0,
    vocab_size: Optional[int] = None,
    infill: InfillSpec = None,
    index: Optional[torch.Tensor] = None,
    return_samples: bool = False,
    masks: Optional[torch.Tensor] = None,
    sampler: Union[SamplerSpec, Unset] = UNSET,
    kernel: Union[KernelSpec, Unset] = UNSET,
    surrogate: Union[SurrogateSpec, Unset] = UNSET,
    preset: Optional[PresetName] = None,
    accelerate: Optional[AccelerateMode] = None,
    max_memory: MemorySpec = None,
    batch_size: BatchSize = None,
    progress: bool = False,
) -> Explanation:
    """Explain what a causal LM generates after B prompts, with LIME over the prompts' tokens or words.

    Padding is moved to the left of each prompt (right-padded prompts are re-packed, the tokens keeping
    their order), then each prompt is followed by its continuation (B, G): the rows explained are
    (B, L = L_p + G), with the continuation at their end. Only prompt tokens are features. Hidden ones
    become ``mask_id`` ("replace"), a masked LM's proposal ("infill", with ``infill=`` as in
    ``explain_tokens``), or are deleted ("delete"): the row is re-packed to the right behind a padding
    column, so the continuation keeps its place at the end while the prompt shortens. A model whose
    ``forward`` takes ``position_ids`` (Hugging Face causal LMs) gets them from the attention mask
    (``cumsum - 1``), so the tokens of left-padded and shortened prompts keep the positions they would
    have unpadded; other callables get ids and mask only. A sample that deletes every prompt token leaves
    the first continuation token no context: its score is the model's output at a padding position.

    Args:
        model: causal LM taking ids (c, L) and a mask (see ``model_inputs``), returning logits (c, L, V)
            or an object with ``.logits`` (a Hugging Face ``*ForCausalLM``).
        input_ids: integer (B, L_p) prompts, or text: a str or a list of B str with ``tokenizer``, which
            tokenizes them as ``explain_text`` does (padded to the longest, its mask the attention mask).
        attention_mask: (B, L_p) 1 = token, 0 = padding (default all ones; None with text prompts).
        target: a ``Continuation`` (default ``Continuation()``): its ``token_ids`` (B, G), or G =
            ``max_new_tokens`` ids generated greedily; ``per_token`` gives T = 1 + G, else T = 1.
        special_ids: ids never perturbed (BOS, ...); None with text prompts: the tokenizer's special ids
            but its unknown token's, as in ``explain_text``.
        mask_id: the id hidden prompt tokens become (needed by "replace" and "infill", not by "delete");
            None with ``tokenizer`` in "replace": its mask token, else its unknown, else its padding token.
        word_ids: (B or 1, L_p) word of every prompt token (-1: none); None: one feature per token.
        mode: "replace", "delete" or "infill" (pass ``infill=``).
        model_inputs: "keywords" ``model(input_ids=, attention_mask=)``, "positional", "ids", or "auto":
            keywords when ``attention_mask`` is given (a Hugging Face causal LM's second positional
            argument is its cache, not the mask), ids alone otherwise.
        tokenizer: optional: tokenizes text prompts, decodes the continuations into
            ``meta["continuation_text"]`` and names the tokens the views show (``convert_ids_to_tokens``).
        n_samples: S, as in ``explain``.
        generator: seed or ``torch.Generator`` of the masks.
        pad_id: the id of the padding column a "delete" row is re-packed behind.
        vocab_size: the model's vocabulary size (checks ``mask_id`` and the ids), as in ``explain_tokens``;
            None: the model's input-embedding size, else the width of the logits the continuation was
            generated from (when it was generated).
        infill: the masked LM of ``mode="infill"``, as in ``explain_tokens``.

    Returns:
        ``Explanation`` over the (B, L) rows: coef (B, T, F), features (B, L) (-1 on padding, special
        ids and the continuation), with ``return_samples`` outputs (B, S, T) log-probabilities; meta
        "continuation" (B, G) ids, "input_ids" / "attention_mask" (B, L) the rows explained. ``info``
        is a ``GenerationInfo`` (``meta["text_generation"]``): the prompt's features named by their tokens
        (``prompt_tokens``) and the generated tokens (``generated_tokens``), which
        ``torchlime.text.viz.explanation_html(exp, index)`` and the notebook display show.

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.

    Example:
        >>> lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4
        >>> exp = explain_generation(lm, torch.tensor([[3, 5, 7]]), mask_id=0, n_samples=64,
        ...                          target=Continuation(max_new_tokens=2))
        >>> exp.coef.shape, exp.meta["continuation"].shape          # (B, 1 + G, F), (B, G)
        (torch.Size([1, 3, 3]), torch.Size([1, 2]))
    """
    check_choice(mode, "mode", ("replace", "delete", "infill"))
    if target is None:
        target = Continuation()
    if not isinstance(target, Continuation):
        raise TypeError(f"`target` must be a torchlime.targets.Continuation or None, got {describe(target)}")
    check_choice(model_inputs, "model_inputs", MODEL_INPUTS)
    if is_text(input_ids):
        input_ids, attention_mask, special_ids = text_prompts(model, input_ids, tokenizer, attention_mask, special_ids)
    input_ids = check_tensor(from_numpy(input_ids), "input_ids")
    attention_mask, word_ids = from_numpy(attention_mask), from_numpy(word_ids)
    check_integer(input_ids, "input_ids")
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"`input_ids` must have shape (B, L) with L >= 1, got shape {tuple(input_ids.shape)}")
    how = model_inputs if model_inputs != "auto" else ("keywords" if attention_mask is not None else "ids")
    if takes_positions(model) and how in ("keywords", "auto", "ids"):
        model, how = WithPositions(model), "keywords"  # positions from the mask: padding moves no token
    batch, length = input_ids.shape
    dev = input_ids.device
    attn = torch.ones_like(input_ids) if attention_mask is None else attention_mask
    check_tensor(attn, "attention_mask")
    if tuple(attn.shape) != (batch, length):
        raise ValueError(f"`attention_mask` must have shape {(batch, length)}, got {tuple(attn.shape)}")
    if batch and bool((attn == 0).all(1).any()):
        raise ValueError("`attention_mask` must mark at least one token in every prompt, got an empty prompt")
    target.check(batch)
    if mode == "replace" and mask_id is None and tokenizer is not None:
        mask_id = default_mask_id(tokenizer)
    if mode != "delete" and mask_id is None:  # before the continuation is generated
        raise ValueError(f"mode={mode!r} needs `mask_id` (the id hidden prompt tokens take), got None")
    if word_ids is None:
        word_ids = torch.arange(length, device=dev).expand(batch, length)
    else:
        check_tensor(word_ids, "word_ids")
        check_integer(word_ids, "word_ids")
        if word_ids.ndim != 2 or word_ids.shape[0] not in (1, batch) or word_ids.shape[1] != length:
            raise ValueError(
                f"`word_ids` must have shape ({batch}, {length}) or (1, {length}), got {tuple(word_ids.shape)}"
            )
    ids, attn, moved = left_pad(input_ids, attn, word_ids.long().to(dev))
    wids = cast(torch.Tensor, moved)  # given, so moved
    if target.token_ids is None:
        cont, width = greedy_continuation(model, ids, attn, target.max_new_tokens, how)
        if vocab_size is None:  # checks mask_id before the batched pass: the embedding's size, else the logits'
            vocab_size = infer_vocab_size(model) or width
    else:
        cont = target.token_ids.to(dev)
    g = cont.shape[1]
    rows = torch.cat([ids, cont.to(ids.dtype)], 1)
    rows_attn = torch.cat([attn, torch.ones(batch, g, dtype=attn.dtype, device=dev)], 1)
    rows_words = torch.cat([wids, torch.full((batch, g), -1, dtype=torch.long, device=dev)], 1)  # never perturbed
    if mode == "delete":  # a leading padding column: deleted rows re-pack to the right, the continuation stays last
        rows = torch.cat([torch.full((batch, 1), pad_id, dtype=rows.dtype, device=dev), rows], 1)
        rows_attn = torch.cat([torch.zeros(batch, 1, dtype=rows_attn.dtype, device=dev), rows_attn], 1)
        rows_words = torch.cat([torch.full((batch, 1), -1, dtype=torch.long, device=dev), rows_words], 1)
    start = torch.full((batch,), rows.shape[1] - g, dtype=torch.long, device=dev)
    exp = explain_tokens(
        model,
        rows,
        attention_mask=rows_attn,
        word_ids=rows_words,
        special_ids=special_ids,
        mode=mode,
        mask_id=mask_id,
        model_inputs=how,
        target=target.prepared(cont, start),
        n_samples=n_samples,
        generator=generator,
        pad_id=pad_id,
        vocab_size=vocab_size,
        infill=infill,
        index=index,
        return_samples=return_samples,
        masks=masks,
        sampler=sampler,
        kernel=kernel,
        surrogate=surrogate,
        preset=preset,
        accelerate=accelerate,
        max_memory=max_memory,
        batch_size=batch_size,
        progress=progress,
    )
    meta = dict(exp.meta, continuation=cont, input_ids=rows, attention_mask=rows_attn)
    if tokenizer is not None:
        meta["continuation_text"] = list(tokenizer.batch_decode(cont.tolist()))
    exp = dataclasses.replace(exp, meta=meta)
    return with_record(exp, generation_info(exp, rows, g, target.per_token, tokenizer))
