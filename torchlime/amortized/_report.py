"""The quality of an amortized explainer on its held-out inputs, measured at every ``fit`` (``Report``).

The reference is LIME at a large N (the label settings, another seed): the head's coefficients and the
labels' (LIME at the labels' small N) are each compared with it by the rank correlation of their
coefficients (Spearman, over the F features of each held-out input's labelled column), and each
explanation's deletion-curve AUC (``torchlime.metrics.deletion``, lower is better) is given beside the
reference's, all hiding features the same way (the labels' fill, rebuilt from the records).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class Report:
    """The head against LIME at a large N on the held-out inputs (medians over the inputs).

    Attributes:
        inputs: the held-out inputs measured.
        reference_samples: N of the reference LIME.
        label_samples: N of the labels.
        rank_correlation: median Spearman correlation of the head's coefficients with the reference's.
        rank_correlation_labels: the same of the labels (LIME at the labels' N).
        deletion_auc: mean deletion AUC of the head's explanations (lower is better), or None when the
            labels' perturbation cannot be rebuilt by the metrics (``deletion_error`` says why).
        deletion_auc_reference: the same of the reference LIME.
        deletion_auc_labels: the same of the labels.
        deletion_error: why the deletion AUCs are None, else None.
    """

    inputs: int
    reference_samples: int
    label_samples: int
    rank_correlation: float
    rank_correlation_labels: float
    deletion_auc: Optional[float]
    deletion_auc_reference: Optional[float]
    deletion_auc_labels: Optional[float]
    deletion_error: Optional[str] = None

    def as_plain(self) -> dict[str, object]:
        """The report as plain data."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        line = (
            f"on {self.inputs} held-out inputs: rank correlation with LIME at N={self.reference_samples} "
            f"{self.rank_correlation:.3f} (the labels at N={self.label_samples}: {self.rank_correlation_labels:.3f})"
        )
        if self.deletion_auc is not None:
            line += (
                f"; deletion AUC {self.deletion_auc:.4g} (LIME at N={self.reference_samples}: "
                f"{self.deletion_auc_reference:.4g}, the labels: {self.deletion_auc_labels:.4g})"
            )
        return line


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman correlation of each row of a and b (n, F): Pearson's of their ranks (ties broken by order).

    Args:
        a: (n, F) scores.
        b: (n, F) scores.

    Returns:
        float64 (n,) correlations (NaN for a constant row).

    Example:
        >>> spearman(torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[10.0, 30.0, 20.0]]))
        tensor([0.5000], dtype=torch.float64)
    """
    ra = a.double().argsort(-1).argsort(-1).double()
    rb = b.double().argsort(-1).argsort(-1).double()
    ra, rb = ra - ra.mean(-1, keepdim=True), rb - rb.mean(-1, keepdim=True)
    return (ra * rb).sum(-1) / (ra.square().sum(-1) * rb.square().sum(-1)).sqrt()
