"""Training the head on its labels, seeded, and the distances that flag inputs far from its training inputs.

``split`` holds out a seeded fraction of the inputs; ``train`` fits the head by Adam on the masked squared
error of the labelled (input, column) pairs (in the labels' overall scale, or each row's in its own:
``row_weights``), in minibatches drawn from a seeded CPU generator, so that a second run on the same
device gives the same weights bit for bit (a head with ``member_outputs``, the tabular ensemble, trains
each member on its own seeded subset); ``Distances`` is the Mahalanobis distance in the head's
penultimate features, fitted on the training inputs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

from torchlime.amortized._options import ROW_FLOOR, Training
from torchlime.amortized.heads import HeadOutput

#: the held-out percentile above which an input is flagged
PERCENTILE = 0.99
#: the share of the training inputs each member of an ensemble head trains on
BAG = 0.8


def split(n: int, holdout: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded training and held-out indices of n inputs (at least one of each when n >= 2).

    Args:
        n: the inputs.
        holdout: the held-out fraction, in [0, 1).
        seed: the permutation's seed.

    Returns:
        long (n - h,) and (h,) indices, each sorted.
    """
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    h = min(max(round(n * holdout), 1 if holdout > 0 and n >= 2 else 0), n - 1)
    return order[h:].sort().values, order[:h].sort().values


