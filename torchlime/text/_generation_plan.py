"""What a generation call's prompts and settings fix, made once per prompt; and the greedy loop in one buffer.

The prompts' checks, their left padding, the rows' template (a "delete" padding column, the prompt, room
for the continuation), the rows' attention mask and their token features depend only on the prompt
tensors (their values, known by ``stages.fixed_cost.tensor_key``), the special ids, the mode, the padding
id and G: prompts passed again unchanged reuse them (``prompt_plan``), and the
feature map that is the same tensor again is not relabelled again either (``stages.features``). The
continuation, which the model decides, is generated in every call (``greedy_rows``): into a copy of the
template, one argmax per token written in place, so the rows explained need no concatenation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional

import torch

from torchlime._util.checks import check_integer, check_tensor, describe, from_numpy
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, tensor_key
from torchlime.stages.forward.model import eval_mode
from torchlime.targets.base import tensor_output
from torchlime.text._token_args import SpecialIds, as_id_tensor
from torchlime.text._tokens import Tokens
from torchlime.text.edits import call_token_model


class PromptPlan(NamedTuple):
    """The rows of a generation call but the continuation's ids (none of them is to be written).

    Attributes:
        ids: (B, L_p) the left-padded prompts.
        attn: (B, L_p) their attention mask.
        rows: (B, L) the rows' template, the prompts' dtype: in "delete" a ``pad_id`` column, then the
            prompt, then G zeros where the continuation goes (``L = lead + L_p + G``).
        rows_attention: (B, L) the rows' attention mask: 0 on the padding column, the prompt's, then ones.
        features: long (B, L) the rows' token features (``token_features``; -1 off the prompt's tokens).
        packed: long (1, 2, L) ``rows`` and ``rows_attention`` packed (``edits.pack``) for one prompt
            when both are long, else None.
        lead: 1 in "delete" (the padding column), else 0.
        lengths: the tokens of every row (its attention mask's sum), host ints.
        id_range: the least and the largest id of the prompts and the padding column, host ints.
    """

    ids: torch.Tensor
    attn: torch.Tensor
    rows: torch.Tensor
    rows_attention: torch.Tensor
    features: torch.Tensor
    packed: Optional[torch.Tensor]
    lead: int
    lengths: tuple[int, ...]
    id_range: tuple[int, int]


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


def _checked(
    ids: torch.Tensor, attention_mask: Optional[torch.Tensor], word_ids: Optional[torch.Tensor]
) -> Optional[torch.Tensor]:
    """Check the prompts' attention mask and word ids (B, L_p) on the host; return the word ids, long, or None.

    Raises:
        ValueError / TypeError: naming the argument, expected and got value.
    """
    batch, length = ids.shape
    if attention_mask is not None:
        check_tensor(attention_mask, "attention_mask")
        if tuple(attention_mask.shape) != (batch, length):
            raise ValueError(f"`attention_mask` must have shape {(batch, length)}, got {tuple(attention_mask.shape)}")
    if word_ids is None:
        return None
    check_tensor(word_ids, "word_ids")
    check_integer(word_ids, "word_ids")
    if word_ids.ndim != 2 or word_ids.shape[0] not in (1, batch) or word_ids.shape[1] != length:
        raise ValueError(
            f"`word_ids` must have shape ({batch}, {length}) or (1, {length}), got {tuple(word_ids.shape)}"
        )
    return word_ids.long().to(ids.device)


def _features(
    ids: torch.Tensor, present: Optional[torch.Tensor], base: torch.Tensor, positions: bool, special: torch.Tensor
) -> torch.Tensor:
    """``token_features`` of the left-padded prompts, leaving out the terms known on the host to be all True.

    Args:
        ids: (B, L_p) the prompts.
        present: bool (B, L_p) their tokens, or None (every position is one).
        base: long (B, L_p) every token's word (its position where no words are given).
        positions: ``base`` holds positions (never negative).
        special: long (k,) the special ids (none: no token is special).

    Returns:
        Long (B, L_p) the feature of every prompt token, -1 where it is never perturbed: the same values.
    """
    keep = present
    for term in (~torch.isin(ids, special) if special.numel() else None, None if positions else base >= 0):
        if term is not None:
            keep = term if keep is None else keep & term
    return base if keep is None else torch.where(keep, base, -1)


def _make_plan(
    ids: torch.Tensor,
    attention_mask: Optional[torch.Tensor],
    word_ids: Optional[torch.Tensor],
    special: torch.Tensor,
    g: int,
    mode: str,
    pad_id: int,
) -> PromptPlan:
    """The plan of ``prompt_plan``, made now.

    Without an attention mask nothing moves and every row holds L_p tokens: no padding to move, no mask to
    read. With one, its padding moves to the left (``left_pad``'s order; the positions it moves are that
    order itself).
    """
    words = _checked(ids, attention_mask, word_ids)
    batch, length, lead, pad = ids.shape[0], ids.shape[1], int(mode == "delete"), torch.nn.functional.pad
    present: Optional[torch.Tensor] = None
    if attention_mask is None:
        base = torch.arange(length, device=ids.device).expand(batch, length) if words is None else words
        rows_attention = torch.ones((batch, lead + length + g), dtype=ids.dtype, device=ids.device)
    else:
        order = torch.argsort((attention_mask != 0).to(torch.uint8), dim=1, stable=True)
        ids, attn = ids.gather(1, order), attention_mask.gather(1, order)
        base = order if words is None else words.expand_as(ids).gather(1, order)
        present = attn != 0
        rows_attention = pad(attn, (lead, g), value=1)
    if lead:  # the padding column a deleted row re-packs behind
        rows_attention[:, 0] = 0
    rows = pad(ids, (lead, g), value=0)
    if lead:
        rows[:, 0] = pad_id
    prompt_features = _features(ids, present, base, words is None, special)
    features = pad(prompt_features, (lead, g), value=-1)  # continuation and padding column: -1
    # one prompt: its rows and mask as views of one packed copy are contiguous still (several would not be)
    one = batch == 1 and rows.dtype == rows_attention.dtype == torch.long
    packed = torch.stack([rows, rows_attention], dim=1) if one else None
    # one read: the tokens of every row (known without a mask), whether each prompt has one (a left-padded
    # prompt's last position), and the prompts' least and largest id
    read = [] if present is None else [rows_attention.sum(-1), present[:, -1]]
    if ids.numel():
        read += [t.view(1) for t in torch.aminmax(ids)]
    got = torch.cat(read).tolist() if read else []
    if present is None:
        lengths, got = [length + g] * batch, got
    else:
        lengths, has, got = got[:batch], got[batch : 2 * batch], got[2 * batch :]
        if not all(has):
            raise ValueError("`attention_mask` must mark at least one token in every prompt, got an empty prompt")
    lo, hi = got if got else (0, -1)
    if lead:  # the padding column's id is read with the rows
        lo, hi = min(lo, pad_id), max(hi, pad_id)
    attn_view = rows_attention[:, lead : lead + length]
    return PromptPlan(ids, attn_view, rows, rows_attention, features, packed, lead, tuple(lengths), (lo, hi))


def in_range(plan: PromptPlan, vocab_size: Optional[int], width: int) -> bool:
    """Whether the rows of ``plan``, continued by an argmax over ``width`` logits, hold ids in ``[0, vocab_size)``.

    The prompts' range is the plan's (read once); every argmax is below ``width``.

    Args:
        plan: the call's ``PromptPlan``.
        vocab_size: the vocabulary the ids are checked against, or None (nothing to check).
        width: V, the width of the logits the continuation's argmax ran over.
    """
    lo, hi = plan.id_range
    return vocab_size is not None and lo >= 0 and hi < vocab_size and width <= vocab_size


def fresh_rows(plan: PromptPlan) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """New rows and attention mask (B, L) from the plan's templates, to write the continuation into.

    Args:
        plan: the call's ``PromptPlan``.

    Returns:
        ``(rows, rows_attention, packed)``: with the plan's ``packed``, one copy of it (1, 2, L) and
        the two as its views (one operator; contiguous, as one row is); else two copies, and None.
    """
    if plan.packed is None:
        return plan.rows.clone(), plan.rows_attention.clone(), None
    packed = plan.packed.clone()
    return packed[:, 0], packed[:, 1], packed


#: the plans of the last prompts, by prompt tensor (``stages.fixed_cost.ShapeCache``)
_PLANS: ShapeCache[tuple[object, ...]] = ShapeCache()


def prompt_plan(
    ids: torch.Tensor,
    attention_mask: object,
    word_ids: object,
    special_ids: SpecialIds,
    g: int,
    mode: str,
    pad_id: int,
) -> PromptPlan:
    """Check the prompts, left-pad them and lay out the rows of a call that continues each by G tokens.

    Made once for prompts passed again (the same tensors, unchanged since; ``stages.fixed_cost.tensor_key``)
    with the same settings: they are not checked again (they passed) nor read, and the rows' features are
    the same tensor (their relabelled map is kept too). The result equals the one made afresh, bit for bit.

    Args:
        ids: integer (B, L_p) the prompts, checked.
        attention_mask: (B, L_p) 1 = token, 0 = padding, or None (all ones).
        word_ids: (B or 1, L_p) word of every prompt token, or None (one feature per token).
        special_ids: ids never perturbed.
        g: G, the continuation's length.
        mode: "replace", "delete" or "infill" ("delete" lays a padding column first).
        pad_id: the id of that column.

    Returns:
        The ``PromptPlan``; none of its tensors is to be written.

    Raises:
        ValueError / TypeError: naming the argument, expected and got value.
    """
    # only tensors (or None) are known by their key: an array's memory may be written without torch seeing it
    plain = all(t is None or isinstance(t, torch.Tensor) for t in (attention_mask, word_ids))
    mask, words = from_numpy(attention_mask), from_numpy(word_ids)
    tensors = [t for t in (ids, mask, words, special_ids) if isinstance(t, torch.Tensor)]
    keys = tuple(tensor_key(t) for t in tensors)
    key: Optional[tuple[object, ...]] = None
    small = ids.shape[0] * (ids.shape[1] + g + 1) <= CACHED_ELEMENTS  # the rows' templates the plan holds
    if plain and small and all(k is not None for k in keys):
        try:  # special ids of a wrong kind have no hash: refused below, uncached
            spec = (
                None
                if special_ids is None or isinstance(special_ids, torch.Tensor)
                else special_ids
                if isinstance(special_ids, int)
                else tuple(special_ids)
            )
            settings = (spec, g, mode, pad_id)
            key = (keys, mask is None, words is None, tuple((type(v), v) for v in settings))
            hash(key)
        except TypeError:
            key = None
    owner = ids if ids._base is None else ids._base
    found = _PLANS.find(owner, key) if key is not None else None
    if found is not None:
        return found[0]  # type: ignore[return-value]
    special = as_id_tensor(special_ids, ids.device)
    plan = _make_plan(ids, mask, words, special, g, mode, pad_id)
    if key is not None:
        _PLANS.put(owner, key, (plan, *plan[:6], *tensors[1:]))  # the given tensors held: their memory serves no other
    return plan


def greedy_rows(
    model: Callable[..., object], plan: PromptPlan, max_new_tokens: int, how: str = "keywords"
) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor], int]:
    """The rows of ``plan`` with ``max_new_tokens`` tokens generated greedily after every prompt, all at once.

    Each step calls the model once on the whole batch (B, L_p + g) and writes the argmax of the last
    position's logits into the rows; no cache, no stopping at an end-of-sequence id. The model sees the
    rows up to the new token (contiguous: a view for one prompt, a copy for several).

    Args:
        model: causal LM returning logits (B, L, V) or an object with ``.logits``.
        plan: the call's ``PromptPlan`` (G = ``max_new_tokens`` columns of room).
        max_new_tokens: G >= 1.
        how: how the model takes its inputs ("keywords", "positional", "ids": see ``call_token_model``).

    Returns:
        ``(rows, rows_attention, packed, V)``: (B, L) the rows with their continuation and their mask
        (``fresh_rows``: the plan's dtypes; views of ``packed`` (B, 2, L) where the plan packs them,
        else None), and the width V of the model's logits.

    Raises:
        ValueError: the model returns no (B, L, V) logits.
    """
    rows, attn, packed = fresh_rows(plan)
    first = plan.lead + plan.ids.shape[1]
    width = 0
    with torch.inference_mode(), eval_mode(model):
        for at in range(first, first + max_new_tokens):
            ids, mask = rows[:, plan.lead : at], attn[:, plan.lead : at]
            if not ids.is_contiguous():  # several prompts: the model gets contiguous rows, as a new tensor
                ids, mask = ids.contiguous(), mask.contiguous()
            logits = tensor_output(call_token_model(model, ids, mask, how), "explain_generation", ("logits",))
            if logits.ndim != 3:
                raise ValueError(f"`model` must return next-token logits (B, L, V), got {describe(logits)}")
            width = logits.shape[-1]
            if rows.dtype == torch.long:  # argmax's own dtype: written straight into the rows
                torch.argmax(logits[:, -1], -1, out=rows[:, at])
            else:
                rows[:, at] = logits[:, -1].argmax(-1)
    return rows, attn, packed, width


@dataclass(frozen=True)
class RowTokens(Tokens):
    """``Tokens`` of a generation call's rows, whose token features its ``PromptPlan`` holds already.

    Attributes:
        features: long (B, L) the rows' token features (the plan's: the same tensor for prompts passed
            again, so that their relabelled map is kept too).
        packed: long (B, 2, L) the rows and their mask packed already (``fresh_rows``), or None.
        in_range: every id is known to be in ``[0, vocab_size)`` (``in_range``): they are not read.
    """

    features: Optional[torch.Tensor] = None
    packed: Optional[torch.Tensor] = None
    in_range: bool = False

    def _known(self) -> Optional[tuple[torch.Tensor, Optional[torch.Tensor], bool]]:
        """The plan's features, the packed rows and whether the ids are known in range (else None)."""
        return None if self.features is None else (self.features, self.packed, self.in_range)
