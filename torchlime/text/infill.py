"""Fluent perturbations: hidden tokens are re-written by a masked language model.

Instead of a ``[MASK]`` token or a deletion, every hidden position gets a token
proposed by a masked LM (in the spirit of LIME-LLM, arXiv 2601.11746): the row
is run through the MLM with its hidden positions set to ``mask_id``, the
logits at those positions are *guarded*, and a replacement is sampled from the
explicit generator (or the argmax is taken) among the top-k survivors.

The guard removes, before anything is chosen:

* the original token itself (a "replacement" equal to it changes nothing);
* special / mask / padding ids (they are not text);
* *synonyms*: tokens whose MLM input-embedding cosine similarity with the
  original exceeds ``synonym_threshold`` (the synonym trap: "great" -> "good"
  leaves the meaning, so the sample would be labelled as hiding a word it
  kept); it screens the best ``k + SYNONYM_MARGIN`` proposals. A position
  with no surviving candidate keeps its original token (and, in the
  single-mask protocol, its sample's mask says the feature was kept).

All of it is batched over rows and positions; MLM calls are sub-batched so the
(rows, L, V) logits stay bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from torchlime._util.checks import check_choice, check_positive_float, check_positive_int, describe
from torchlime.stages.forward.model import eval_mode, model_placement
from torchlime.text.edits import call_token_model
from torchlime.text.proximity import EmbeddingSpec, embedding_matrix

STRATEGIES = ("sample", "argmax")
PROTOCOLS = ("joint", "single")
OBJECTIVES = (None, "neutral", "boundary")
#: logits elements (rows x L x V) per MLM call when ``Infiller.batch_size`` is None
LOGIT_BUDGET = {"cpu": 1 << 25, "cuda": 1 << 28}
#: extra top proposals screened by the synonym guard beyond k
SYNONYM_MARGIN = 32


@dataclass(frozen=True, eq=False)
class Infiller:
    """How ``explain_tokens(mode="infill")`` re-writes hidden tokens.

    Args:
        mlm: masked LM: a module or callable taking input_ids (c, L) (+ attention
            mask) and returning logits (c, L, V) or an object with ``.logits``.
        mlm_inputs: "positional" ``mlm(ids, mask)``, "keywords" or "ids" ``mlm(ids)``.
        strategy: "sample" (from the generator, softmax(logp / temperature) over
            the top-k) or "argmax".
        protocol: "joint": the engine's masks, all hidden features of a sample
            infilled together from one MLM pass of that sample; "single": the
            single-mask single-sample protocol, every perturbed sample changes
            exactly one feature (round-robin over features).
        objective: with protocol "single": None, "neutral" (prefer replacements
            that keep the predicted label) or "boundary" (prefer ones that flip
            it); both score the top-k candidates of every feature with the
            explained model (F·k extra model calls per input).
        k: candidates kept per position.
        temperature: softmax temperature for "sample".
        synonym_threshold: embedding cosine above which a candidate counts as the
            original (None disables the synonym guard).
        embedding: (V, D) matrix / module for the guard; default: the MLM's input embedding.
        exclude_ids: further ids never proposed.
        batch_size: rows per MLM call (default from a logits-size budget).
    """

    mlm: Callable[..., object]
    mlm_inputs: str = "positional"
    strategy: str = "sample"
    protocol: str = "joint"
    objective: Optional[str] = None
    k: int = 20
    temperature: float = 1.0
    synonym_threshold: Optional[float] = 0.9
    embedding: Optional[EmbeddingSpec] = None
    exclude_ids: Sequence[int] = ()
    batch_size: Optional[int] = None

    def __post_init__(self) -> None:
        if not callable(self.mlm):
            raise TypeError(f"`mlm` must be a callable masked language model, got {describe(self.mlm)}")
        check_choice(self.mlm_inputs, "mlm_inputs", ("positional", "keywords", "ids"))
        check_choice(self.strategy, "strategy", STRATEGIES)
        check_choice(self.protocol, "protocol", PROTOCOLS)
        check_choice(self.objective, "objective", OBJECTIVES)
        if self.objective is not None and self.protocol != "single":
            raise ValueError(f"`objective` {self.objective!r} needs protocol='single', got {self.protocol!r}")
        check_positive_int(self.k, "k")
        check_positive_float(self.temperature, "temperature")
        if self.batch_size is not None:
            check_positive_int(self.batch_size, "batch_size")
        if self.synonym_threshold is not None:
            t = check_positive_float(self.synonym_threshold, "synonym_threshold", allow_zero=True)
            if t > 1.0:
                raise ValueError(f"`synonym_threshold` must be in [0, 1] or None, got {self.synonym_threshold}")
            if self.guard_matrix() is None:
                raise TypeError(
                    "`synonym_threshold` needs an embedding: pass `embedding=` (a (V, D) "
                    f"tensor or nn.Embedding) or an MLM with an input embedding, got mlm "
                    f"{type(self.mlm).__name__} and embedding {describe(self.embedding)}"
                )

    def guard_matrix(self) -> Optional[torch.Tensor]:
        """(V, D) embedding matrix used by the synonym guard (None if there is none)."""
        return embedding_matrix(self.embedding if self.embedding is not None else self.mlm)

    def vocab_size(self) -> Optional[int]:
        """The MLM's vocabulary size when its input embedding reveals it."""
        m = embedding_matrix(self.mlm)
        return None if m is None else int(m.shape[0])