def outputs(head: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's (B, K, F + 1) output and (B, D) penultimate features (its output flattened if it gives none)."""
    got: HeadOutput = head(x)
    if isinstance(got, tuple):
        return got[0], got[1]
    return got, got.flatten(1)


def row_weights(values: torch.Tensor, scale: torch.Tensor, floor: float = ROW_FLOOR) -> torch.Tensor:
    """The relative loss's weights: each row's coefficient errors in that row's own scale.

    ``w_ik = s² / (r_ik² + (floor s)²)`` on the coefficients of row (i, k), whose root mean square is
    ``r_ik``, with ``s`` the labels' overall scale; 1 on the intercept. A row of tiny coefficients (a
    saturated probability) then counts as much as any other, which is what its features' order needs;
    the floor bounds the weight of rows whose coefficients are all about 0.

    Args:
        values: (n, K, F + 1) labels (coefficients and intercept).
        scale: 0-d, the labels' overall root mean square.
        floor: the floor of a row's scale, as a fraction of ``scale``.

    Returns:
        (n, K, F + 1) weights of the squared errors.

    Example:
        >>> values = torch.tensor([[[1.0, -1.0, 5.0]], [[0.01, 0.0, 5.0]]])
        >>> row_weights(values, torch.tensor(1.0), floor=0.1)[:, 0]
        tensor([[ 0.9901,  0.9901,  1.0000],
                [99.5025, 99.5025,  1.0000]])
    """
    coef = values[..., :-1]
    rms2 = coef.square().mean(-1, keepdim=True)
    w = scale.square() / (rms2 + (floor * scale).square())
    return torch.cat([w.expand_as(coef), torch.ones_like(values[..., -1:])], dim=-1)


def train(
    head: nn.Module,
    x: torch.Tensor,
    values: torch.Tensor,
    labelled: torch.Tensor,
    training: Training,
    seed: int,
    relative: bool = False,
) -> list[float]:
    """Fit ``head`` to the labels by Adam on the masked mean squared error, in place on the head.

    Args:
        head: the head, on the inputs' device.
        x: (n, *input_shape) training inputs.
        values: (n, K, F + 1) labels (coefficients and intercept).
        labelled: bool (n, K) the labelled pairs.
        training: the epochs, the inputs per step, the learning rate and whether to show a bar.
        seed: the minibatch order's seed.
        relative: weigh each row's coefficient errors by ``row_weights`` (its own scale) instead of 1.

    Returns:
        The mean loss of every epoch (in units of the labels' scale squared).
    """
    from tqdm.auto import tqdm

    scale = values[labelled].square().mean().sqrt().clamp_min(1e-12)
    weights = row_weights(values, scale) if relative else None
    optim = Adam([p for p in head.parameters() if p.requires_grad], training.lr)
    gen = torch.Generator().manual_seed(seed)
    n, losses = x.shape[0], []
    members = getattr(head, "member_outputs", None)
    m = int(getattr(head, "n_members", 0)) if callable(members) else 0
    head.train()
    for _ in tqdm(
        range(training.epochs), desc="torchlime head", unit="epoch", disable=not training.progress, leave=False
    ):
        if m:  # every member on its own seeded subset, in its own order: (m, n') indices
            orders = _bags(m, n, gen).to(x.device)
        else:
            orders = torch.randperm(n, generator=gen).to(x.device).unsqueeze(0)
        total = torch.zeros((), device=x.device)
        for start in range(0, orders.shape[1], training.batch_size):
            idx = orders[:, start : start + training.batch_size]
            mask = labelled[idx].unsqueeze(-1).float()
            out = members(x[idx]) if m and members is not None else outputs(head, x[idx[0]])[0].unsqueeze(0)
            err = ((out - values[idx]) / scale).square() * mask
            err = err if weights is None else err * weights[idx]
            per = err.flatten(-3).sum(-1) / (mask.flatten(-3).sum(-1) * values.shape[-1]).clamp_min(1.0)
            loss = per.sum()
            optim.step(loss)
            total = total + loss.detach() / per.numel() * idx.shape[1]
        losses.append(total / orders.shape[1])
    head.eval()
    return [float(v) for v in torch.stack(losses).tolist()] if losses else []


def _bags(m: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """Long (m, n'): member i's inputs this epoch, a seeded random BAG share of the n, in a random order."""
    keep = max(round(n * BAG), 1) if n >= 10 else n
    return torch.rand(m, n, generator=gen).argsort(1)[:, :keep]


class Adam:
    """Adam (Kingma and Ba, 2015) with its default moments (0.9, 0.999) and eps 1e-8, on a list of parameters.

    Written here rather than taken from ``torch.optim``, whose first use imports the compiler stack (seconds
    on a small machine) for a head of a few thousand weights.
    """

    def __init__(self, params: list[torch.Tensor], lr: float, betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params, self.lr, self.betas, self.steps = params, lr, betas, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self, loss: torch.Tensor) -> None:
        """One step down the gradient of ``loss`` (0-d) with respect to the parameters."""
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        self.steps += 1
        b1, b2 = self.betas
        lr = self.lr * (1 - b2**self.steps) ** 0.5 / (1 - b1**self.steps)
        with torch.no_grad():
            for p, g, m, v in zip(self.params, grads, self.m, self.v):
                if g is None:
                    continue
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.sub_(lr * m / (v.sqrt() + 1e-8))


@dataclass
class Distances:
    """Mahalanobis distances in the head's penultimate features, from the training inputs' mean and covariance.

    Attributes:
        mean: float64 (D,) the training inputs' mean.
        precision: float64 (D, D) the inverse of their covariance, shrunk toward its mean variance.
        threshold: the held-out inputs' 99th percentile of the distance, or the training inputs' where it is
            larger (a small held-out split can miss the tail); inf without held-out inputs.
    """

    mean: torch.Tensor
    precision: torch.Tensor
    threshold: float

    @classmethod
    def fit(cls, train: torch.Tensor, held: torch.Tensor, shrink: float = 0.1) -> Distances:
        """Fit on (n, D) training features; the threshold from (h, D) held-out features.

        Args:
            train: (n, D) penultimate features of the training inputs.
            held: (h, D) those of the held-out inputs (their 99th percentile, at least the training inputs',
                is the threshold).
            shrink: weight of the mean variance in the shrunk covariance.

        Returns:
            The fitted distances.
        """
        z = train.double()
        mean = z.mean(0)
        centred = z - mean
        cov = centred.T @ centred / max(z.shape[0] - 1, 1)
        d = cov.shape[0]
        target = cov.diagonal().mean().clamp_min(1e-12) * torch.eye(d, dtype=cov.dtype, device=cov.device)
        precision = torch.linalg.inv((1 - shrink) * cov + shrink * target)
        fitted = cls(mean, precision, float("inf"))
        if held.shape[0]:
            # a small held-out split can miss the tail (a table's outliers): the training inputs' own
            # percentile, which lies below an independent sample's as a rule, bounds it from below
            fitted.threshold = float(
                torch.maximum(torch.quantile(fitted(held), PERCENTILE), torch.quantile(fitted(train), PERCENTILE))
            )
        return fitted

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """(B, D) features -> float64 (B,) distances."""
        c = z.double().to(self.mean.device) - self.mean
        return ((c @ self.precision) * c).sum(-1).clamp_min(0).sqrt()


def digest(head: nn.Module) -> str:
    """SHA-256 of the head's state dict: every tensor's name, dtype, shape and bytes, in key order."""
    h = hashlib.sha256()
    for name, t in head.state_dict().items():
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
