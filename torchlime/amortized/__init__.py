"""Amortized explanations: a small network trained once on LIME labels explains any new input in one forward.

``AmortizedExplainer.fit(model, inputs, modality=...)`` labels the inputs with the batched engine at a
small N (or reads the labels of a finished ``explain_dataset`` folder), trains a head chosen by modality
(``heads``: a conv head for images and spectrograms, an MLP for tables, a token head for token ids, or
your own ``nn.Module``) and measures it on held-out inputs against LIME at a large N (``report``);
``explain(x)`` returns an ordinary ``Explanation`` from one forward, flags inputs far from the training
inputs and, with ``fallback=True``, explains those with the engine instead. ``AmortizedProbe`` keeps one
up to date in a training loop. ``docs/amortized.md`` says when to trust it.
"""

from torchlime.amortized._explainer import DEFAULT_SAMPLES, TABLE_SAMPLES, AmortizedExplainer
from torchlime.amortized._options import FitOptions
from torchlime.amortized._output import AmortizedExplanation
from torchlime.amortized._report import Report, spearman
from torchlime.amortized.heads import ConvHead, MLPHead, TokenHead
from torchlime.amortized.probe import AmortizedProbe
from torchlime.amortized.records import AmortizedRecord, AmortizedRun

__all__ = [
    "DEFAULT_SAMPLES",
    "AmortizedExplainer",
    "AmortizedExplanation",
    "AmortizedProbe",
    "AmortizedRecord",
    "AmortizedRun",
    "ConvHead",
    "FitOptions",
    "MLPHead",
    "Report",
    "TABLE_SAMPLES",
    "TokenHead",
    "spearman",
]
