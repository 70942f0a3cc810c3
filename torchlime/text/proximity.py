"""The hybrid text kernel: proximity from what the perturbed text *says*, not from the mask.

For a perturbed row and its original, with ``a`` the bag-of-words share::

    w = a · cos(bow(perturbed), bow(original)) + (1 - a) · cos(ē(perturbed), ē(original))

``bow`` is the token multiset (count vector over the vocabulary) and ``ē`` the
mean of the tokens' embedding vectors from a given embedding matrix (V, D).
Only attended tokens that are not in ``ignore_ids`` (special, mask, padding
ids) count. An empty side has similarity 0; the weight is clamped at 0.

Mask-space kernels give every sample that hides one word the same weight; this
one tells a fluent near-paraphrase (high weight) from a replacement that
changes the meaning (low weight), which is what infill perturbations need.
Everything is batched tensor work; the multiset dot products use the (c, L, L)
token-equality tensor (no (c, V) count matrix) and the pooled embeddings one
fused ``embedding_bag``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Union

import torch
from torch import nn

from torchlime._util.checks import check_positive_float, describe
from torchlime.stages.weighting import Kernel

EmbeddingSpec = Union[torch.Tensor, nn.Module]


def embedding_matrix(source: object) -> Optional[torch.Tensor]:
    """The (V, D) input-embedding matrix of a tensor, ``nn.Embedding`` or model.

    Models are searched for ``get_input_embeddings()`` (Hugging Face) first, then
    for their first ``nn.Embedding``. Returns None when nothing is found.
    """
    if isinstance(source, torch.Tensor):
        return source.detach() if source.ndim == 2 else None
    if isinstance(source, nn.Embedding):
        return source.weight.detach()
    getter = getattr(source, "get_input_embeddings", None)
    if callable(getter):
        try:
            emb = getter()
        except (NotImplementedError, AttributeError):
            emb = None
        if isinstance(emb, nn.Embedding):
            return emb.weight.detach()
    if isinstance(source, nn.Module):
        for mod in source.modules():
            if isinstance(mod, nn.Embedding):
                return mod.weight.detach()
    return None


def counted(ids: torch.Tensor, attn: torch.Tensor, ignore: torch.Tensor) -> torch.Tensor:
    """Bool (c, L): attended tokens whose id is not in ``ignore`` (long (k,))."""
    return (attn != 0) & ~torch.isin(ids, ignore)


def pair_count(a: torch.Tensor, va: torch.Tensor, b: torch.Tensor, vb: torch.Tensor) -> torch.Tensor:
    """Dot products of token-count vectors, Σ_ij [a_i == b_j] va_i vb_j, float32 (c,).

    Args:
        a: long (c, L) or (1, L) token ids.
        va: bool, shape of ``a``: the counted tokens of ``a``.
        b: long (c, L) or (1, L) token ids.
        vb: bool, shape of ``b``: the counted tokens of ``b``.
    """
    eq = (a.unsqueeze(2) == b.unsqueeze(1)) & va.unsqueeze(2) & vb.unsqueeze(1)
    return eq.sum((1, 2), dtype=torch.float32)


def bow_cosine(
    ids: torch.Tensor,
    valid: torch.Tensor,
    ref_ids: torch.Tensor,
    ref_valid: torch.Tensor,
    ref_norm2: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Cosine similarity of the token multisets of two batches of rows.

    Args:
        ids: long (c, L) token ids.
        valid: bool (c, L) the counted tokens of ``ids``.
        ref_ids: long (c, L) or (1, L) reference token ids.
        ref_valid: bool, shape of ``ref_ids``: the counted reference tokens.
        ref_norm2: optional precomputed ``pair_count(ref, ref)`` (c,).

    Returns:
        float32 (c,); 0 where either multiset is empty.
    """
    cross = pair_count(ids, valid, ref_ids, ref_valid)
    if ref_norm2 is None:
        ref_norm2 = pair_count(ref_ids, ref_valid, ref_ids, ref_valid)
    norm = torch.sqrt(pair_count(ids, valid, ids, valid) * ref_norm2)
    return torch.where(norm > 0, cross / norm.clamp_min(1e-12), torch.zeros_like(cross))


