"""``Tokens``: token ids explained over their tokens or words, hidden by replacement, deletion or infill.

Features are tokens, or words (groups of sub-word tokens from a word-id map). Special tokens and
padding are never perturbed. Hidden features are replaced by a mask id, deleted (the row is
re-packed; with class scores each chunk is cut to its longest row: ``edits.PackedDeleteTokens``), or
re-written by a masked LM (``Infiller``). The engine runs once on a packed (B, 2, L) tensor of ids and
attention mask (``edits.pack``) with the text perturbation as its ``perturb_fn``, in chunks, so lime's
text preset (N = 5000) never holds more than one chunk of activations.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Optional

import torch

from torchlime._util.checks import describe, from_numpy
from torchlime.engine import Call, Config, Explanation, Info, Modality, Prepared
from torchlime.engine.info import check_record, sized
from torchlime.stages.forward.passes import score
from torchlime.targets.base import Target
from torchlime.text._single import Scorer, SingleSampler
from torchlime.text._token_args import TokenArgs, infer_vocab_size, known_inputs, resolve_infiller, token_inputs
from torchlime.text.edits import TokenChunk, TokenModel, make_perturb_fn, resolve_model_inputs
from torchlime.text.infill import Infiller, joint_fill
from torchlime.text.proximity import HybridKernel
from torchlime.typing import UNSET, Model

#: the fields the text modalities set themselves (a ``Config``'s fill, the rest ``Call`` fields)
OWNED = frozenset({"perturb_fn", "normalize", "chunk_format", "additional_forward_args", "baseline"})


def refuse_owned(door: str, hides: str, how: Config, call: Call) -> None:
    """Refuse a fill or the hooks a text modality sets itself.

    Args:
        door: the modality's name, for the message.
        hides: what hides its features, for the message.
        how: the caller's configuration.
        call: the caller's call.

    Raises:
        TypeError: naming what was given.
    """
    given = (["baseline"] if how.baseline is not UNSET else []) + sorted(
        k for k in OWNED - {"baseline"} if getattr(call, k) is not None
    )
    if given:
        raise TypeError(
            f"{door} does not take {given}: its features come from the text and hidden ones from {hides}, "
            "not from a fill or a perturbation hook"
        )


@dataclass(frozen=True)
class TokensInfo(Info):
    """What a token explanation records (``Explanation.info``; ``meta`` shows it under "text_tokens").

    Attributes:
        mode: "replace", "delete" or "infill".
        mask_id: the id hidden tokens became (replace) / the masked LM's mask id (infill), or None.
        pad_id: the padding id "delete" wrote.
        special_ids: the ids never perturbed.
        model_inputs: how the model took its inputs ("positional", "keywords" or "ids").
        infill: the infill protocol ("joint" or "single"), None outside "infill".
        objective: the single protocol's objective (None, "neutral", "boundary").
        strategy: how proposals were chosen ("sample" or "argmax"), None outside "infill".
        mlm_rows: rows the masked LM ran on, None outside "infill".
        scoring_rows: model rows spent besides the samples (the objectives' prediction and candidate
            scoring), counted in ``Explanation.run.model_rows``.
        lengths: the tokens of every input, padding left out (None in files written before it was kept).
    """

    key: ClassVar[str] = "text_tokens"
    per_input: ClassVar[tuple[str, ...]] = ("lengths",)

    @classmethod
    def from_plain(cls, plain: object) -> Optional[TokensInfo]:
        """The record from its plain data (``meta["text_tokens"]``), or None for data of another shape.

        Args:
            plain: the mapping ``as_plain`` wrote.

        Returns:
            The record.

        Raises:
            StoredDataError: a field of another kind (a ``ValueError`` naming it, what it must be and
                what it holds).
        """
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(plain, Mapping) or not {"mode", "pad_id", "special_ids", "model_inputs"} <= set(plain):
            return None
        check_record(cls, plain, "meta['text_tokens']")
        kept = {k: v for k, v in plain.items() if k in names}
        return cls(**{**kept, "special_ids": tuple(kept["special_ids"])})

    def top_level(self) -> dict[str, object]:
        """``meta``'s top-level "mode" (and in "infill" mode "infill", "objective", "strategy", "mlm_rows")."""
        shown: dict[str, object] = {"mode": self.mode}
        if self.mode == "infill":
            shown.update(infill=self.infill, objective=self.objective, strategy=self.strategy, mlm_rows=self.mlm_rows)
        return shown

    mode: str
    mask_id: Optional[int]
    pad_id: int
    special_ids: tuple[int, ...]
    model_inputs: str
    infill: Optional[str] = None
    objective: Optional[str] = None
    strategy: Optional[str] = None
    mlm_rows: Optional[int] = None
    scoring_rows: int = 0
    lengths: Optional[list[int]] = None

    def describe(self, count: int, shape: tuple[int, ...]) -> Optional[str]:
        """The token sequences and their tokens (padding left out), e.g. "2 texts of 9 and 7 tokens".

        Args:
            count: B, the inputs.
            shape: the explanation's ``input_shape`` (L,).

        Returns:
            The phrase, or None without ``lengths``.
        """
        return None if self.lengths is None else sized("text", self.lengths, "token")


