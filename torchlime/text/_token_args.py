"""The arguments of ``Tokens``: checks, special ids, the infiller, and the token feature map."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Optional, Union, cast

import torch

from torchlime._util.checks import check_choice, check_integer, check_tensor, describe
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, tensor_key
from torchlime.text.edits import pack
from torchlime.text.infill import Infiller
from torchlime.text.proximity import embedding_matrix
from torchlime.typing import Model

MODES = ("replace", "delete", "infill")
#: token ids never perturbed: None, one id, ids, or an integer tensor
SpecialIds = Union[None, int, Iterable[int], torch.Tensor]
#: what ``infill=`` accepts: an ``Infiller``, or a masked LM (wrapped with default settings)
InfillSpec = Union[None, Infiller, Model]


@dataclass(frozen=True)
class TokenArgs:
    """The token settings ``Tokens`` and ``Generation`` share, in this order (each modality describes them).

    Attributes:
        attention_mask: (B, L) 1 = token, 0 = padding.
        word_ids: (B or 1, L) word of every token (-1: none); None: one feature per token.
        special_ids: ids never perturbed.
        mode: "replace", "delete" or "infill".
        mask_id: the id hidden tokens become.
        pad_id: the padding id written by "delete".
        vocab_size: checks the ids.
        model_inputs: how the model takes ids and mask ("auto", "positional", "keywords", "ids").
        infill: the masked LM of "infill".
    """

    attention_mask: Optional[torch.Tensor] = None
    word_ids: Optional[torch.Tensor] = None
    special_ids: SpecialIds = None
    mode: str = "replace"
    mask_id: Optional[int] = None
    pad_id: int = 0
    vocab_size: Optional[int] = None
    model_inputs: str = "auto"
    infill: InfillSpec = None


def infer_vocab_size(model: object) -> Optional[int]:
    """Vocabulary size from the model's input embedding (None when it has none)."""
    m = embedding_matrix(model) if isinstance(model, torch.nn.Module) else None
    return None if m is None else int(m.shape[0])


def token_features(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, word_ids: Optional[torch.Tensor], special_ids: torch.Tensor
) -> torch.Tensor:
    """Long (B, L) feature ids: the token position, or its word id; -1 for special/padding.

    Args:
        input_ids: (B, L) token ids.
        attention_mask: (B, L) 1 for real tokens, 0 for padding.
        word_ids: (B or 1, L) word of each token (-1 = no word), or None: one feature per token.
        special_ids: long (k,) ids never perturbed.

    Returns:
        long (B, L) the feature of every token, -1 where it is never perturbed.
    """
    batch, length = input_ids.shape
    base = (
        torch.arange(length, device=input_ids.device).expand(batch, length)
        if word_ids is None
        else word_ids.long().expand(batch, length)
    )
    perturbable = (attention_mask != 0) & ~torch.isin(input_ids, special_ids) & (base >= 0)
    return torch.where(perturbable, base, -1)


