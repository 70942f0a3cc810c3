"""``explain_tokens``: LIME for token classifiers, batched on the device.

Features are tokens, or words (groups of sub-word tokens from a word-id map).
Special tokens and padding are never perturbed. Hidden features are replaced
by a mask id, deleted (the row is re-packed to the left), or re-written by a
masked LM (``Infiller``). The engine runs once on a packed (B, 2, L) tensor of
ids and attention mask (``perturb.pack``) with the text perturbation as its
``perturb_fn``, in chunks, so lime's text preset (N = 5000) never holds more
than one chunk of activations.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Iterable, Optional, Union

import torch

from torchlime._checks import check_choice, check_integer, check_tensor, describe, from_numpy
from torchlime.engine.explainer import execute
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import UNSET, resolve
from torchlime.engine.registry import resolve_kernel
from torchlime.engine.request import Request
from torchlime.stages.forward.passes import score
from torchlime.text._single import SingleSampler
from torchlime.text.edits import TokenChunk, TokenModel, make_perturb_fn, pack, resolve_model_inputs
from torchlime.text.infill import Infiller, joint_fill
from torchlime.text.proximity import HybridKernel, embedding_matrix

MODES = ("replace", "delete", "infill")
_RESERVED = ("inputs", "features", "baseline", "perturb_fn")


def infer_vocab_size(model: Any) -> Optional[int]:
    """Vocabulary size from the model's input embedding (None when it has none)."""
    m = embedding_matrix(model) if isinstance(model, torch.nn.Module) else None
    return None if m is None else int(m.shape[0])


def feature_positions(exp: Explanation) -> torch.Tensor:
    """The first token position of every feature of a token explanation.

    Feature ids skip special tokens and padding, so they are not positions: this maps
    ``top_features`` ids back (one gather, on the device).

    Args:
        exp: a token explanation (features (B, L), coef (B, T, F)).

    Returns:
        long (B, F): each feature's first position, -1 for the padding features of inputs with fewer.

    Example:
        >>> ids = torch.tensor([[101, 7, 8, 9, 102]])               # [CLS] 7 8 9 [SEP]
        >>> exp = explain_tokens(lambda t: (t == 9).float().sum(1, keepdim=True), ids, mask_id=0,
        ...                      special_ids=[101, 102], n_samples=64)
        >>> idx, _ = exp.top_features(1)
        >>> idx.tolist(), feature_positions(exp).gather(1, idx[:, 0]).tolist()  # feature 2 is position 3
        ([[[2]]], [[3]])
    """
    feats = exp.features.reshape(exp.features.shape[0], -1)
    b, length = feats.shape
    f = exp.coef.shape[-1]
    pos = torch.arange(length, device=feats.device).expand(b, length)
    first = torch.full((b, f + 1), length, dtype=torch.long, device=feats.device)
    first.scatter_reduce_(1, torch.where(feats < 0, f, feats.long()), pos, reduce="amin")
    return torch.where(first[:, :f] == length, -1, first[:, :f])


def token_features(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, word_ids: Optional[torch.Tensor], special_ids: torch.Tensor
) -> torch.Tensor:
    """Long (B, L) feature ids: the token position, or its word id; -1 for special/padding.

    Args:
        input_ids: (B, L) token ids.
        attention_mask: (B, L) 1 for real tokens, 0 for padding.
        word_ids: (B or 1, L) word of each token (-1 = no word), or None: one feature per token.
        special_ids: long (k,) ids never perturbed.
    """
    batch, length = input_ids.shape
    base = (
        torch.arange(length, device=input_ids.device).expand(batch, length)
        if word_ids is None
        else word_ids.long().expand(batch, length)
    )
    perturbable = (attention_mask != 0) & ~torch.isin(input_ids, special_ids) & (base >= 0)
    return torch.where(perturbable, base, -1)


def word_ids_from_encoding(encoding: Any, batch_size: Optional[int] = None) -> torch.Tensor:
    """A long (B, L) word-id map from a Hugging Face ``BatchEncoding`` (None -> -1).

    Args:
        encoding: object with ``word_ids(i)`` returning a list of ints / None per row.
        batch_size: B (default: ``len(encoding["input_ids"])``).
    """
    n = batch_size if batch_size is not None else len(encoding["input_ids"])
    rows = [[-1 if w is None else int(w) for w in encoding.word_ids(i)] for i in range(n)]
    return torch.tensor(rows, dtype=torch.long)