@dataclass
class _Run:
    """What one call counts while it runs (a fresh one per ``prepare``)."""

    mlm_rows: int = 0
    scoring_rows: int = 0
    single: Optional[SingleSampler] = None


@dataclass(frozen=True)
class TokensPrepared(Prepared):
    """A token call's hand-over, with its record and what the run counts (read by ``finish_tokens``).

    Attributes:
        tokens: the token record as ``prepare`` made it.
        run: the counters of this call.
    """

    tokens: Optional[TokensInfo] = None
    run: _Run = field(default_factory=_Run)


@dataclass(frozen=True)
class Tokens(TokenArgs, Modality):
    """Token ids (B, L) of a token classifier, explained over their tokens or words.

    Attributes:
        attention_mask: (B, L) 1 = token, 0 = padding (default all ones).
        word_ids: the feature map: (B or 1, L) word of every token (-1: none), e.g. from
            ``word_ids_from_encoding``; None makes every token its own feature.
        special_ids: ids never perturbed (CLS, SEP, ...), wherever they stand; padding never is either.
        mode: "replace" (hidden tokens -> ``mask_id``), "delete" (dropped, rows re-padded with
            ``pad_id`` and, for class scores, packed by length: each chunk is cut to its longest row)
            or "infill" (masked-LM proposals).
        mask_id: id of hidden tokens (replace) / of the MLM's mask token (infill).
        pad_id: padding id written by "delete".
        vocab_size: checks the ids; None: the model's input-embedding size, if any.
        model_inputs: "auto" (positional with a mask, ids alone without), "positional", "keywords"
            or "ids".
        infill: an ``Infiller`` or a masked LM (wrapped with default settings).

    Example:
        >>> from torchlime.engine import Explainer
        >>> ids = torch.tensor([[101, 7, 8, 9, 102]])               # [CLS] 7 8 9 [SEP]
        >>> exp = Explainer().explain(lambda t: (t == 9).float().sum(1, keepdim=True), ids,
        ...                           Tokens(special_ids=[101, 102], mask_id=0), n_samples=64)
        >>> exp.features.tolist(), exp.info.mode
        ([[-1, 0, 1, 2, -1]], 'replace')
    """

    owns: ClassVar[frozenset[str]] = OWNED
    #: "delete" packs rows by length (False: every row at full length, as before packing; for comparisons)
    _pack_rows: ClassVar[bool] = True

    def prepare(self, model: Model, inputs: object, how: Config, call: Call) -> TokensPrepared:
        """Check the ids and settings, build the token features, the perturbation and the model wrapper.

        Args:
            model: the token classifier (its embedding gives the vocabulary size to check against).
            inputs: integer (B, L) token ids.
            how: the configuration (a ``HybridKernel`` learns the ids it ignores).
            call: the call (``masks`` must be unset with the single infill protocol).

        Returns:
            The hand-over: packed (B, 2, L) ids and mask, features (B, 1, L).

        Raises:
            TypeError / ValueError: naming the argument, what was expected and what came.
        """
        refuse_owned("Tokens", "`mode`", how, call)
        vocab_size = self.vocab_size if self.vocab_size is not None else infer_vocab_size(model)
        given_mask = from_numpy(self.attention_mask)
        input_ids, word_ids = from_numpy(inputs), from_numpy(self.word_ids)
        settings = (self.mode, self.mask_id, self.pad_id, vocab_size)
        known = self._known()
        made = (
            token_inputs(input_ids, given_mask, word_ids, self.special_ids, *settings)  # kept for ids passed again
            if known is None
            else known_inputs(input_ids, given_mask, self.special_ids, *settings, known)
        )
        attn, _, special_list, feats, packed = made
        inputs_how = resolve_model_inputs(self.model_inputs, given_mask is not None)
        adapter = functools.partial(TokenModel, how=inputs_how, mask_dtype=attn.dtype, ids_dtype=input_ids.dtype)
        mask_id = self.mask_id
        exclude = sorted({*special_list, self.pad_id, *([mask_id] if mask_id is not None else [])})
        info = TokensInfo(self.mode, mask_id, self.pad_id, special_list, inputs_how)
        run = _Run()
        fill: Optional[Callable[[TokenChunk], torch.Tensor]] = None
        if self.mode == "infill":
            assert mask_id is not None  # _check_args refuses infill without it
            infiller = resolve_infiller(self.infill, mask_id, vocab_size)
            exclude = sorted({*exclude, *map(int, infiller.exclude_ids)})
            info = dataclasses.replace(
                info, infill=infiller.protocol, objective=infiller.objective, strategy=infiller.strategy, mlm_rows=0
            )
            rows = _Rows(input_ids, attn, packed, adapter(model) if infiller.objective else None)
            how, fill = _infill(infiller, rows, mask_id, exclude, how, call, run)
        how = _with_kernel(how, exclude)
        # "delete" packs rows by length for class scores; a structured target (a continuation's logits read
        # by position) gets rows of the full length, whose positions it knows
        packs = self._pack_rows and self.mode == "delete" and not isinstance(call.target, Target)
        by_length = attn if packs else None
        split = not isinstance(how.kernel, HybridKernel)  # an input-space kernel reads every chunk as one tensor
        perturb = make_perturb_fn(self.mode, mask_id, self.pad_id, fill, attention_mask=by_length, split=split)
        call = dataclasses.replace(call, perturb_fn=perturb)
        features = feats.unsqueeze(1)
        return TokensPrepared(
            packed, features, how, call, adapter, "text", "input_ids", info=info, tokens=info, run=run
        )

    def _known(self) -> Optional[tuple[torch.Tensor, Optional[torch.Tensor], bool]]:
        """What the caller knows of the ids: features (B, L), packed ids (B, 2, L) or None, ids in range; else None.

        Where None, the features and packed ids are made from the ids and the ids read (``token_inputs``).
        """
        return None

    def finish(self, explanation: Explanation, prepared: Prepared) -> Explanation:
        """The features as (B, L), the rows the run counted, the record (see ``finish_tokens``).

        Args:
            explanation: the engine's result over the (B, L) token rows.
            prepared: the hand-over it came from (its counters hold the rows the run spent).

        Returns:
            The explanation with its ``TokensInfo`` record.
        """
        explanation, info = finish_tokens(explanation, prepared)
        return attach(explanation, info)


