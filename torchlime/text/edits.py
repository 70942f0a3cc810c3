"""Token perturbations for ``explain_tokens``: replace, delete, and the chunk plumbing.

``explain_tokens`` hands the engine a *packed* input: ``(B, 2, L)`` integer
tensor whose channel 0 holds the token ids and channel 1 the attention mask.
Every chunk of perturbed rows is built from it with integer tensor work only
(gathers, ``where``, one stable sort for deletion): no Python loop over samples
or tokens. ``TokenModel`` unpacks the chunk again and calls the user's model
with ``(input_ids, attention_mask)`` positionally, as keywords, or ids alone.

Deletion packs rows by length (``PackedDeleteTokens``): a deleted row needs only as many columns as
it keeps tokens, so the engine sorts each pass by that length (``PackedDeleteTokens.order_key``) and
every chunk is cut to its longest row, read from the host keys the engine hands it (``Chunk.keys``):
no host synchronisation per chunk. Right-padded rows lose columns on the right, left-padded rows
(decoder-only models) on the left. The unperturbed inputs, which the engine runs first, run as a
call of their own when that spares the sorted rows of their chunk their length (``_packing.head_rows``).
Chunks built without keys (a metric replaying masks) keep the full length L (``DeleteTokens``).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Union

import torch
from torch import nn

from torchlime._util.checks import check_choice
from torchlime.stages.perturb.blend import Chunk
from torchlime.text._packing import deleted_length, head_rows, join_outputs, trim_packed

MODEL_INPUTS = ("auto", "positional", "keywords", "ids")
#: the model input of a deleted chunk: packed rows (c, 2, W), or the two parts of a chunk run as two calls
DeletedRows = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


def pack(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Stack ids (c, L) and mask (c, L) into one long (c, 2, L) tensor."""
    return torch.stack([input_ids.long(), attention_mask.long()], dim=1)


def call_token_model(
    model: Callable[..., object], input_ids: torch.Tensor, attention_mask: torch.Tensor, how: str
) -> object:
    """Call ``model`` on token ids (c, L) and an attention mask (c, L).

    Args:
        model: the token model.
        input_ids: (c, L) token ids.
        attention_mask: (c, L) attention mask.
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
        mask_dtype, ids_dtype: dtypes the attention mask and the ids are handed over in (the
            caller's own: an int32 model gets int32 ids).
    """

    def __init__(
        self,
        model: Callable[..., object],
        how: str,
        mask_dtype: torch.dtype = torch.long,
        ids_dtype: torch.dtype = torch.long,
    ) -> None:
        super().__init__()
        self.model = model
        self.how = how
        self.mask_dtype = mask_dtype
        self.ids_dtype = ids_dtype

    @property
    def cache_identity(self) -> Callable[..., object]:
        """The wrapped model: keys the measured chunk size (wrappers are made per call)."""
        return self.model

    def forward(self, packed: torch.Tensor, *more: torch.Tensor) -> object:
        """Call the wrapped model on packed rows (c, 2, L): ids in ``[:, 0]``, mask in ``[:, 1]``.

        Args:
            packed: long (c, 2, L) packed rows.
            more: further packed rows of the same chunk (each of its own length), run after them; the
                outputs are joined along the rows (``join_outputs``).
        """
        outs = [
            call_token_model(self.model, p[:, 0].to(self.ids_dtype), p[:, 1].to(self.mask_dtype), self.how)
            for p in (packed, *more)
        ]
        return join_outputs(outs)


class TokenChunk(NamedTuple):
    """The rows of one chunk, unpacked."""

    rows: torch.Tensor  # long (c,): explained input of each row
    samples: torch.Tensor  # long (c,): sample index of each row
    ids: torch.Tensor  # long (c, L): original token ids of that input
    attn: torch.Tensor  # long (c, L): original attention mask
    keep: torch.Tensor  # bool (c, L): token kept by the row's mask (fixed tokens always True)


