"""torchlime: fast, batched, device-side LIME for PyTorch.

Every stage (masks, perturbation, forward pass, kernel, surrogate fit) runs as batched tensor
work on the input's device, for many inputs and targets at once. ``torchlime.stages`` holds the
six stages in pipeline order, ``torchlime.engine`` chains them (``explain``), ``torchlime.methods``
is the method zoo; the modalities are ``image``, ``audio``, ``text``, ``tabular`` and ``series``;
``metrics`` measures explanations and ``dataset`` explains whole data sets.

What the top level exports (``docs/architecture.md``, "What the top level exports"): the
engine and its records, every modality's object and door, the tools, the stages' hooks with their
implementations, and what a call raises or warns; the method zoo and each modality's helpers are
imported from their packages.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from torchlime.accel import Accelerated
from torchlime.audio import Spectrograms, Waveforms, explain_spectrogram, explain_waveform
from torchlime.dataset import explain_dataset, load_results
from torchlime.engine import Call, Config, Explainer, ExplainOptions, FeatureMap, Info, Modality, Prepared, explain
from torchlime.engine.explanation import Explanation
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.image import Images, explain_image
from torchlime.integrations.probe import ProbeExplainer
from torchlime.series import Series, explain_series
from torchlime.stages.forward.errors import ModelCallError
from torchlime.stages.sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from torchlime.stages.surrogate import KLasso, Lasso, Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, UniformKernel
from torchlime.tabular import Tabular, explain_tabular
from torchlime.text import Generation, Tokens, Words, explain_generation, explain_text, explain_tokens

__version__ = "0.2.0.dev0"

__all__ = [
    "explain",
    "Explainer",
    "Explanation",
    "Modality",
    "Prepared",
    "FeatureMap",
    "Config",
    "Call",
    "ExplainOptions",
    "Info",
    "Images",
    "explain_image",
    "Spectrograms",
    "explain_spectrogram",
    "Waveforms",
    "explain_waveform",
    "Tokens",
    "explain_tokens",
    "Words",
    "explain_text",
    "Generation",
    "explain_generation",
    "Tabular",
    "explain_tabular",
    "Series",
    "explain_series",
    "explain_dataset",
    "load_results",
    "ProbeExplainer",
    "Accelerated",
    "Sampler",
    "BernoulliSampler",
    "UniformCountSampler",
    "ShapleySampler",
    "Kernel",
    "ExponentialKernel",
    "UniformKernel",
    "Surrogate",
    "Ridge",
    "Lasso",
    "KLasso",
    "ModelCallError",
    "UnreliableExplanationWarning",
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