def mean_embedding(ids: torch.Tensor, valid: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """Mean of the counted tokens' embedding rows, (c, D) in the matrix dtype (0 for an empty row).

    One fused ``embedding_bag``: the (c, L, D) gathered embeddings are never built.
    """
    v = valid.to(device=matrix.device, dtype=matrix.dtype)
    w = v / v.sum(1, keepdim=True).clamp_min(1)
    return torch.nn.functional.embedding_bag(ids.to(matrix.device), matrix, per_sample_weights=w, mode="sum")


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine similarity of (c, D) and (c or 1, D), float32 (c,)."""
    a, b = a.float(), b.float()
    sim: torch.Tensor = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1)).clamp_min(1e-12)  # Tensor.norm is Any
    return sim


def mean_embedding_cosine(
    ids: torch.Tensor, valid: torch.Tensor, ref_ids: torch.Tensor, ref_valid: torch.Tensor, matrix: torch.Tensor
) -> torch.Tensor:
    """Cosine similarity of mean-pooled embeddings (float32 (c,); 0 for an empty side)."""
    a, b = mean_embedding(ids, valid, matrix), mean_embedding(ref_ids, ref_valid, matrix)
    sim = _cosine(a, b)
    empty = (valid.sum(1) == 0) | (ref_valid.sum(1) == 0)
    return sim.to(ids.device).masked_fill(empty, 0.0)


@dataclass(frozen=True, eq=False)
class HybridKernel(Kernel):
    """Weights from bag-of-words and embedding similarity between perturbed and original text.

    Pass it as ``kernel=`` to ``explain_tokens``: it is an input-space kernel, so the
    engine calls ``distances`` on every chunk of perturbed (packed) token rows before
    the model sees it; the distance is ``1 - w`` and the weight ``w``.

    Args:
        embedding: (V, D) matrix, an ``nn.Embedding``, or a model whose input
            embedding is used (e.g. the masked LM of an ``Infiller``).
        alpha: share of the bag-of-words cosine, in [0, 1] (1 - alpha goes to embeddings).
        ignore_ids: token ids never counted (``explain_tokens`` adds the special,
            mask and padding ids).
    """

    embedding: EmbeddingSpec
    alpha: float = 0.5
    ignore_ids: Sequence[int] = ()
    space = "input"  # a class attribute, not a field

    def __post_init__(self) -> None:
        a = check_positive_float(self.alpha, "alpha", allow_zero=True)
        if a > 1.0:
            raise ValueError(f"`alpha` must be in [0, 1], got {self.alpha}")
        if embedding_matrix(self.embedding) is None:
            raise TypeError(
                f"`embedding` must be a (V, D) tensor, an nn.Embedding or a model with an "
                f"input embedding, got {describe(self.embedding)}"
            )

    @property
    def matrix(self) -> torch.Tensor:
        """The (V, D) embedding matrix."""
        return embedding_matrix(self.embedding)  # type: ignore[return-value]

    def weights(
        self,
        ids: torch.Tensor,
        attn: torch.Tensor,
        ref_ids: torch.Tensor,
        ref_attn: torch.Tensor,
        ignore_ids: Sequence[int] = (),
        rows: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Hybrid similarity of perturbed rows to their originals.

        Args:
            ids: (c, L) perturbed token ids.
            attn: (c, L) their attention mask.
            ref_ids: (c, L) or (1, L) the originals' ids, or (B, L) with ``rows``.
            ref_attn: the originals' attention mask, shape of ``ref_ids``.
            ignore_ids: extra ids not counted, on top of ``self.ignore_ids``.
            rows: optional long (c,) original of every perturbed row (the originals'
                norms and pooled embeddings are then computed once per original).

        Returns:
            float32 (c,) weights in [0, 1].
        """
        ignore = torch.tensor(
            sorted({*map(int, self.ignore_ids), *map(int, ignore_ids)}), dtype=torch.long, device=ids.device
        )
        v, rv = counted(ids, attn, ignore), counted(ref_ids, ref_attn, ignore)
        pick: Callable[[torch.Tensor], torch.Tensor] = (
            (lambda t: t[rows.to(t.device)]) if rows is not None else (lambda t: t)
        )
        w = torch.zeros(ids.shape[0], dtype=torch.float32, device=ids.device)
        if self.alpha > 0:
            norm2 = pick(pair_count(ref_ids, rv, ref_ids, rv))
            w = w + self.alpha * bow_cosine(ids, v, pick(ref_ids), pick(rv), norm2)
        if self.alpha < 1:
            m = self.matrix
            a, b = mean_embedding(ids, v, m), pick(mean_embedding(ref_ids, rv, m))
            sim = _cosine(a, b)
            empty = (v.sum(1) == 0) | (pick(rv).sum(1) == 0)
            w = w + (1.0 - self.alpha) * sim.to(ids.device).masked_fill(empty, 0.0)
        return w.clamp_min(0.0)

    def distances(self, perturbed: torch.Tensor, inputs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Distances ``1 - w`` of packed token rows to their originals.

        Args:
            perturbed: (c, 2, L) packed perturbed rows (ids, attention mask).
            inputs: (B, 2, L) packed originals.
            rows: long (c,) the original of every perturbed row.

        Returns:
            float32 (c,) distances in [0, 1].
        """
        w = self.weights(perturbed[:, 0], perturbed[:, 1], inputs[:, 0], inputs[:, 1], rows=rows)
        return 1.0 - w

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """Weights ``1 - d``, clamped at 0.

        Args:
            distances: (c,) distances from ``distances``.

        Returns:
            (c,) weights.
        """
        return (1.0 - distances).clamp_min(0.0)

    def __repr__(self) -> str:
        return f"HybridKernel(alpha={self.alpha}, embedding={tuple(self.matrix.shape)})"