def check_args(  # noqa: C901
    input_ids: object,
    attention_mask: object,
    word_ids: object,
    mode: object,
    mask_id: object,
    pad_id: object,
    vocab_size: Optional[int],
    in_range: bool = False,
) -> torch.Tensor:
    """Validate the token arguments; return the attention mask (given or all ones).

    ``in_range``: the caller knows every id to be in ``[0, vocab_size)`` (a generation call's rows: its
    prompt read once, its continuation an argmax over at most ``vocab_size`` logits), so they are not read.
    """
    ids = check_tensor(input_ids, "input_ids")
    check_integer(ids, "input_ids")
    if ids.ndim != 2:
        raise ValueError(f"`input_ids` must have shape (B, L), got shape {tuple(ids.shape)}")
    check_choice(mode, "mode", MODES)
    attn = check_tensor(torch.ones_like(ids) if attention_mask is None else attention_mask, "attention_mask")
    if tuple(attn.shape) != tuple(ids.shape):
        raise ValueError(
            f"`attention_mask` must have the shape of `input_ids` {tuple(ids.shape)}, got {tuple(attn.shape)}"
        )
    if attn.dtype.is_floating_point or attn.dtype.is_complex:
        raise TypeError(f"`attention_mask` must be bool or integer (0/1), got {attn.dtype}")
    if attn.device != ids.device:
        raise ValueError(f"`attention_mask` must be on `input_ids`' device ({ids.device}), got {attn.device}")
    if word_ids is not None:
        words = check_tensor(word_ids, "word_ids")
        check_integer(words, "word_ids")
        b, length = ids.shape
        if words.ndim != 2 or words.shape[0] not in (1, b) or words.shape[1] != length:
            raise ValueError(f"`word_ids` must have shape ({b}, {length}) or (1, {length}), got {tuple(words.shape)}")
    if mode != "delete" and mask_id is None:
        raise ValueError(
            f"mode={mode!r} needs `mask_id` (the id hidden tokens take, e.g. tokenizer.mask_token_id), got None"
        )
    for name, value in (("mask_id", mask_id), ("pad_id", pad_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"`{name}` must be an int token id, got {describe(value)}")
    if vocab_size is None or not ids.numel():
        return attn
    if not in_range:
        lo, hi = torch.stack(torch.aminmax(ids)).tolist()  # both read at once: one synchronisation
        if lo < 0 or hi >= vocab_size:
            bad = torch.unique(ids[(ids < 0) | (ids >= vocab_size)])[:10].tolist()
            raise ValueError(
                f"`input_ids` must be in [0, {vocab_size}) (the model's vocabulary size), "
                f"got ids {bad} (min {lo}, max {hi})"
            )
    for name, value in (("mask_id", mask_id), ("pad_id", pad_id)):
        if isinstance(value, int) and not 0 <= value < vocab_size:
            raise ValueError(f"`{name}` must be in [0, {vocab_size}) (the model's vocabulary size), got {value}")
    return attn


def as_id_tensor(ids: SpecialIds, device: torch.device) -> torch.Tensor:
    """Special ids as a long tensor (k,) on ``device``."""
    if ids is None:
        return torch.empty(0, dtype=torch.long, device=device)
    if isinstance(ids, torch.Tensor):
        check_integer(ids, "special_ids")
        return ids.reshape(-1).long().to(device)
    bad = TypeError(f"`special_ids` must be None, an int, ints or an integer tensor, got {describe(ids)}")
    if isinstance(ids, bool):
        raise bad
    listed = [ids] if isinstance(ids, int) else ids
    try:
        return torch.tensor([int(i) for i in listed], dtype=torch.long, device=device)
    except (TypeError, ValueError):
        raise bad from None


def resolve_infiller(infill: InfillSpec, mask_id: Optional[int], vocab_size: Optional[int]) -> Infiller:
    """An ``Infiller`` from the argument; checks the mask id against the MLM's vocabulary."""
    if infill is None:
        raise ValueError("mode='infill' needs `infill`: an Infiller or a masked language model, got None")
    infiller = infill if isinstance(infill, Infiller) else Infiller(infill)
    v = infiller.vocab_size()
    if v is not None and mask_id is not None and not 0 <= mask_id < v:
        raise ValueError(f"`mask_id` must be in [0, {v}) (the masked LM's vocabulary size), got {mask_id}")
    return infiller


#: what ``token_inputs`` made, by ids tensor (``stages.fixed_cost.ShapeCache``)
_MADE: ShapeCache[tuple[object, ...]] = ShapeCache()


def token_inputs(
    input_ids: object,
    attention_mask: object,
    word_ids: object,
    special_ids: SpecialIds,
    mode: object,
    mask_id: object,
    pad_id: object,
    vocab_size: Optional[int],
) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...], torch.Tensor, torch.Tensor]:
    """``check_args``, special ids, ``token_features`` and ``pack`` of the token arguments, kept for ids passed again.

    They depend only on the tensors' values and the settings: ids passed again (the same tensors,
    unchanged since; ``stages.fixed_cost.tensor_key``) with the same settings are neither checked again
    (they passed) nor read, and their features are the same tensor, whose relabelled map the engine
    keeps too.

    Returns:
        ``(attention_mask, special, special_list, features, packed)``: the mask (given or all ones), long
        (k,) the special ids, the same as host ints, long (B, L) ``token_features``, long (B, 2, L) the
        ids and mask packed (``edits.pack``). None of them is to be written.
    """
    tensors = [t for t in (input_ids, attention_mask, word_ids, special_ids) if isinstance(t, torch.Tensor)]
    keys = tuple(tensor_key(t) for t in tensors)
    key: Optional[tuple[object, ...]] = None
    if isinstance(input_ids, torch.Tensor) and all(k is not None for k in keys):
        try:  # settings of a wrong kind have no hash: checked (and refused) below, uncached
            spec = (
                special_ids
                if isinstance(special_ids, (int, torch.Tensor)) or special_ids is None
                else tuple(special_ids)
            )
            settings = (None if isinstance(spec, torch.Tensor) else spec, mode, mask_id, pad_id, vocab_size)
            key = (keys, tuple((type(v), v) for v in settings))  # 3.0 == 3, but only 3 is a token id
            hash(key)
        except TypeError:
            key = None
    owner = input_ids if not isinstance(input_ids, torch.Tensor) or input_ids._base is None else input_ids._base
    found = _MADE.find(owner, key) if key is not None else None
    if found is not None:
        return found[0], found[1], found[2], found[3], found[4]  # type: ignore[return-value]
    attn = check_args(input_ids, attention_mask, word_ids, mode, mask_id, pad_id, vocab_size)
    ids = input_ids if isinstance(input_ids, torch.Tensor) else check_tensor(input_ids, "input_ids")
    special = as_id_tensor(special_ids, ids.device)
    words = word_ids if isinstance(word_ids, torch.Tensor) else None  # check_args refused anything else
    made = (attn, special, tuple(special.tolist()), token_features(ids, attn, words, special), pack(ids, attn))
    if key is not None and ids.numel() <= CACHED_ELEMENTS:
        _MADE.put(owner, key, (*made, *tensors[1:]))  # the other tensors held: their memory serves no other
    return made