def mlm_output_logits(out: object, rows: int, length: int) -> torch.Tensor:
    """Logits (rows, L, V) from an MLM output (tensor, ``.logits``, dict or tuple)."""
    if not isinstance(out, torch.Tensor):
        if hasattr(out, "logits"):
            out = out.logits
        elif isinstance(out, dict) and "logits" in out:
            out = out["logits"]
        elif isinstance(out, (tuple, list)) and out:
            out = out[0]
    if not isinstance(out, torch.Tensor) or out.ndim != 3 or tuple(out.shape[:2]) != (rows, length):
        raise ValueError(f"the masked LM must return logits of shape ({rows}, {length}, V), got {describe(out)}")
    return out


def is_trivial(
    original: torch.Tensor, proposed: torch.Tensor, matrix: Optional[torch.Tensor], threshold: Optional[float]
) -> torch.Tensor:
    """Bool, same shape: True where ``proposed`` does not count as a perturbation of ``original``.

    That is: equal ids, or (with a matrix and threshold) input-embedding cosine
    similarity above ``threshold``.
    """
    same = proposed == original
    if matrix is None or threshold is None:
        return same
    e = torch.nn.functional.normalize(matrix.float(), dim=1)
    dev = e.device
    cos = (e[original.to(dev)] * e[proposed.to(dev)]).sum(-1).to(original.device)
    return same | (cos > threshold)