def _check_args(
    input_ids: Any, attention_mask: Any, word_ids: Any, mode: str, mask_id: Any, pad_id: Any, vocab_size: Optional[int]
) -> torch.Tensor:
    """Validate the text arguments; return the attention mask (given or all ones)."""
    check_tensor(input_ids, "input_ids")
    check_integer(input_ids, "input_ids")
    if input_ids.ndim != 2:
        raise ValueError(f"`input_ids` must have shape (B, L), got shape {tuple(input_ids.shape)}")
    check_choice(mode, "mode", MODES)
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    check_tensor(attention_mask, "attention_mask")
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"`attention_mask` must have the shape of `input_ids` {tuple(input_ids.shape)}, "
            f"got {tuple(attention_mask.shape)}"
        )
    if attention_mask.dtype.is_floating_point or attention_mask.dtype.is_complex:
        raise TypeError(f"`attention_mask` must be bool or integer (0/1), got {attention_mask.dtype}")
    if attention_mask.device != input_ids.device:
        raise ValueError(
            f"`attention_mask` must be on `input_ids`' device ({input_ids.device}), got {attention_mask.device}"
        )
    if word_ids is not None:
        check_tensor(word_ids, "word_ids")
        check_integer(word_ids, "word_ids")
        b, length = input_ids.shape
        if word_ids.ndim != 2 or word_ids.shape[0] not in (1, b) or word_ids.shape[1] != length:
            raise ValueError(
                f"`word_ids` must have shape ({b}, {length}) or (1, {length}), got {tuple(word_ids.shape)}"
            )
    if mode != "delete" and mask_id is None:
        raise ValueError(
            f"mode={mode!r} needs `mask_id` (the id hidden tokens take, e.g. tokenizer.mask_token_id), got None"
        )
    for name, value in (("mask_id", mask_id), ("pad_id", pad_id)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"`{name}` must be an int token id, got {describe(value)}")
    if vocab_size is not None and input_ids.numel():
        lo, hi = int(input_ids.min()), int(input_ids.max())
        if lo < 0 or hi >= vocab_size:
            bad = input_ids[(input_ids < 0) | (input_ids >= vocab_size)].unique()[:10].tolist()
            raise ValueError(
                f"`input_ids` must be in [0, {vocab_size}) (the model's vocabulary size), "
                f"got ids {bad} (min {lo}, max {hi})"
            )
        for name, value in (("mask_id", mask_id), ("pad_id", pad_id)):
            if value is not None and not 0 <= value < vocab_size:
                raise ValueError(f"`{name}` must be in [0, {vocab_size}) (the model's vocabulary size), got {value}")
    return attention_mask


def _as_id_tensor(ids: Union[None, int, Iterable[int], torch.Tensor], device: torch.device) -> torch.Tensor:
    """Special ids as a long tensor (k,) on ``device``."""
    if ids is None:
        return torch.empty(0, dtype=torch.long, device=device)
    if isinstance(ids, torch.Tensor):
        check_integer(ids, "special_ids")
        return ids.reshape(-1).long().to(device)
    listed: Any = [ids] if isinstance(ids, int) and not isinstance(ids, bool) else ids
    try:
        return torch.tensor([int(i) for i in listed], dtype=torch.long, device=device)
    except (TypeError, ValueError):
        raise TypeError(f"`special_ids` must be None, an int, ints or an integer tensor, got {describe(ids)}") from None


