"""torchlime: fast, batched, device-side LIME for PyTorch.

Every stage (masks, perturbation, forward pass, kernel, surrogate fit) runs as
batched tensor work on the input's device, for many inputs and targets at once.
"""
from .accel import Accelerated
from .audio import explain_spectrogram, explain_waveform
from .explain import explain
from .explanation import Explanation
from .image import explain_image
from .memory import auto_batch_size
from .text import explain_tokens, word_ids_from_encoding
from .text_infill import Infiller
from .text_kernel import HybridKernel
from .training import ProbeExplainer
from .sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from .surrogate import KLasso, Lasso, Ridge, Surrogate
from .weighting import ExponentialKernel, Kernel, UniformKernel

__version__ = "0.1.0"

__all__ = [
    "explain", "explain_image", "explain_spectrogram", "explain_waveform", "explain_tokens", "Explanation",
    "Accelerated", "auto_batch_size", "ProbeExplainer", "Infiller", "HybridKernel", "word_ids_from_encoding",
    "Sampler", "BernoulliSampler", "UniformCountSampler", "ShapleySampler",
    "Kernel", "ExponentialKernel", "UniformKernel",
    "Surrogate", "Ridge", "Lasso", "KLasso",
]
