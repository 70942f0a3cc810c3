"""The explainer networks: small heads that map an input to its coefficients and intercept in one forward.

Every head maps a batch (B, *input_shape) to ``(out, hidden)``: ``out`` (B, K, F + 1) holds, for each of
the model's K output columns, the F feature coefficients and, last, the intercept; ``hidden`` (B, D) is the
head's penultimate representation, where ``AmortizedExplainer`` measures how far an input is from the
training inputs. A user's own ``nn.Module`` may return ``out`` alone (the distances are then measured on
``out`` itself).

The built-in heads share one idea: a per-position trunk (convolutions over pixels or time-frequency
cells, embeddings and convolutions over token positions, an MLP over table columns), then each feature's
positions are averaged (``pooling``) so that any fixed feature map (a grid, given segments, word groups)
gets one vector per feature, which a small layer turns into its K coefficients. The inputs are
standardised with statistics of the training inputs (``shift``, ``scale``) and the outputs multiplied
by the labels' scale (``out_scale``), all buffers of the state dict.
"""

from __future__ import annotations

from typing import Optional, Union

import torch
from torch import nn

from torchlime._util.checks import describe

__all__ = ["ConvHead", "MLPHead", "TokenHead", "pooling"]

#: what a head returns: ``out`` (B, K, F + 1), or ``(out, hidden (B, D))``
HeadOutput = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]


def pooling(features: torch.Tensor, n_features: int) -> torch.Tensor:
    """The averaging matrix of a feature map: column f averages the positions of feature f.

    Args:
        features: long (P,) feature id of each position, 0..F-1, or negative (no feature).
        n_features: F.

    Returns:
        float (P, F), each column summing to 1 (0 for a feature without positions).

    Example:
        >>> pooling(torch.tensor([0, 0, 1, -1]), 2)
        tensor([[0.5000, 0.0000],
                [0.5000, 0.0000],
                [0.0000, 1.0000],
                [0.0000, 0.0000]])
    """
    ids = torch.arange(n_features, device=features.device)
    hot = (features.unsqueeze(1) == ids).float()
    return hot / hot.sum(0, keepdim=True).clamp_min(1.0)


