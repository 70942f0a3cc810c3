"""Explanation-quality metrics, batched over inputs and targets, on the inputs' device.

Every metric that perturbs inputs hides features exactly as the explanation did (its recorded
``explanation.perturbation``: the same fill, fused normalisation, token deletion or
replacement, inverse STFT) and runs all rows of all inputs and targets through the model in
one chunked pass (``torchlime.stages.forward.chunking``), and refuses ``inputs`` other than the explained ones.
Explanations without a record (loaded from a file, moved with ``to``) are perturbed as a blend
of ``inputs`` and ``baseline=`` (default: the fill recorded in ``run.baseline`` when it is a
number or a name; random fills then draw from seed 0).

* perturbation curves (``curves``): ``deletion``, ``insertion`` (AUC), ``region_perturbation``
  (MoRF / LeRF, AOPC);
* hiding tests (``faithfulness``): ``label_flip``, ``faithfulness_correlation``;
* captum's definitions (``fidelity``, ``sensitivity``): ``infidelity``, ``max_sensitivity``;
* stability across seeds (``stability``): ``jaccard_topk``, ``kendall_w``;
* ground truth (``agreement``): ``gold_recall``, ``token_roc_auc``, ``feature_mask``;
* a picture (``viz``, matplotlib): ``plot_curves``;
* the model-parameter randomisation sanity check (``randomisation``): ``randomisation_check``.

Any attribution method: the metrics that hide features also take a plain attribution tensor
(captum's, shap's, a Grad-CAM map; per element, or per feature with ``features=``) and its
``target=`` (``attributions``: ``from_attributions`` makes the record they read); ``max_sensitivity``,
the stability metrics and ``randomisation_check`` take Quantus's ``explain_fn(model, inputs)``.

Every metric that runs the model takes how it scores its rows as keywords of one typed set,
``ScoreOptions`` (``batch_size``, ``output``, ``softmax``, ``progress``; ``label_flip``: ``RunOptions``,
without ``softmax``), described there once. ``infidelity`` and ``max_sensitivity`` take their
perturbations explicitly or as the law they are drawn from (``GaussianNoise``, ``UniformNoise``).

Results are (B, T) tensors (per input and target) or (B,).
"""

from torchlime.metrics._noise import GaussianNoise, UniformNoise
from torchlime.metrics._options import RunOptions, ScoreOptions
from torchlime.metrics.agreement import feature_mask, gold_recall, token_roc_auc
from torchlime.metrics.attributions import from_attributions
from torchlime.metrics.curves import Curves, deletion, insertion, region_perturbation
from torchlime.metrics.faithfulness import faithfulness_correlation, label_flip
from torchlime.metrics.fidelity import infidelity
from torchlime.metrics.randomisation import RandomisationResult, randomisation_check
from torchlime.metrics.sensitivity import max_sensitivity
from torchlime.metrics.stability import jaccard_topk, kendall_w
from torchlime.metrics.viz import plot_curves
from torchlime.metrics.width import width_sweep

__all__ = [
    "from_attributions",
    "randomisation_check",
    "RandomisationResult",
    "deletion",
    "insertion",
    "region_perturbation",
    "Curves",
    "label_flip",
    "faithfulness_correlation",
    "infidelity",
    "max_sensitivity",
    "jaccard_topk",
    "kendall_w",
    "gold_recall",
    "token_roc_auc",
    "feature_mask",
    "plot_curves",
    "width_sweep",
    "ScoreOptions",
    "RunOptions",
    "GaussianNoise",
    "UniformNoise",
]