def known_inputs(
    input_ids: object,
    attention_mask: object,
    special_ids: SpecialIds,
    mode: object,
    mask_id: object,
    pad_id: object,
    vocab_size: Optional[int],
    known: tuple[torch.Tensor, Optional[torch.Tensor], bool],
) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...], torch.Tensor, torch.Tensor]:
    """``token_inputs`` of ids whose features the caller knows (a generation call's rows: its prompt fixes them).

    The arguments are checked as ``token_inputs`` checks them (one feature per token: no word ids);
    ``known`` holds what ``token_features`` and ``pack`` would make of them, returned as they are
    (``pack``'s made now where None), and nothing is kept.

    Args:
        input_ids: integer (B, L) token ids.
        attention_mask: (B, L) 1 = token, 0 = padding, or None.
        special_ids: ids never perturbed.
        mode: "replace", "delete" or "infill".
        mask_id: the id hidden tokens become.
        pad_id: the padding id written by "delete".
        vocab_size: checks the ids, or None.
        known: long (B, L) the token features, long (B, 2, L) the ids and mask packed (or None), and
            whether every id is known to be in ``[0, vocab_size)`` (``check_args``' ``in_range``).

    Returns:
        As ``token_inputs``: ``(attention_mask, special, special_list, features, packed)``.
    """
    features, packed, in_range = known
    attn = check_args(input_ids, attention_mask, None, mode, mask_id, pad_id, vocab_size, in_range)
    ids = cast(torch.Tensor, input_ids)  # check_args refused anything else
    special = as_id_tensor(special_ids, ids.device)
    return attn, special, tuple(special.tolist()), features, pack(ids, attn) if packed is None else packed
