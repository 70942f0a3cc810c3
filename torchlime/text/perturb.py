"""Token perturbations for ``explain_tokens``: replace, delete, and the chunk plumbing.

``explain_tokens`` hands the engine a *packed* input: ``(B, 2, L)`` integer
tensor whose channel 0 holds the token ids and channel 1 the attention mask.
Every chunk of perturbed rows is built from it with integer tensor work only
(gathers, ``where``, one stable sort for deletion): no Python loop over samples
or tokens. ``TokenModel`` unpacks the chunk again and calls the user's model
with ``(input_ids, attention_mask)`` positionally, as keywords, or ids alone.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import torch
from torch import nn

from .._checks import check_choice

MODEL_INPUTS = ("auto", "positional", "keywords", "ids")

#: Tokens per chunk of perturbed rows when the caller gives no ``batch_size``:
#: rows = budget // L. Bounds activation memory whatever N is (lime scores all
#: N strings in one call).
TOKENS_PER_CHUNK = {"cpu": 1 << 14, "cuda": 1 << 16}


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Stack ids (c, L) and mask (c, L) into one long (c, 2, L) tensor."""
    return torch.stack([input_ids.long(), attention_mask.long()], dim=1)


def call_token_model(model: Callable[..., Any], input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     how: str) -> Any:
    """Call ``model`` on token ids (c, L) and an attention mask (c, L).

    Args:
        how: "positional" -> ``model(ids, mask)``; "keywords" ->
            ``model(input_ids=ids, attention_mask=mask)``; "ids" -> ``model(ids)``.
    """
    if how == "keywords":
        return model(input_ids=input_ids, attention_mask=attention_mask)
    if how == "ids":
        return model(input_ids)
    return model(input_ids, attention_mask)


class TokenModel(nn.Module):
    """Adapts a token model to the engine: takes a packed (c, 2, L) tensor.

    Args:
        model: the user's classifier (module or callable) returning logits,
            probabilities, or an object with ``.logits``.
        how: one of "positional", "keywords", "ids" (see ``call_token_model``).
        mask_dtype: dtype the attention mask is handed over in (the caller's own).
    """

    def __init__(self, model: Callable[..., Any], how: str, mask_dtype: torch.dtype = torch.long) -> None:
        super().__init__()
        self.model = model
        self.how = how
        self.mask_dtype = mask_dtype

    def forward(self, packed: torch.Tensor) -> Any:
        return call_token_model(self.model, packed[:, 0], packed[:, 1].to(self.mask_dtype), self.how)


class Chunk(NamedTuple):
    """Rows ``start:stop`` of the flattened (B·S) batch, unpacked."""

    rows: torch.Tensor  # long (c,): explained input of each row
    ids: torch.Tensor  # long (c, L): original token ids of that input
    attn: torch.Tensor  # long (c, L): original attention mask
    keep: torch.Tensor  # bool (c, L): token kept by the row's mask (fixed tokens always True)


def chunk_view(inputs: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor, start: int,
               stop: int) -> Chunk:
    """Expand masks (B, S, F') through token labels for rows ``start:stop``.

    Args:
        inputs: long (B, 2, L) packed ids and mask.
        labels: long (B, 1, L) feature of every token (fixed tokens point at an
            always-True column, as the engine hands them to ``perturb_fn``).
        masks: bool (B, S, F').
    """
    n_samples = masks.shape[1]
    rows = torch.arange(start, stop, device=inputs.device) // n_samples
    flat = masks.reshape(-1, masks.shape[-1])[start:stop]
    lab = labels.reshape(labels.shape[0], -1)[rows]
    keep = flat.gather(1, lab)
    return Chunk(rows, inputs[rows, 0], inputs[rows, 1], keep)


def replace_tokens(ids: torch.Tensor, keep: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Hidden tokens become ``mask_id``; shape (c, L) kept, attention mask unchanged."""
    return torch.where(keep, ids, torch.full_like(ids, mask_id))


def delete_tokens(ids: torch.Tensor, attn: torch.Tensor, keep: torch.Tensor,
                  pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop hidden tokens and re-pad every row to the left-aligned form.

    The surviving tokens (kept and attended) move to the front in their original
    order (a stable sort on "dropped"), the tail becomes ``pad_id`` with mask 0.

    Args:
        ids, attn: (c, L) token ids and attention mask. keep: bool (c, L).

    Returns:
        ``(ids, attention_mask)``, both (c, L) in the input dtypes.

    Example:
        >>> ids = torch.tensor([[5, 6, 7, 0]]); attn = torch.tensor([[1, 1, 1, 0]])
        >>> delete_tokens(ids, attn, torch.tensor([[True, False, True, True]]), 0)[0].tolist()
        [[5, 7, 0, 0]]
    """
    present = keep & (attn != 0)
    order = torch.argsort((~present).to(torch.uint8), dim=1, stable=True)
    present = present.gather(1, order)
    out = ids.gather(1, order).masked_fill(~present, pad_id)
    return out, present.to(attn.dtype)


def default_text_batch_size(seq_len: int, device: torch.device, n_rows: int) -> int:
    """Rows per model call: a fixed token budget divided by the sequence length."""
    budget = TOKENS_PER_CHUNK["cuda" if device.type == "cuda" else "cpu"]
    return max(1, min(n_rows, budget // max(seq_len, 1)))


def resolve_model_inputs(model_inputs: str, has_mask: bool) -> str:
    """Turn "auto" into "positional" (a mask was given) or "ids" (none was)."""
    check_choice(model_inputs, "model_inputs", MODEL_INPUTS)
    if model_inputs == "auto":
        return "positional" if has_mask else "ids"
    return model_inputs


def make_perturb_fn(mode: str, mask_id: Optional[int], pad_id: int,
                    fill: Optional[Callable[[Chunk, int, int], torch.Tensor]] = None,
                    record: Optional[Callable[[torch.Tensor, torch.Tensor, Chunk, int, int], None]] = None,
                    ) -> Callable[..., torch.Tensor]:
    """The engine's ``perturb_fn`` for a text mode.

    Args:
        mode: "replace", "delete" or "infill".
        fill: for "infill": ``fill(chunk, start, stop)`` returns the new ids (c, L).
        record: optional ``record(ids, attn, chunk, start, stop)`` called with every
            perturbed chunk (the hybrid kernel stores its weights this way).

    Returns:
        ``perturb_fn(inputs, baseline, labels, masks, start, stop) -> (c, 2, L)``.
    """

    def perturb(inputs: torch.Tensor, baseline: torch.Tensor, labels: torch.Tensor,
                masks: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        ch = chunk_view(inputs, labels, masks, start, stop)
        attn = ch.attn
        if mode == "replace":
            ids = replace_tokens(ch.ids, ch.keep, int(mask_id))  # type: ignore[arg-type]
        elif mode == "delete":
            ids, attn = delete_tokens(ch.ids, ch.attn, ch.keep, pad_id)
        else:
            ids = fill(ch, start, stop)  # type: ignore[misc]
        if record is not None:
            record(ids, attn, ch, start, stop)
        return pack(ids, attn)

    return perturb