class _Head(nn.Module):
    """Shared buffers of the built-in heads: the feature map, the input and output scales."""

    features: torch.Tensor
    shift: torch.Tensor
    scale: torch.Tensor
    out_scale: torch.Tensor

    def __init__(self, positions: int, n_features: int, n_outputs: int, channels: int) -> None:
        super().__init__()
        for name, value in (
            ("positions", positions),
            ("n_features", n_features),
            ("n_outputs", n_outputs),
            ("channels", channels),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, got {describe(value)}")
        self.n_features, self.n_outputs = n_features, n_outputs
        self.arguments: dict[str, int] = {}  # the constructor's arguments, which files keep to rebuild the head
        self.register_buffer("features", torch.zeros(positions, dtype=torch.long))
        self.register_buffer("shift", torch.zeros(channels))
        self.register_buffer("scale", torch.ones(channels))
        self.register_buffer("out_scale", torch.ones(()))

    def calibrate(
        self, features: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor, out_scale: torch.Tensor
    ) -> None:
        """Set the feature map (P,), the input statistics (channels,) and the labels' scale (a 0-d tensor)."""
        with torch.no_grad():
            self.features.copy_(features.reshape(-1))
            self.shift.copy_(shift)
            self.scale.copy_(scale.clamp_min(1e-6))
            self.out_scale.copy_(out_scale)

    def _finish(self, per_feature: torch.Tensor, glob: torch.Tensor, coef: nn.Module, icpt: nn.Module) -> torch.Tensor:
        """(B, D, F) per-feature and (B, D) global vectors -> out (B, K, F + 1), scaled."""
        both = torch.cat([per_feature, glob.unsqueeze(-1).expand_as(per_feature)], dim=1)  # (B, 2D, F)
        c = coef(both.transpose(1, 2)).transpose(1, 2)  # (B, K, F)
        return torch.cat([c, icpt(glob).unsqueeze(-1)], dim=-1) * self.out_scale


class ConvHead(_Head):
    """A small convolutional head for images and spectrograms (B, C, H, W) over a fixed feature map.

    Three 3x3 convolutions (the first two of stride 2) give a (B, width, H/4, W/4) map, resized back to
    (H, W) and averaged over each feature's pixels; per feature, a two-layer MLP of its vector and the
    image's mean vector gives K coefficients; a linear layer of the mean vector the K intercepts.

    Args:
        channels: C.
        height: H.
        width: W.
        n_features: F.
        n_outputs: K, the model's output columns.
        hidden: the trunk's width.

    Example:
        >>> head = ConvHead(3, 8, 8, 4, n_outputs=10)
        >>> out, hidden = head(torch.rand(2, 3, 8, 8))
        >>> out.shape, hidden.shape
        (torch.Size([2, 10, 5]), torch.Size([2, 32]))
    """

    def __init__(
        self, channels: int, height: int, width: int, n_features: int, n_outputs: int, hidden: int = 32
    ) -> None:
        super().__init__(height * width, n_features, n_outputs, channels)
        self.arguments = dict(
            channels=channels, height=height, width=width, n_features=n_features, n_outputs=n_outputs, hidden=hidden
        )
        self.size = (height, width)
        self._cache: Optional[tuple[object, torch.Tensor]] = None
        self.trunk = nn.Sequential(
            nn.Conv2d(channels, hidden, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(hidden, hidden, 3, padding=1),
            nn.ReLU(),
        )
        self.coef = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_outputs))
        self.icpt = nn.Linear(hidden, n_outputs)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C, H, W), or (B, H, W) of one channel -> out (B, K, F + 1), hidden (B, hidden)."""
        x = x.unsqueeze(1) if x.dim() == 3 else x
        x = (x - self.shift.view(1, -1, 1, 1)) / self.scale.view(1, -1, 1, 1)
        h = self.trunk(x)
        glob = h.mean(dim=(2, 3))
        per_feature = h.flatten(2) @ self._pooling(h.shape[-2:])  # (B, D, F)
        return self._finish(per_feature, glob, self.coef, self.icpt), glob

    def _pooling(self, low: tuple[int, ...]) -> torch.Tensor:
        """(h*w, F): the trunk's (h, w) map resized to (H, W) (bilinear) and averaged per feature, as one matrix.

        Resizing and averaging are linear, so they fold into one small matrix, made once per map and size
        (from the resized unit vectors) instead of resizing every batch to full resolution.
        """
        key = (tuple(low), self.features.device, self.features.data_ptr(), self.features._version)
        if self._cache is None or self._cache[0] != key:
            n = low[0] * low[1]
            unit = torch.eye(n, device=self.features.device).view(n, 1, *low)
            up = nn.functional.interpolate(unit, size=self.size, mode="bilinear", align_corners=False)
            self._cache = (key, up.flatten(1) @ pooling(self.features, self.n_features))
        return self._cache[1]


def _stacked(members: int, fan_in: int, fan_out: int) -> tuple[nn.Parameter, nn.Parameter]:
    """(M, fan_in, fan_out) weights and (M, 1, fan_out) biases, uniform within 1 / sqrt(fan_in) as ``nn.Linear``'s."""
    bound = fan_in**-0.5
    weight = torch.empty(members, fan_in, fan_out).uniform_(-bound, bound)
    return nn.Parameter(weight), nn.Parameter(torch.empty(members, 1, fan_out).uniform_(-bound, bound))


