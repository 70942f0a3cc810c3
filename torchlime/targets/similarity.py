"""``Similarity``: explain an embedding model by its cosine similarity to reference embeddings.

An image tower against text prompts, a clip against reference clips: T = the number of references, the
same for every input (or given per input).
"""

from __future__ import annotations

import torch

from torchlime._util.checks import check_tensor, describe, from_numpy
from torchlime.targets._records import SimilarityInfo
from torchlime.targets.base import Bound, Target, tensor_output

_KEYS = ("image_embeds", "text_embeds", "embeddings", "pooler_output", "last_hidden_state")


class Similarity(Target):
    """The cosine similarity of the model's embedding to each of R reference embeddings.

    score[row, r] = cos(e(row), reference[r]), with e(row) the model's (rows, D) output (a tensor, or
    the first of ``image_embeds``, ``text_embeds``, ``embeddings``, ``pooler_output``,
    ``last_hidden_state`` in a structured output such as a Hugging Face ``ModelOutput`` or a dict; a
    (rows, L, D) output is mean-pooled over L). The engine's ``output=`` picks another part.

    Args:
        reference: (R, D) embeddings shared by every input, or (B, R, D) one set per input (copied).

    Raises:
        TypeError / ValueError: a reference that is not a floating tensor of finite (R, D) or (B, R, D)
            embeddings; at the call, (B', R, D) references for B != B' inputs or another D than the model's.

    Example:
        >>> import torchlime
        >>> tower = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 8))
        >>> texts = torch.randn(3, 8)                       # three prompts' embeddings
        >>> exp = torchlime.explain(tower, torch.rand(2, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 4,
        ...                         target=Similarity(texts), n_samples=64)
        >>> exp.coef.shape                                   # (B, T = 3 references, F)
        torch.Size([2, 3, 4])
    """

    name = "Similarity"

    def __init__(self, reference: object) -> None:
        given = check_tensor(from_numpy(reference), "reference")
        if not given.is_floating_point():
            raise TypeError(f"`reference` must be floating embeddings, got {describe(given)}")
        if given.ndim not in (2, 3) or given.shape[-2] == 0 or given.shape[-1] == 0:
            raise ValueError(
                f"`reference` must be embeddings (R, D) or (B, R, D) with R >= 1 and D >= 1, got {describe(given)}"
            )
        if not bool(torch.isfinite(given).all()):  # at construction, before any model call
            raise ValueError("`reference` must be finite embeddings, got NaN or inf values")
        self.reference = given.detach().clone()  # a copy: the caller's tensor is never touched

    def check(self, batch: int) -> None:
        """Refuse per-input references of another batch size.

        Args:
            batch: B, the number of inputs.

        Raises:
            ValueError: (B', R, D) references with B' != B.
        """
        if self.reference.ndim == 3 and self.reference.shape[0] != batch:
            raise ValueError(
                f"`reference` of shape {tuple(self.reference.shape)} must hold one set per input ({batch})"
            )

    def bind(self, reference: object, batch: int) -> Bound:
        """Every input explains all R references.

        Args:
            reference: the model's raw output for the B unperturbed inputs.
            batch: B.

        Returns:
            The bound target: labels (B, R) the reference indices 0..R-1.

        Raises:
            ValueError: embeddings of another width D than the references'.
        """
        emb = _embedding(reference)
        ref = self.reference.to(emb.device, torch.float32)
        if ref.shape[-1] != emb.shape[-1]:
            raise ValueError(f"`reference` embeddings have {ref.shape[-1]} dims, the model's have {emb.shape[-1]}")
        ref = torch.nn.functional.normalize(ref, dim=-1)
        r = ref.shape[-2]
        shared = ref.ndim == 2

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            e = torch.nn.functional.normalize(_embedding(out, rows.shape[0]), dim=-1)
            if shared:  # one set for every input: one matrix product, no per-row copy of the references
                return e @ ref.T
            return torch.einsum("cd,crd->cr", e, ref.index_select(0, rows.to(ref.device)))

        labels = torch.arange(r, device=emb.device).expand(batch, r)
        valid = torch.ones(batch, r, dtype=torch.bool, device=emb.device)
        return Bound(labels, valid, score, SimilarityInfo(), all_valid=True)


def _embedding(out: object, rows: int | None = None) -> torch.Tensor:
    e = tensor_output(out, "Similarity", _KEYS, rows).float()
    if e.ndim == 3:
        e = e.mean(1)
    if e.ndim != 2:
        raise ValueError(f"Similarity needs (rows, D) embeddings from the model, got shape {tuple(e.shape)}")
    return e
