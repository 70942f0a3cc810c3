"""The single-mask, single-sample infill protocol.

Every perturbed sample changes exactly one feature (word or token): sample s >= 1
of input b re-writes feature ``(s - 1) mod F_b`` (round-robin, so features get
equal shares), the rest of the text stays as it is. For every feature the
masked LM runs once, on the input with that feature's tokens set to
``mask_id``; its guarded top-k proposals are the feature's candidates (rank j of
a multi-token word takes the rank-j proposal at each of its positions). A
sample then picks one candidate rank:

* objective None: by the MLM's probability (sampled or argmax);
* "neutral": among candidates with which the model keeps its predicted label;
* "boundary": among candidates with which the predicted label flips.

For the two objectives every candidate is scored by the explained model first
(F·k rows per input, batched); when no candidate qualifies, "neutral" takes the
one that keeps the original class score highest and "boundary" the one that
lowers it most. A feature without any surviving candidate is left unchanged
and its samples' masks say so (all True), so it never counts as perturbed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import torch

from torchlime.stages.sampling import Rows, Sampler
from torchlime.text.edits import TokenChunk, pack
from torchlime.text.infill import Infiller, choose, mlm_candidates

if TYPE_CHECKING:
    from torchlime.stages.features import FeatureMap

Scorer = Callable[[Callable[[int, int], torch.Tensor], int], torch.Tensor]


@dataclass
class SinglePlan:
    """Everything the chunks of a single-mask run need.

    Attributes:
        labels: long (B, L) feature of every token (-1: never perturbed).
        feature: long (B, S) feature re-written by each sample (-1 for row 0 and
            for samples left unchanged).
        choice: long (B, S) candidate rank taken by each sample.
        cand: long (B, L, k) candidate ids per position (the original id in empty slots).
        masks: bool (B, S, F) engine masks (False only at the re-written feature).
        extra_calls: model rows spent on scoring candidates (objectives only).
    """

    labels: torch.Tensor
    feature: torch.Tensor
    choice: torch.Tensor
    cand: torch.Tensor
    masks: torch.Tensor
    extra_calls: int = 0

    def apply(self, ch: TokenChunk) -> torch.Tensor:
        """Token ids (c, L) of a chunk's rows."""
        s = ch.samples
        f = self.feature[ch.rows, s]  # (c,)
        j = self.choice[ch.rows, s]
        hidden = (self.labels[ch.rows] == f.unsqueeze(1)) & (f.unsqueeze(1) >= 0)
        c, length = ch.ids.shape
        new = self.cand[ch.rows].gather(2, j.view(c, 1, 1).expand(c, length, 1)).squeeze(2)
        return torch.where(hidden, new, ch.ids)


def plan_single(  # noqa: PLR0913
    infiller: Infiller,
    ids: torch.Tensor,
    attn: torch.Tensor,
    labels: torch.Tensor,
    n_features: torch.Tensor,
    n_samples: int,
    mask_id: int,
    exclude_ids: Sequence[int],
    generator: Optional[torch.Generator],
    scorer: Optional[Scorer] = None,
    predicted: Optional[torch.Tensor] = None,
) -> SinglePlan:
    """Draw the candidates and the per-sample choices of a single-mask run.

    Args:
        infiller: the ``Infiller`` (masked language model) proposing the replacement tokens.
        ids: long (B, L) the explained token ids.
        attn: long (B, L) their attention mask.
        labels: long (B, L) feature ids 0..F_b-1, -1 never perturbed.
        n_features: long (B,) F_b.
        n_samples: S (row 0 is the input itself).
        mask_id: the tokenizer's mask token id.
        exclude_ids: token ids never proposed (special tokens).
        generator: the random generator of the choices (None: the global one).
        scorer: ``scorer(build, n_rows) -> (n_rows, K)`` model scores of packed rows
            produced by ``build(start, stop) -> (c, 2, L)`` (needed by the objectives).
        predicted: long (B,) the model's predicted class of each input (objectives).
    """
    dev = ids.device
    batch, length = ids.shape
    f_max = int(n_features.max())
    k = infiller.k
    valid = torch.arange(f_max, device=dev) < n_features.unsqueeze(1)  # (B, F)
    pb, pf = valid.nonzero(as_tuple=True)  # (P,) one MLM row per (input, feature)
    hidden = labels[pb] == pf.unsqueeze(1)  # (P, L)
    cand_h, logp_h = mlm_candidates(infiller, ids[pb], attn[pb], hidden, mask_id, exclude_ids)
    # scatter the per-position candidates back to (B, L, k): each position has one feature
    pos = hidden.nonzero(as_tuple=True)
    cand = ids.unsqueeze(2).repeat(1, 1, k)
    logp = torch.zeros(batch, length, k, device=dev)
    cand[pb[pos[0]], pos[1]] = cand_h
    logp[pb[pos[0]], pos[1]] = logp_h
    # a word's rank-j candidate: log-prob summed over its positions (independent fills)
    lab = torch.where(labels < 0, f_max, labels)
    word = torch.zeros(batch, f_max + 1, k, device=dev).scatter_add_(1, lab.unsqueeze(2).expand(-1, -1, k), logp)[
        :, :f_max
    ]  # (B, F, k)
    extra = 0
    if infiller.objective is not None:
        if scorer is None or predicted is None:
            raise ValueError("the neutral / boundary objectives need the model's scores")
        word, extra = _objective(infiller.objective, word, pb, pf, ids, attn, labels, cand, scorer, predicted)
    feature = torch.arange(n_samples, device=dev).unsqueeze(0) - 1  # (1, S)
    feature = torch.where(feature >= 0, feature % n_features.unsqueeze(1), -1)  # (B, S)
    rows = word.gather(1, feature.clamp_min(0).unsqueeze(2).expand(-1, -1, k))  # (B, S, k)
    slot, ok = choose(rows.reshape(-1, k), infiller.strategy, infiller.temperature, generator)
    choice = slot.view(batch, n_samples)
    feature = torch.where(ok.view(batch, n_samples), feature, -1)
    masks = torch.ones(batch, n_samples, f_max + 1, dtype=torch.bool, device=dev)
    masks.scatter_(2, torch.where(feature >= 0, feature, f_max).unsqueeze(2), False)
    return SinglePlan(labels, feature, choice, cand, masks[..., :f_max], extra)


