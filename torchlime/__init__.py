"""torchlime: fast, batched, device-side LIME for PyTorch.

Every stage (masks, perturbation, forward pass, kernel, surrogate fit) runs as
batched tensor work on the input's device, for many inputs and targets at once.
The engine's stages are the top-level modules (``features``, ``sampling``,
``baselines``, ``perturb``, ``forward``, ``weighting``, ``surrogate``), chained by
``torchlime.explain`` (module ``engine``), which accepts the methods named in ``registry``;
modality front doors live in ``torchlime.image``, ``torchlime.audio``, ``torchlime.text`` and
``torchlime.tabular``. The method zoo: ``designs`` (stratified, antithetic, Sobol masks), ``shap``
(KernelSHAP), ``bayes`` (BayLIME), ``smile`` (SMILE kernels), ``selection`` (lime's feature
selection), ``pick`` (SP-LIME); ``metrics`` measures explanations, ``dataset`` explains data sets.
"""
from . import _aliases
from .accel import Accelerated
from .audio import explain_spectrogram, explain_waveform
from .bayes import BayesianRidge
from .dataset import explain_dataset, load_results
from .engine import explain
from .explanation import Explanation
from .image import explain_image
from .pick import submodular_pick
from .sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from .selection import Select
from .smile import SmileKernel
from .surrogate import KLasso, Lasso, Ridge, Surrogate
from .tabular import explain_tabular
from .text import HybridKernel, Infiller, explain_tokens, word_ids_from_encoding
from .training import ProbeExplainer
from .weighting import ExponentialKernel, Kernel, UniformKernel

_aliases.install()

__version__ = "0.1.0"

__all__ = [
    "explain", "explain_image", "explain_spectrogram", "explain_waveform", "explain_tokens", "explain_tabular",
    "explain_dataset", "load_results", "Explanation", "Accelerated", "ProbeExplainer", "Infiller", "HybridKernel",
    "word_ids_from_encoding", "Sampler", "BernoulliSampler", "UniformCountSampler", "ShapleySampler",
    "Kernel", "ExponentialKernel", "UniformKernel", "SmileKernel", "Surrogate", "Ridge", "Lasso", "KLasso",
    "BayesianRidge", "Select", "submodular_pick",
]