class MLPHead(_Head):
    """An MLP head for tabular rows (B, D) over fixed column features: an average of a few small MLPs.

    Each member maps the standardised row z to a hidden vector h (two layers), then each feature's
    coefficient is ``a_f(h) + b_f(h) * z_f`` (z_f the feature's columns averaged): a feature whose value
    sits at the training mean gets little weight unless the member learns otherwise, the shape of LIME's
    coefficients on a table. The members start from different weights and ``train`` fits each on its own
    seeded subset of the inputs; their outputs are averaged (an ensemble, which on a table of a few
    hundred rows is what lifts the rank correlation with LIME at a large N: see ``docs/amortized.md``).

    Args:
        n_inputs: D, the columns.
        n_features: F (columns, or groups of columns).
        n_outputs: K, the model's output columns.
        hidden: the hidden layers' width.
        members: the MLPs averaged.

    Example:
        >>> head = MLPHead(6, 6, n_outputs=2)
        >>> out, hidden = head(torch.rand(3, 6))
        >>> out.shape, hidden.shape, head.member_outputs(torch.rand(3, 6)).shape
        (torch.Size([3, 2, 7]), torch.Size([3, 640]), torch.Size([10, 3, 2, 7]))
    """

    def __init__(self, n_inputs: int, n_features: int, n_outputs: int, hidden: int = 64, members: int = 10) -> None:
        super().__init__(n_inputs, n_features, n_outputs, n_inputs)
        if isinstance(members, bool) or not isinstance(members, int) or members < 1:
            raise ValueError(f"`members` must be a positive int, got {describe(members)}")
        self.arguments = dict(
            n_inputs=n_inputs, n_features=n_features, n_outputs=n_outputs, hidden=hidden, members=members
        )
        self.n_members = members
        # every member's layers stacked on a leading axis: one batched product per layer for all members
        self.w1, self.b1 = _stacked(members, n_inputs, hidden)
        self.w2, self.b2 = _stacked(members, hidden, hidden)
        self.w_out, self.b_out = _stacked(members, hidden, n_outputs * (n_features + 1))
        self.w_gate, self.b_gate = _stacked(members, hidden, n_outputs * n_features)

    def member_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D), or (M, B, D) a batch per member -> (M, B, K, F + 1): every member's output, scaled."""
        return self._members(x)[0]

    def _members(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D) or (M, B, D) -> (M, B, K, F + 1) outputs and (B, M * hidden) hidden vectors."""
        z = (x - self.shift) / self.scale
        z = z.expand(self.n_members, *z.shape) if z.dim() == 2 else z  # (M, B, D)
        zf = (z @ pooling(self.features, self.n_features)).unsqueeze(-2)  # (M, B, 1, F)
        h = torch.relu(torch.baddbmm(self.b1, z, self.w1))
        h = torch.relu(torch.baddbmm(self.b2, h, self.w2))  # (M, B, hidden)
        m, b = h.shape[:2]
        out = torch.baddbmm(self.b_out, h, self.w_out).view(m, b, self.n_outputs, self.n_features + 1)
        gate = torch.baddbmm(self.b_gate, h, self.w_gate).view(m, b, self.n_outputs, self.n_features) * zf
        out = torch.cat([out[..., :-1] + gate, out[..., -1:]], dim=-1)
        return out * self.out_scale, h.transpose(0, 1).reshape(b, m * h.shape[-1])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, D) -> out (B, K, F + 1) (the members' mean), hidden (B, M * hidden)."""
        outs, hidden = self._members(x)
        return outs.mean(0), hidden


class TokenHead(_Head):
    """A token head for token ids (B, L) over fixed positions (or groups of positions).

    Token and position embeddings, two 1-D convolutions of width 3, then each feature's positions
    averaged; ids at or above ``vocab`` share one "unknown" embedding.

    Args:
        vocab: the ids the head knows (0..vocab-1).
        length: L.
        n_features: F.
        n_outputs: K, the model's output columns.
        hidden: the embeddings' width.

    Example:
        >>> head = TokenHead(100, 6, 6, n_outputs=2)
        >>> out, hidden = head(torch.randint(0, 120, (3, 6)))
        >>> out.shape, hidden.shape
        (torch.Size([3, 2, 7]), torch.Size([3, 32]))
    """

    def __init__(self, vocab: int, length: int, n_features: int, n_outputs: int, hidden: int = 32) -> None:
        super().__init__(length, n_features, n_outputs, 1)
        self.arguments = dict(vocab=vocab, length=length, n_features=n_features, n_outputs=n_outputs, hidden=hidden)
        self.vocab = vocab
        self.tokens = nn.Embedding(vocab + 1, hidden)
        self.place = nn.Embedding(length, hidden)
        self.trunk = nn.Sequential(
            nn.Conv1d(hidden, hidden, 3, padding=1), nn.ReLU(), nn.Conv1d(hidden, hidden, 3, padding=1), nn.ReLU()
        )
        self.coef = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_outputs))
        self.icpt = nn.Linear(hidden, n_outputs)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) long -> out (B, K, F + 1), hidden (B, hidden)."""
        ids = ids.long().clamp(0, self.vocab)
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = (self.tokens(ids) + self.place(pos)).transpose(1, 2)  # (B, hidden, L)
        h = self.trunk(h)
        glob = h.mean(dim=2)
        per_feature = h @ pooling(self.features, self.n_features)
        return self._finish(per_feature, glob, self.coef, self.icpt), glob


#: the built-in heads by class name (files name the class; ``AmortizedExplainer.load`` rebuilds it)
HEADS: dict[str, type[nn.Module]] = {"ConvHead": ConvHead, "MLPHead": MLPHead, "TokenHead": TokenHead}