def _objective(  # noqa: PLR0913
    objective: str,
    word: torch.Tensor,
    pb: torch.Tensor,
    pf: torch.Tensor,
    ids: torch.Tensor,
    attn: torch.Tensor,
    labels: torch.Tensor,
    cand: torch.Tensor,
    scorer: Scorer,
    predicted: torch.Tensor,
) -> tuple[torch.Tensor, int]:
    """Restrict every feature's candidate log-probs (B, F, k) to those meeting the objective."""
    k = word.shape[2]
    n_pairs = pb.shape[0]

    def build(start: int, stop: int) -> torch.Tensor:
        r = torch.arange(start, stop, device=ids.device)
        p, j = r // k, r % k
        b = pb[p]
        hid = labels[b] == pf[p].unsqueeze(1)
        new = cand[b].gather(2, j.view(-1, 1, 1).expand(-1, ids.shape[1], 1)).squeeze(2)
        return pack(torch.where(hid, new, ids[b]), attn[b])

    scores = scorer(build, n_pairs * k).view(n_pairs, k, -1)  # (P, k, K)
    pred = predicted[pb].unsqueeze(1)  # (P, 1)
    own = scores.gather(2, pred.unsqueeze(2).expand(-1, k, 1)).squeeze(2)  # (P, k)
    flips = scores.argmax(2) != pred
    lp = word[pb, pf]  # (P, k)
    finite = torch.isfinite(lp)
    good = (~flips if objective == "neutral" else flips) & finite
    key = own if objective == "neutral" else -own
    fallback = torch.nn.functional.one_hot(key.masked_fill(~finite, float("-inf")).argmax(1), k).bool()
    allowed = torch.where(good.any(1, keepdim=True), good, fallback & finite)
    word = word.clone()
    word[pb, pf] = lp.masked_fill(~allowed, float("-inf"))
    return word, n_pairs * k


@dataclass(eq=False, repr=False)
class SingleSampler(Sampler):
    """The single-mask protocol as a sampler.

    ``bind`` plans every sample from the engine's feature map (``plan_single``); the masks are
    the plan's, and ``apply`` writes the chosen candidates into a chunk's rows.

    Attributes:
        infiller: the ``Infiller``.
        ids: long (B, L) the explained rows.
        attn: long (B, L) their attention mask.
        mask_id: as in ``plan_single``.
        exclude_ids: as in ``plan_single``.
        generator: as in ``plan_single``.
        scorer: as in ``plan_single``.
        predicted: as in ``plan_single``.
        plan: the plan ``bind`` made (None before).
    """

    reusable = False  # the samples' perturbations are planned: other masks cannot be built
    adaptive = False  # and planned for all S samples at once, not in rounds

    infiller: Infiller
    ids: torch.Tensor
    attn: torch.Tensor
    mask_id: int
    exclude_ids: Sequence[int]
    generator: Optional[torch.Generator]
    scorer: Optional[Scorer] = None
    predicted: Optional[torch.Tensor] = None
    plan: Optional[SinglePlan] = field(default=None, init=False)

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> SingleSampler:
        assert features is not None  # a design planned from the data: the engine binds it with the call's map
        if n_samples - 1 < features.f_max:
            warnings.warn(
                f"protocol='single' changes one feature per sample: n_samples={n_samples} leaves "
                f"some of the up to {features.f_max} features unperturbed (their coefficient is 0); "
                f"use n_samples > {features.f_max}",
                RuntimeWarning,
                stacklevel=4,
            )
        labels = features.labels.reshape(self.ids.shape)
        self.plan = plan_single(
            self.infiller,
            self.ids,
            self.attn,
            labels,
            features.n_features,
            n_samples,
            self.mask_id,
            self.exclude_ids,
            self.generator,
            self.scorer,
            self.predicted,
        )
        return self

    def sample(self, rows: Rows) -> torch.Tensor:
        return self._plan().masks[rows.positions, rows.samples]

    def apply(self, ch: TokenChunk) -> torch.Tensor:
        """Token ids (c, L) of a chunk's rows (see ``SinglePlan.apply``)."""
        return self._plan().apply(ch)

    def _plan(self) -> SinglePlan:
        if self.plan is None:
            raise RuntimeError("SingleSampler.bind() must run first (the engine binds every sampler)")
        return self.plan

    def __repr__(self) -> str:
        return f"SingleSampler(protocol='single', objective={self.infiller.objective!r})"