def chunk_view(inputs: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> TokenChunk:
    """Expand a chunk's masks (c, F') through the token features.

    Args:
        inputs: long (B, 2, L) packed ids and mask.
        index: long (B, 1, L) mask column of every token (fixed tokens point at an
            always-True column, as the engine hands them to a ``perturb_fn``).
        chunk: the engine's chunk of rows.
    """
    rows, c = chunk.rows, chunk.rows.shape[0]
    if inputs.shape[0] == 1 and index.shape[0] == 1:  # one input: every row is input 0, a broadcast view
        lab, packed = index.reshape(1, -1).expand(c, -1), inputs.expand(c, -1, -1)
    else:  # ids and mask indexed at once (one operator), then split as views
        lab, packed = index.reshape(index.shape[0], -1)[rows], inputs[rows]
    keep = chunk.masks.gather(1, lab)
    return TokenChunk(rows, chunk.samples, packed[:, 0], packed[:, 1], keep)


def replace_tokens(ids: torch.Tensor, keep: torch.Tensor, mask_id: int) -> torch.Tensor:
    """Hidden tokens become ``mask_id``; shape (c, L) kept, attention mask unchanged."""
    return torch.where(keep, ids, mask_id)  # the id as a scalar: no (c, L) tensor of it per chunk


def delete_tokens(
    ids: torch.Tensor, attn: torch.Tensor, keep: torch.Tensor, pad_id: int, left: Optional[torch.Tensor] = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop hidden tokens and re-pad every row on the side the inputs were padded on.

    The surviving tokens (kept and attended) stay in their original order and move to the
    front (right padding), or to the end for left-padded inputs (decoder-only models); the
    freed positions become ``pad_id`` with mask 0. A row whose tokens are all kept is unchanged.

    Args:
        ids: (c, L) token ids.
        attn: (c, L) attention mask.
        keep: bool (c, L) the tokens kept.
        pad_id: the padding token id written into the freed positions.
        left: bool, broadcastable to (c, 1): pad on the left (a 0-d tensor for the whole batch,
            computed on the device). None: each row as it is padded (left when its first
            position is padding and its last is not).

    Returns:
        ``(ids, attention_mask)``, both (c, L) in the input dtypes.

    Example:
        >>> ids = torch.tensor([[5, 6, 7, 0]]); attn = torch.tensor([[1, 1, 1, 0]])
        >>> delete_tokens(ids, attn, torch.tensor([[True, False, True, True]]), 0)[0].tolist()
        [[5, 7, 0, 0]]
        >>> delete_tokens(ids.flip(1), attn.flip(1), torch.tensor([[True, True, False, True]]), 0)[0].tolist()
        [[0, 0, 7, 5]]
    """
    present = keep & (attn != 0)
    if left is None:
        left = (attn[:, :1] == 0) & (attn[:, -1:] != 0)
    key = torch.where(left, present, ~present)  # left: the dropped first; right: the kept first
    order = torch.argsort(key.to(torch.uint8), dim=1, stable=True)
    whole = (present == (attn != 0)).all(1, keepdim=True)  # every token kept: the row as it came
    present = present.gather(1, order)
    out = ids.gather(1, order).masked_fill(~present, pad_id)
    return torch.where(whole, ids, out), torch.where(whole, attn, present.to(attn.dtype))


def padded_left(attn: torch.Tensor) -> torch.Tensor:
    """Whether the batch is left-padded, as a 0-d bool on the device (no host synchronisation).

    Args:
        attn: (B, L) attention mask.

    Returns:
        0-d bool: some input starts with padding and ends with a token.
    """
    return ((attn[:, 0] == 0) & (attn[:, -1] != 0)).any()


def resolve_model_inputs(model_inputs: str, has_mask: bool) -> str:
    """Turn "auto" into "positional" (a mask was given) or "ids" (none was)."""
    check_choice(model_inputs, "model_inputs", MODEL_INPUTS)
    if model_inputs == "auto":
        return "positional" if has_mask else "ids"
    return model_inputs


class DeleteTokens:
    """The "delete" perturbation at full length: every row is re-padded to L (no ``order_key``).

    Args:
        pad_id: the id freed positions become.
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def rows(self, inputs: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> tuple[torch.Tensor, torch.Tensor]:
        """The chunk's rows re-packed at full length, and the batch's padding side.

        Args:
            inputs: long (B, 2, L) packed ids and mask.
            index: long (B, 1, L) mask column of every token.
            chunk: the engine's chunk of rows.

        Returns:
            ``(packed (c, 2, L), left)``: the rows, and a 0-d bool (left-padded batch) on the device.
        """
        ch = chunk_view(inputs, index, chunk)
        left = padded_left(inputs[:, 1])
        ids, attn = delete_tokens(ch.ids, ch.attn, ch.keep, self.pad_id, left)
        return pack(ids, attn), left

    def __call__(self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> DeletedRows:
        """Packed rows (c, 2, L) of a chunk, hidden tokens deleted.

        Args:
            inputs: long (B, 2, L) packed ids and mask.
            baseline: unused (nothing is filled).
            index: long (B, 1, L) mask column of every token.
            chunk: the engine's chunk of rows.

        Returns:
            Long (c, 2, L) packed rows.
        """
        return self.rows(inputs, index, chunk)[0]


class PackedDeleteTokens(DeleteTokens):
    """The "delete" perturbation packed by length (an ``OrderedPerturbFn``, see the module docstring).

    Args:
        attention_mask: (B, L) the explained inputs' attention mask (the lengths are read from it).
        pad_id: the id freed positions become.
        split: a chunk may run as two model calls (``head_rows``); False where something besides the
            model reads the chunk (an input-space kernel).
    """

    def __init__(self, attention_mask: torch.Tensor, pad_id: int, split: bool = True) -> None:
        super().__init__(pad_id)
        self.attention_mask, self.split = attention_mask, split
        self.left = padded_left(attention_mask)

    def order_key(self, index: torch.Tensor, masks: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Long (n,) columns every row needs after deletion (``deleted_length``): the engine sorts a pass by it.

        Args:
            index: long (B or 1, 1, L) mask column of every token.
            masks: bool (n, F') the rows' masks (with the always-kept column).
            rows: long (n,) the explained input of every row.

        Returns:
            Long (n,) lengths on the masks' device.
        """
        lab = index.reshape(index.shape[0], -1)
        lab = lab.expand(rows.shape[0], -1) if lab.shape[0] == 1 else lab[rows]
        keep = masks.gather(1, lab)
        return deleted_length(self.attention_mask[rows], keep, self.left)

    def __call__(self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> DeletedRows:
        """Packed rows (c, 2, W) of a chunk: W is its longest row when the engine gave keys, else L.

        Args:
            inputs: long (B, 2, L) packed ids and mask.
            baseline: unused (nothing is filled).
            index: long (B, 1, L) mask column of every token.
            chunk: the engine's chunk of rows (``chunk.keys``: the rows' ``order_key`` on the host).

        Returns:
            Long (c, 2, W) packed rows, or the two parts ``(h, 2, W1), (c - h, 2, W2)`` of a chunk run as
            two calls (``head_rows``).
        """
        packed, left = self.rows(inputs, index, chunk)
        keys = chunk.keys
        if keys is None:  # no keys (a metric replaying masks): full length, no read-back
            return packed
        head = head_rows(keys) if self.split else 0
        if head == 0:
            return trim_packed(packed, max(1, max(keys)), left)
        first, rest = max(1, max(keys[:head])), max(1, max(keys[head:]))
        return trim_packed(packed[:head], first, left), trim_packed(packed[head:], rest, left)


def make_perturb_fn(
    mode: str,
    mask_id: Optional[int],
    pad_id: int,
    fill: Optional[Callable[[TokenChunk], torch.Tensor]] = None,
    attention_mask: Optional[torch.Tensor] = None,
    split: bool = True,
) -> Callable[..., object]:
    """The engine's ``perturb_fn`` for a text mode.

    Args:
        mode: "replace", "delete" or "infill".
        mask_id: "replace": the id hidden tokens become.
        pad_id: "delete": the id freed positions become.
        fill: for "infill": ``fill(token_chunk)`` returns the new ids (c, L).
        attention_mask: "delete": the explained inputs' (B, L) attention mask, to pack rows by length
            (``PackedDeleteTokens``); None: every row at full length L (``DeleteTokens``).
        split: packed "delete": a chunk may run as two model calls (``head_rows``).

    Returns:
        ``perturb_fn(inputs, baseline, index, chunk) -> (c, 2, L)`` packed rows ((c, 2, W), W <= L, or two
        such parts, for packed deletion).
    """
    if mode == "delete":
        return DeleteTokens(pad_id) if attention_mask is None else PackedDeleteTokens(attention_mask, pad_id, split)

    def perturb(inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk) -> torch.Tensor:
        ch = chunk_view(inputs, index, chunk)
        if mode == "replace":
            ids = replace_tokens(ch.ids, ch.keep, int(mask_id))  # type: ignore[arg-type]
        else:
            ids = fill(ch)  # type: ignore[misc]
        return pack(ids, ch.attn)

    return perturb
