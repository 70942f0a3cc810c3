"""torchlime: fast, batched, device-side LIME for PyTorch.

Every stage (masks, perturbation, forward pass, kernel, surrogate fit) runs as
batched tensor work on the input's device, for many inputs and targets at once.
"""
from .explain import explain
from .explanation import Explanation
from .sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from .surrogate import KLasso, Lasso, Ridge, Surrogate
from .weighting import ExponentialKernel, Kernel, UniformKernel

__version__ = "0.1.0"

__all__ = [
    "explain", "Explanation",
    "Sampler", "BernoulliSampler", "UniformCountSampler", "ShapleySampler",
    "Kernel", "ExponentialKernel", "UniformKernel",
    "Surrogate", "Ridge", "Lasso", "KLasso",
]
