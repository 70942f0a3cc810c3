"""torchlime: fast, batched, device-side LIME for PyTorch.

Every stage (masks, perturbation, forward pass, kernel, surrogate fit) runs as batched tensor
work on the input's device, for many inputs and targets at once. ``torchlime.stages`` holds the
six stages in pipeline order, ``torchlime.engine`` chains them (``explain``), ``torchlime.methods``
is the method zoo; the modality front doors are ``image``, ``audio``, ``text`` and ``tabular``;
``metrics`` measures explanations and ``dataset`` explains whole data sets.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from torchlime.accel import Accelerated
from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.dataset import explain_dataset, load_results
from torchlime.engine import Call, Config, Explainer, ExplainOptions, FeatureMap, Info, Modality, Prepared, explain
from torchlime.engine.explanation import Explanation
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.image import Images, explain_image
from torchlime.methods.baylime import BayesianRidge
from torchlime.methods.feature_selection import Select
from torchlime.methods.smile import SmileKernel
from torchlime.methods.sp_lime import submodular_pick
from torchlime.series import Series, explain_series
from torchlime.stages.forward.errors import ModelCallError
from torchlime.stages.sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from torchlime.stages.surrogate import KLasso, Lasso, Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, UniformKernel
from torchlime.tabular import Tabular, explain_tabular
from torchlime.text import HybridKernel, Infiller, explain_text, explain_tokens, word_ids_from_encoding
from torchlime.training import ProbeExplainer

__version__ = "0.2.0.dev0"

__all__ = [
    "Explainer",
    "explain",
    "explain_image",
    "explain_spectrogram",
    "explain_waveform",
    "explain_tokens",
    "explain_text",
    "explain_tabular",
    "explain_series",
    "explain_dataset",
    "load_results",
    "Explanation",
    "Modality",
    "Prepared",
    "FeatureMap",
    "Config",
    "Call",
    "ExplainOptions",
    "Info",
    "Images",
    "Tabular",
    "Series",
    "UnreliableExplanationWarning",
    "ModelCallError",
    "Accelerated",
    "ProbeExplainer",
    "Infiller",
    "HybridKernel",
    "word_ids_from_encoding",
    "Sampler",
    "BernoulliSampler",
    "UniformCountSampler",
    "ShapleySampler",
    "Kernel",
    "ExponentialKernel",
    "UniformKernel",
    "SmileKernel",
    "Surrogate",
    "Ridge",
    "Lasso",
    "KLasso",
    "BayesianRidge",
    "Select",
    "submodular_pick",
]


#: subpackages not imported by ``import torchlime``, reachable as attributes all the same
_SUBPACKAGES = ("demo", "compat", "integrations", "cli")


def __getattr__(name: str) -> ModuleType:
    """The subpackages that ``import torchlime`` does not import (``torchlime.demo``), as attributes.

    Args:
        name: the attribute.

    Returns:
        The subpackage.

    Raises:
        AttributeError: for any other name.
    """
    if name in _SUBPACKAGES:
        return importlib.import_module(f"torchlime.{name}")
    raise AttributeError(f"module 'torchlime' has no attribute {name!r}")
