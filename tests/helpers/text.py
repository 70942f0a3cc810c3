"""Small token models for the text tests: a position-aware classifier, a recorder and toy MLMs."""

from __future__ import annotations

from typing import Optional

import torch

from tests.helpers import forward_order

CLS, SEP, MASK, PAD = 1, 2, 3, 0
VOCAB = 40


class PositionBag(torch.nn.Module):
    """logits = Σ_l attn_l · E[ids_l] · (1 + l / L): depends on tokens and their positions."""

    def __init__(self, vocab: int = VOCAB, n_out: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Embedding(vocab, n_out)
        self.emb.weight.data = torch.randn(vocab, n_out, generator=g)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        length = input_ids.shape[1]
        pos = 1.0 + torch.arange(length, device=input_ids.device) / length
        w = attention_mask.float() * pos
        return (self.emb(input_ids) * w.unsqueeze(-1)).sum(1)


class Recorder(torch.nn.Module):
    """Wraps a model and keeps a copy of every (input_ids, attention_mask) batch it sees."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self.calls.append((input_ids.clone(), attention_mask.clone()))
        return self.model(input_ids, attention_mask)

    def perturbed(self, batch: int, n_samples: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The engine's B x S rows (the last ones it saw), in input-major (B·S) order."""
        order = forward_order(batch, n_samples).flatten()
        ids = torch.cat([c[0] for c in self.calls])[-batch * n_samples :][order]
        attn = torch.cat([c[1] for c in self.calls])[-batch * n_samples :][order]
        return ids, attn


class CheatMLM(torch.nn.Module):
    """A masked LM that 'knows' preferred tokens per position.

    logits[c, l] = 10 at ``favourite[l]``, 5 at ``second[l]`` (if given), a small
    deterministic ramp elsewhere. With ``favourite`` = the original ids, an
    unguarded MLM would give every token back.
    """

    def __init__(
        self,
        favourite: torch.Tensor,
        vocab: int = VOCAB,
        second: Optional[torch.Tensor] = None,
        embedding: Optional[torch.Tensor] = None,
    ) -> None:
        super().__init__()
        self.register_buffer("favourite", favourite.long())
        self.register_buffer("second", (second if second is not None else favourite).long())
        emb = embedding if embedding is not None else torch.randn(vocab, 8, generator=torch.Generator().manual_seed(1))
        self.emb = torch.nn.Embedding.from_pretrained(emb.float(), freeze=True)
        self.vocab = vocab

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        c, length = input_ids.shape
        base = torch.linspace(0, 1, self.vocab).expand(c, length, self.vocab).clone()
        base.scatter_(2, self.second[:length].expand(c, length).unsqueeze(2), 5.0)
        base.scatter_(2, self.favourite[:length].expand(c, length).unsqueeze(2), 10.0)
        return base


class ToyMLM(torch.nn.Module):
    """Random embedding + linear head: logits (c, L, V)."""

    def __init__(self, vocab: int = VOCAB, dim: int = 8, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.emb = torch.nn.Embedding(vocab, dim)
        self.out = torch.nn.Linear(dim, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.out(self.emb(input_ids))


def batch_with_padding() -> tuple[torch.Tensor, torch.Tensor]:
    """ids/mask (3, 10): [CLS] tokens [SEP] [PAD]..., rows of 8, 5 and 6 real tokens."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(4, VOCAB, (3, 10), generator=g)
    attn = torch.zeros(3, 10, dtype=torch.long)
    for row, n in enumerate((8, 5, 6)):
        ids[row, 0] = CLS
        ids[row, n + 1] = SEP
        ids[row, n + 2 :] = PAD
        attn[row, : n + 2] = 1
    return ids, attn
