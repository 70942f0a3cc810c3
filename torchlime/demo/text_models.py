"""Small text models for the synthetic sentiment task: a CNN classifier and a bigram masked LM.

``TextCNN`` embeds tokens, runs one width-3 convolution (so it sees each token
with its neighbours: "not good" differs from "good"), max-pools over the
attended positions only and classifies. The committed weights
(``torchlime/demo/weights/text_cnn.pt``, trained by ``examples/train_text_model.py``)
load with ``load_text_model``.

``BigramMLM`` is a masked LM with no training loop: it scores a masked position
by ``log P(v | left) + log P(right | v)`` from bigram counts of a corpus, which
is enough to propose fluent, in-distribution replacements on this task.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional, Union

import torch
from torch import nn

#: ``nn.Embedding.from_pretrained``, which torch leaves unannotated, typed
_from_pretrained: Callable[..., nn.Embedding] = nn.Embedding.from_pretrained

DATA_DIR = Path(__file__).resolve().parent / "weights"
WEIGHTS = DATA_DIR / "text_cnn.pt"
VOCAB_FILE = DATA_DIR / "text_vocab.json"


class TextCNN(nn.Module):
    """Embedding -> Conv1d(width 3) -> ReLU -> masked max-pool -> Linear.

    Args:
        vocab_size: V. dim: embedding size. channels: convolution channels.
        n_classes: K. width: convolution width (odd). pad_id: padding id.
    """

    def __init__(
        self, vocab_size: int, dim: int = 32, channels: int = 64, n_classes: int = 2, width: int = 3, pad_id: int = 0
    ) -> None:
        super().__init__()
        self.config = dict(
            vocab_size=vocab_size, dim=dim, channels=channels, n_classes=n_classes, width=width, pad_id=pad_id
        )
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=pad_id)
        self.conv = nn.Conv1d(dim, channels, width, padding=width // 2)
        self.head = nn.Linear(channels, n_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits (c, K) of token ids (c, L); positions with attention_mask == 0 are ignored."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        keep = (attention_mask != 0).unsqueeze(1)  # (c, 1, L)
        x = self.embedding(input_ids) * keep.transpose(1, 2)
        h = torch.relu(self.conv(x.transpose(1, 2)))  # (c, C, L)
        h = h.masked_fill(~keep, float("-inf")).amax(2)
        h = torch.where(torch.isfinite(h), h, torch.zeros_like(h))  # an empty row pools to 0
        out: torch.Tensor = self.head(h)
        return out


def load_text_model(
    weights: Union[str, Path] = WEIGHTS,
    vocab: Union[str, Path] = VOCAB_FILE,
    map_location: Union[str, torch.device] = "cpu",
) -> tuple[TextCNN, list[str]]:
    """The committed sentiment CNN (eval mode, on ``map_location``) and its vocabulary (list of tokens, id order)."""
    state = torch.load(Path(weights), map_location=map_location, weights_only=True)
    model = TextCNN(**state["config"])
    model.load_state_dict(state["state_dict"])
    tokens = json.loads(Path(vocab).read_text())["tokens"]
    return model.to(map_location).eval(), tokens


class BigramMLM(nn.Module):
    """A masked LM from bigram statistics: logits = log P(v | left) + log P(right | v).

    A neighbour that is itself masked (or absent) contributes the unigram prior
    (left) or nothing (right). ``get_input_embeddings()`` returns distributional
    vectors (centred next- and previous-token distributions) for the synonym guard.

    Args:
        log_next: (V, V) log P(next = j | token = i).
        log_unigram: (V,) log P(v).
        mask_id: the mask token.
    """

    def __init__(self, log_next: torch.Tensor, log_unigram: torch.Tensor, mask_id: int) -> None:
        super().__init__()
        left = log_next.clone()
        left[mask_id] = log_unigram  # a masked left neighbour: unigram prior
        right = log_next.T.clone()  # right[j, v] = log P(j | v)
        right[mask_id] = 0.0
        self.register_buffer("left", left)
        self.register_buffer("right", right)
        self.mask_id = mask_id
        prob = log_next.exp()
        vectors = torch.cat([prob, prob.T / prob.T.sum(1, keepdim=True).clamp_min(1e-12)], 1)
        self.vectors: nn.Embedding = _from_pretrained(vectors - vectors.mean(0), freeze=True)

    @classmethod
    def from_corpus(
        cls,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        vocab_size: int,
        mask_id: int,
        smoothing: float = 0.1,
    ) -> BigramMLM:
        """Count bigrams of attended neighbours in a corpus (n, L) with add-``smoothing``."""
        a, b = input_ids[:, :-1], input_ids[:, 1:]
        both = (attention_mask[:, :-1] != 0) & (attention_mask[:, 1:] != 0)
        pairs = (a * vocab_size + b)[both]
        counts = torch.bincount(pairs, minlength=vocab_size * vocab_size).view(vocab_size, vocab_size).double()
        log_next = ((counts + smoothing) / (counts + smoothing).sum(1, keepdim=True)).log().float()
        uni = torch.bincount(input_ids[attention_mask != 0], minlength=vocab_size).double() + smoothing
        return cls(log_next, (uni / uni.sum()).log().float(), mask_id)

    def get_input_embeddings(self) -> nn.Embedding:
        """Distributional token vectors (V, 2V)."""
        return self.vectors

    def forward(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Logits (c, L, V) for every position of ids (c, L)."""
        m = torch.full_like(input_ids[:, :1], self.mask_id)
        left = torch.cat([m, input_ids[:, :-1]], 1)
        right = torch.cat([input_ids[:, 1:], m], 1)
        if attention_mask is not None:  # padding neighbours say nothing
            att = attention_mask != 0
            right = torch.where(torch.cat([att[:, 1:], att[:, :1] & False], 1), right, self.mask_id)
        table_l, table_r = self.get_buffer("left"), self.get_buffer("right")
        return table_l[left] + table_r[right]