def mlm_candidates(
    infiller: Infiller,
    ids: torch.Tensor,
    attn: torch.Tensor,
    hidden: torch.Tensor,
    mask_id: int,
    exclude_ids: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Guarded top-k MLM proposals for every hidden position.

    Args:
        infiller: the ``Infiller`` (masked language model and its guard).
        ids: long (c, L) rows.
        attn: long (c, L) their attention mask.
        hidden: bool (c, L) positions to re-write.
        mask_id: id the hidden positions take in the MLM input.
        exclude_ids: ids never proposed (special, mask, padding).

    Returns:
        ``(cand, logp)``: long (n, k) candidate ids and float32 (n, k) log-probs
        (renormalised over the guarded vocabulary; -inf for empty slots), for the
        n = hidden.sum() positions in row-major order, on ``ids.device``.
    """
    dev = ids.device
    rows = hidden.any(1).nonzero().flatten()
    k = infiller.k
    if rows.numel() == 0:
        return torch.empty(0, k, dtype=torch.long, device=dev), torch.empty(0, k, device=dev)
    m_dev, _ = model_placement(infiller.mlm, ids)
    matrix = infiller.guard_matrix()
    normed = None
    if infiller.synonym_threshold is not None and matrix is not None:
        normed = torch.nn.functional.normalize(matrix.float(), dim=1).to(m_dev)
    length = ids.shape[1]
    vocab = matrix.shape[0] if matrix is not None else (infiller.vocab_size() or 32768)
    budget = LOGIT_BUDGET["cuda" if m_dev.type == "cuda" else "cpu"]
    step = infiller.batch_size or max(1, budget // (length * vocab))
    cands, logps = [], []
    with torch.no_grad(), eval_mode(infiller.mlm):
        for lo in range(0, rows.numel(), step):  # sub-batches of rows, not samples one by one
            r = rows[lo : lo + step]
            hid = hidden[r].to(m_dev)
            x = torch.where(hid, torch.full_like(ids[r], mask_id).to(m_dev), ids[r].to(m_dev))
            out = call_token_model(infiller.mlm, x, attn[r].to(m_dev), infiller.mlm_inputs)
            logits = mlm_output_logits(out, r.numel(), length)[hid].float()  # (n', V), a fresh copy
            orig = ids[r].to(m_dev)[hid]
            vals, idx = _guarded_topk(logits, orig, exclude_ids, normed, infiller.synonym_threshold, k)
            cands.append(idx.to(dev))
            logps.append(vals.to(dev))
    cand, logp = torch.cat(cands), torch.cat(logps)
    if cand.shape[1] < k:  # vocabulary smaller than k: pad with empty slots
        pad = k - cand.shape[1]
        cand = torch.nn.functional.pad(cand, (0, pad))
        logp = torch.nn.functional.pad(logp, (0, pad), value=float("-inf"))
    orig_all = ids[hidden]
    cand = torch.where(torch.isfinite(logp), cand, orig_all.unsqueeze(1))
    return cand, logp


def _guarded_topk(
    logits: torch.Tensor,
    original: torch.Tensor,
    exclude_ids: Sequence[int],
    normed: Optional[torch.Tensor],
    threshold: Optional[float],
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k log-probs and ids of logits (n, V) once excluded ids, originals and synonyms are out.

    Excluded ids and the original token are set to -inf in place (``logits`` must
    be a scratch copy) and the log-probs are renormalised over what is left. The
    synonym check runs on the best ``k + SYNONYM_MARGIN`` proposals only (an
    (n, k + m) similarity instead of (n, V)); if more of them than the margin are
    synonyms, the row keeps fewer than k candidates (empty slots are -inf).
    """
    vocab = logits.shape[-1]
    ex = torch.tensor([i for i in exclude_ids if 0 <= i < vocab], dtype=torch.long, device=logits.device)
    logits.index_fill_(1, ex, float("-inf"))
    logits.scatter_(1, original.unsqueeze(1), float("-inf"))
    norm = torch.logsumexp(logits, -1, keepdim=True)
    norm = torch.where(torch.isfinite(norm), norm, torch.zeros_like(norm))
    guard = normed is not None and threshold is not None
    vals, idx = logits.topk(min(vocab, k + SYNONYM_MARGIN if guard else k), dim=-1)
    if guard and threshold is not None:
        sim = (normed[idx] * normed[original].unsqueeze(1)).sum(-1)  # type: ignore[index]
        vals = vals.masked_fill(sim > threshold, float("-inf"))
        vals, order = vals.topk(min(k, vals.shape[-1]), dim=-1)
        idx = idx.gather(1, order)
    return vals - norm, idx


def choose(
    logp: torch.Tensor, strategy: str, temperature: float, generator: Optional[torch.Generator]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick one slot per row of log-probs (n, k).

    Returns:
        ``(index, ok)``: long (n,) chosen slot, bool (n,) False where every slot is empty.
    """
    ok = torch.isfinite(logp).any(1)
    if logp.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long, device=logp.device), ok
    safe = torch.where(ok.unsqueeze(1), logp, torch.zeros_like(logp))
    if strategy == "argmax":
        return safe.argmax(1), ok
    probs = (safe / temperature).softmax(1)
    g_dev = generator.device if generator is not None else probs.device
    idx = torch.multinomial(probs.to(g_dev), 1, generator=generator).squeeze(1)
    return idx.to(logp.device), ok


def joint_fill(
    infiller: Infiller,
    ids: torch.Tensor,
    attn: torch.Tensor,
    keep: torch.Tensor,
    mask_id: int,
    exclude_ids: Sequence[int],
    generator: Optional[torch.Generator],
) -> torch.Tensor:
    """Re-write every hidden, attended token of a chunk with an MLM proposal.

    Args:
        infiller: the ``Infiller`` (masked language model and its guard).
        ids: long (c, L) rows.
        attn: long (c, L) their attention mask.
        keep: bool (c, L) the tokens kept (fixed tokens are always kept).
        mask_id: id the hidden positions take in the MLM input.
        exclude_ids: ids never proposed (special, mask, padding).
        generator: the random generator of the proposals' draws (None: the global one).

    Returns:
        long (c, L) ids; hidden tokens differ from the original (and from its
        synonyms) unless no candidate survived the guard.
    """
    hidden = ~keep & (attn != 0)
    cand, logp = mlm_candidates(infiller, ids, attn, hidden, mask_id, exclude_ids)
    slot, _ = choose(logp, infiller.strategy, infiller.temperature, generator)
    new = cand.gather(1, slot.unsqueeze(1)).squeeze(1)
    return ids.masked_scatter(hidden, new.to(ids.dtype))
