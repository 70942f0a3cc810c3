"""Tabular data: lime's ``LimeTabularExplainer``, batched on the device.

``explain_tabular`` explains (B, D) rows of a tabular model (``Tabular`` is the same as a
modality for ``torchlime.Explainer``; its explanations carry a ``TabularInfo``): every column is a feature,
"the value stays in the instance's bin (quartile, decile or entropy) or category";
samples are drawn as lime draws them from the training statistics (``fit_stats``), weighted
by lime's kernel on the scaled rows, and fitted by the engine in one batched call.
``conditions`` writes the explanation as lime does ("1.60 < petal length <= 4.35").
"""

from torchlime.tabular._conditions import bin_condition, conditions
from torchlime.tabular._discretize import DISCRETIZERS, entropy_bins, quantile_bins
from torchlime.tabular._explain import explain_tabular
from torchlime.tabular._info import TabularInfo
from torchlime.tabular._proximity import ScaledEuclideanKernel, default_width
from torchlime.tabular._sample import TabularPerturbation, TabularSampler, keep_probability
from torchlime.tabular._tabular import Tabular
from torchlime.tabular.stats import TabularStats, fit_stats

__all__ = [
    "Tabular",
    "TabularInfo",
    "explain_tabular",
    "conditions",
    "bin_condition",
    "fit_stats",
    "TabularStats",
    "TabularSampler",
    "TabularPerturbation",
    "ScaledEuclideanKernel",
    "keep_probability",
    "default_width",
    "quantile_bins",
    "entropy_bins",
    "DISCRETIZERS",
]
