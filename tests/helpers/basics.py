"""Small deterministic models and feature maps shared by the tests."""

from __future__ import annotations

import torch


class SegmentLinear(torch.nn.Module):
    """Scores = W · (mean of the input over each feature region), per channel summed.

    Linear in the masks when the baseline is constant per feature, so LIME's
    ridge must recover ``W`` up to the per-feature contrast.
    """

    def __init__(self, labels: torch.Tensor, n_features: int, n_out: int = 3, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        onehot = torch.nn.functional.one_hot(labels.flatten(), n_features).float()  # (P, F)
        self.register_buffer("pool", onehot / onehot.sum(0, keepdim=True))
        self.weight = torch.nn.Parameter(torch.randn(n_features, n_out, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        per_pixel = x.mean(1).flatten(1)  # (c, H*W), channels averaged
        return per_pixel @ self.pool @ self.weight


def grid_labels(h: int, w: int, rows: int, cols: int) -> torch.Tensor:
    """Long (h, w) grid of rows x cols rectangles."""
    r = torch.arange(h) * rows // h
    c = torch.arange(w) * cols // w
    return r.view(-1, 1) * cols + c.view(1, -1)


def forward_order(batch: int, n_samples: int) -> torch.Tensor:
    """Long (B, S): the position of sample s of input b in the model's stream of rows (the B
    unperturbed inputs first, then every input's samples 1..S-1, input by input)."""
    b = torch.arange(batch).view(-1, 1)
    s = torch.arange(n_samples).view(1, -1)
    return torch.where(s == 0, b, batch + b * (n_samples - 1) + s - 1)


def pct(value: float) -> str:
    """A fraction as a percentage with one decimal, as the benchmark documents print it."""
    return f"{100 * value:.1f}"


def with_sem(rec: dict) -> str:
    """``mean ± sem`` of a summary record (fractions) in percent, as the benchmark documents print it."""
    return f"{pct(rec['mean'])} ± {pct(rec['sem'])}"


def adjusted_rand_index(a: torch.Tensor, b: torch.Tensor) -> float:
    """Adjusted Rand index of two labellings of the same elements (any shape, any label values):
    1.0 for the same partition (whatever the numbering), about 0 for unrelated ones."""
    _, ia = torch.unique(a.reshape(-1).cpu(), return_inverse=True)
    _, ib = torch.unique(b.reshape(-1).cpu(), return_inverse=True)
    n, nb = ia.numel(), int(ib.max()) + 1
    table = torch.bincount(ia * nb + ib, minlength=(int(ia.max()) + 1) * nb).double()

    def pairs(t: torch.Tensor) -> float:
        return float((t * (t - 1) / 2).sum())

    table = table.view(-1, nb)
    both, rows, cols = pairs(table), pairs(table.sum(1)), pairs(table.sum(0))
    expected = rows * cols / (n * (n - 1) / 2) if n > 1 else 0.0
    top = (rows + cols) / 2
    return 1.0 if top == expected else (both - expected) / (top - expected)