def finish_tokens(explanation: Explanation, prepared: Prepared) -> tuple[Explanation, TokensInfo]:
    """Complete a token explanation: features (B, L), input_shape (L,), and the rows the run spent.

    ``run.model_rows`` counts the samples' rows and the scoring rows; the record's ``top_level`` shows
    "mode" (and in "infill" mode "infill", "objective", "strategy", "mlm_rows") in ``meta``.

    Args:
        explanation: the engine's result.
        prepared: the ``TokensPrepared`` it came from.

    Returns:
        ``(explanation, info)``: the completed explanation and its final record.
    """
    if not isinstance(prepared, TokensPrepared) or prepared.tokens is None:
        raise TypeError(f"`prepared` must come from Tokens.prepare, got {describe(prepared)}")
    run, info = prepared.run, prepared.tokens
    scoring = run.scoring_rows
    if run.single is not None and run.single.plan is not None:
        scoring += run.single.plan.extra_calls
        info = dataclasses.replace(info, mlm_rows=int(explanation.n_features.sum()))  # one per (input, feature)
    elif info.mode == "infill":
        info = dataclasses.replace(info, mlm_rows=run.mlm_rows)
    lengths = info.lengths  # known already (a generation call's rows), else read from the (B, 2, L) ids and mask
    lengths = prepared.inputs[:, 1].sum(-1).tolist() if lengths is None else list(lengths)
    info = dataclasses.replace(info, scoring_rows=scoring, lengths=lengths)
    batch, length = prepared.inputs.shape[0], prepared.inputs.shape[-1]
    features = explanation.features.reshape(batch, length)
    record = explanation.run  # the samples' rows and the objectives' scoring
    record = None if record is None else dataclasses.replace(record, model_rows=record.model_rows + scoring)
    finished = dataclasses.replace(explanation, features=features, input_shape=(length,), run=record)
    return finished, info


