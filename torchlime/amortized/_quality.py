"""Measuring a trained head on its held-out inputs against LIME at a large N (``Report``'s numbers)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from torchlime.amortized._labels import Labels
from torchlime.amortized._output import explain, need_model
from torchlime.amortized._report import Report, spearman
from torchlime.amortized._state import Trained
from torchlime.engine.explanation import Explanation


def _deletion(amort: Trained, x: torch.Tensor, exps: list[Explanation]) -> tuple[list[Optional[float]], Optional[str]]:
    """Mean deletion AUC of each explanation (the same rebuilt perturbation for all), or Nones and why."""
    from torchlime.metrics import deletion

    model = need_model(amort)
    try:
        aucs = [deletion(model, x, dataclasses.replace(e, perturbation=None)) for e in exps]
    except (TypeError, ValueError) as err:  # a perturbation the metrics cannot rebuild (a modality's own)
        return [None] * len(exps), str(err).split("\n")[0]
    return [float(a.float().nanmean()) for a in aucs if isinstance(a, torch.Tensor)], None


def measure(amort: Trained, held: Labels, n_reference: int, seed: int) -> Report:
    """The ``Report`` of ``amort`` on the held-out inputs and their labels.

    Args:
        amort: the trained explainer.
        held: the held-out inputs and their labels.
        n_reference: N of the reference LIME.
        seed: the labels' seed (the reference uses seed + 1).

    Returns:
        The report.
    """
    x = held.inputs
    cols = held.labelled.float().argmax(-1, keepdim=True)  # each input's first labelled column
    keep = held.labelled.any(-1)
    x, cols, values = x[keep], cols[keep], held.values[keep]
    ref = amort.explainer.explain(
        need_model(amort), x, amort.modality, target=cols, n_samples=n_reference, generator=seed + 1
    )
    mine = explain(amort, x, cols, False, 2)
    label_rows = values.gather(1, cols.unsqueeze(-1).expand(-1, -1, values.shape[-1]))  # (n, 1, F + 1)
    labels = dataclasses.replace(mine, coef=label_rows[..., :-1], intercept=label_rows[..., -1])
    f = ref.coef.shape[-1]
    ours = spearman(mine.coef.reshape(-1, f), ref.coef.reshape(-1, f)).nanmedian()
    theirs = spearman(label_rows[..., :-1].reshape(-1, f), ref.coef.reshape(-1, f)).nanmedian()
    (auc, auc_ref, auc_lab), error = _deletion(amort, x, [mine, ref, labels])
    return Report(
        inputs=int(x.shape[0]),
        reference_samples=n_reference,
        label_samples=amort.label_samples,
        rank_correlation=float(ours),
        rank_correlation_labels=float(theirs),
        deletion_auc=auc,
        deletion_auc_reference=auc_ref,
        deletion_auc_labels=auc_lab,
        deletion_error=error,
    )