def explain_tokens(
    model: Callable[..., Any],
    input_ids: torch.Tensor,
    *,
    attention_mask: Optional[torch.Tensor] = None,
    word_ids: Optional[torch.Tensor] = None,
    special_ids: Union[None, int, Iterable[int], torch.Tensor] = None,
    mode: str = "replace",
    mask_id: Optional[int] = None,
    pad_id: int = 0,
    vocab_size: Optional[int] = None,
    model_inputs: str = "auto",
    infill: Union[None, Infiller, Callable[..., Any]] = None,
    kernel: Any = UNSET,
    generator: Union[None, int, torch.Generator] = None,
    batch_size: Optional[int] = None,
    **kwargs: Any,
) -> Explanation:
    """Explain B token sequences with LIME over their tokens or words.

    Args:
        model: classifier taking ``(input_ids, attention_mask)`` and returning
            logits / probabilities (c, K) or an object with ``.logits``.
        input_ids: integer (B, L) token ids (padding anywhere, marked by the mask).
        attention_mask: (B, L) 1 = token, 0 = padding (default all ones).
        word_ids: (B or 1, L) word of every token (-1: none), e.g. from
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
        kernel: as in ``explain``, or a ``HybridKernel`` (weights from the perturbed text).
        generator: seed or ``torch.Generator`` (masks and infill sampling).
        batch_size: rows per model call (default: measured, see ``torchlime.stages.forward.chunking``).
        **kwargs: ``explain`` keywords (target, n_samples, preset, sampler,
            surrogate, softmax, output, masks, return_samples, progress, ...).

    Returns:
        ``Explanation`` with coef (B, T, F), features (B, L) (-1 never perturbed),
        input_shape (L,), meta with the mode and the model rows spent.

    Raises:
        TypeError / ValueError: naming the argument, expected and got value.
    """
    bad = [k for k in kwargs if k in _RESERVED]
    if bad:
        raise TypeError(
            f"explain_tokens() does not take {bad}: features come from the tokens and hidden tokens from `mode`"
        )
    if vocab_size is None:
        vocab_size = infer_vocab_size(model)
    input_ids, attention_mask, word_ids = from_numpy(input_ids), from_numpy(attention_mask), from_numpy(word_ids)
    attn = _check_args(input_ids, attention_mask, word_ids, mode, mask_id, pad_id, vocab_size)
    dev = input_ids.device
    batch, length = input_ids.shape
    special = _as_id_tensor(special_ids, dev)
    feats = token_features(input_ids, attn, word_ids, special)
    how = resolve_model_inputs(model_inputs, attention_mask is not None)
    adapter = functools.partial(TokenModel, how=how, mask_dtype=attn.dtype, ids_dtype=input_ids.dtype)
    wrapped = adapter(model)
    packed = pack(input_ids, attn)
    exclude = sorted({*special.tolist(), pad_id, *([mask_id] if mask_id is not None else [])})
    meta: dict[str, Any] = dict(mode=mode)
    extra_rows = 0
    fill: Optional[Callable[[TokenChunk], torch.Tensor]] = None
    if mode == "infill":
        assert mask_id is not None  # _check_args refuses infill without it
        infiller = _resolve_infiller(infill, mask_id, vocab_size)
        exclude = sorted({*exclude, *map(int, infiller.exclude_ids)})
        fill_gen = (
            generator
            if isinstance(generator, torch.Generator)
            else torch.Generator(dev).manual_seed((0 if generator is None else int(generator)) + 1)
        )
        meta.update(infill=infiller.protocol, objective=infiller.objective, strategy=infiller.strategy, mlm_rows=0)
        if infiller.protocol == "single":
            given = [k for k in ("masks", "sampler") if k in kwargs]
            if given:
                raise ValueError(f"{given} cannot be given with protocol='single' (it plans its own samples)")
            scorer, predicted = None, None
            if infiller.objective:

                def scorer(build: Callable[[int, int], torch.Tensor], n_rows: int) -> torch.Tensor:
                    return score(
                        wrapped,
                        build,
                        n_rows,
                        reference=packed,
                        output=kwargs.get("output"),
                        softmax=bool(kwargs.get("softmax", False)),
                        batch_size=batch_size,
                        signature=("tokens", length),
                    )

                predicted = scorer(lambda a, b: packed[a:b], batch).argmax(1)
                extra_rows += batch
            single = SingleSampler(
                infiller, input_ids.long(), attn.long(), int(mask_id), exclude, fill_gen, scorer, predicted
            )
            kwargs["sampler"] = single
            fill = single.apply
        else:

            def fill(ch: TokenChunk) -> torch.Tensor:
                meta["mlm_rows"] += int((~ch.keep & (ch.attn != 0)).any(1).sum())
                return joint_fill(infiller, ch.ids, ch.attn, ch.keep, int(mask_id), exclude, fill_gen)

    if isinstance(kernel, HybridKernel):
        kernel = dataclasses.replace(kernel, ignore_ids=(*kernel.ignore_ids, *exclude))
    else:
        chosen = resolve(kwargs.get("preset"), dict(kernel=kernel), "text")["kernel"]  # the preset's, if not given
        if chosen is not UNSET and chosen is not None and resolve_kernel(chosen).space == "input":
            raise ValueError(
                f"`kernel` must measure distances on the masks (space='mask') or be a HybridKernel for "
                f"tokens: an input-space kernel such as {chosen!r} would compare token ids as numbers"
            )
    options = dict(
        kwargs,
        kernel=kernel,
        generator=generator,
        batch_size=batch_size,
        perturb_fn=make_perturb_fn(mode, mask_id, pad_id, fill),
    )
    exp = execute(
        Request(model, packed, feats.unsqueeze(1), options, modality="text", input_name="input_ids", adapter=adapter)
    )
    if mode == "infill" and infiller.protocol == "single":
        plan = kwargs["sampler"].plan
        extra_rows += plan.extra_calls
        meta["mlm_rows"] = int(exp.n_features.sum())  # one MLM row per (input, feature)
    meta.update(exp.meta, mode=mode, model_rows=exp.meta["model_rows"] + extra_rows)
    return dataclasses.replace(exp, features=exp.features.reshape(batch, length), input_shape=(length,), meta=meta)


def _resolve_infiller(infill: Any, mask_id: Optional[int], vocab_size: Optional[int]) -> Infiller:
    """An ``Infiller`` from the argument; checks the mask id against the MLM's vocabulary."""
    if infill is None:
        raise ValueError("mode='infill' needs `infill`: an Infiller or a masked language model, got None")
    infiller = infill if isinstance(infill, Infiller) else Infiller(infill)
    v = infiller.vocab_size()
    if v is not None and mask_id is not None and not 0 <= mask_id < v:
        raise ValueError(f"`mask_id` must be in [0, {v}) (the masked LM's vocabulary size), got {mask_id}")
    return infiller