def attach(explanation: Explanation, info: Info) -> Explanation:
    """``explanation`` with ``info`` as its record (``meta[info.key]`` renders it)."""
    return dataclasses.replace(explanation, info=info)


@dataclass(frozen=True)
class _Rows:
    """The explained rows: ids and mask (B, L), packed (B, 2, L), and the wrapped model (for objectives)."""

    ids: torch.Tensor
    attn: torch.Tensor
    packed: torch.Tensor
    model: Optional[Model]


def _infill(
    infiller: Infiller, rows: _Rows, mask_id: int, exclude: list[int], how: Config, call: Call, run: _Run
) -> tuple[Config, Callable[[TokenChunk], torch.Tensor]]:
    """The fill of "infill" mode (and, for the single protocol, its sampler in ``how``).

    Args:
        infiller: the masked LM and its settings.
        rows: the explained rows.
        mask_id: the MLM's mask id.
        exclude: ids never proposed.
        how: the configuration (``sampler`` must be unset with the single protocol).
        call: the call (``masks`` must be unset with the single protocol; its generator draws).
        run: the call's counters (MLM rows, scoring rows, the single sampler).

    Returns:
        ``(how, fill)``: the configuration and ``fill(token_chunk) -> (c, L)`` new ids.
    """
    generator = call.generator
    fill_gen = (
        generator
        if isinstance(generator, torch.Generator)
        else torch.Generator(rows.ids.device).manual_seed((0 if generator is None else int(generator)) + 1)
    )
    if infiller.protocol != "single":

        def joint(ch: TokenChunk) -> torch.Tensor:
            run.mlm_rows += int((~ch.keep & (ch.attn != 0)).any(1).sum())
            return joint_fill(infiller, ch.ids, ch.attn, ch.keep, mask_id, exclude, fill_gen)

        return how, joint
    given = (["masks"] if call.masks is not None else []) + (["sampler"] if how.sampler is not UNSET else [])
    if given:
        raise ValueError(f"{given} cannot be given with protocol='single' (it plans its own samples)")
    scorer: Optional[Scorer] = None
    predicted = None
    if rows.model is not None:
        scorer = functools.partial(_score, rows.model, rows.packed, how, call)
        predicted = scorer(lambda a, b: rows.packed[a:b], rows.ids.shape[0]).argmax(1)
        run.scoring_rows += rows.ids.shape[0]
    single = SingleSampler(infiller, rows.ids.long(), rows.attn.long(), mask_id, exclude, fill_gen, scorer, predicted)
    run.single = single
    return dataclasses.replace(how, sampler=single), single.apply


def _score(
    model: Model, packed: torch.Tensor, how: Config, call: Call, build: Callable[[int, int], torch.Tensor], n_rows: int
) -> torch.Tensor:
    """Scores (n_rows, K) of packed rows ``build(start, stop)`` (the objectives' candidates)."""
    return score(
        model,
        build,
        n_rows,
        reference=packed,
        output=call.output,
        softmax=call.softmax,
        batch_size=how.batch_size,
        signature=("tokens", packed.shape[-1]),
    )


def _with_kernel(how: Config, exclude: list[int]) -> Config:
    """A ``HybridKernel`` ignoring ``exclude``; any other kernel must measure distances on the masks."""
    kernel = how.kernel
    if isinstance(kernel, HybridKernel):
        return dataclasses.replace(how, kernel=dataclasses.replace(kernel, ignore_ids=(*kernel.ignore_ids, *exclude)))
    how.refuse_input_kernel("text", "would compare token ids as numbers", "a mask-space kernel or a HybridKernel")
    return how
