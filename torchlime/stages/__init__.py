"""The six stages of an explanation, in pipeline order.

``features`` (feature maps relabelled per input), ``sampling`` (counter-based bool masks),
``perturb`` (the fill, the fused blend and its record), ``forward`` (the model, chunked passes,
chunk sizes, targets), ``weighting`` (proximity kernels) and ``surrogate`` (the batched fits, on the
normal equations of ``normal``; or on the samples themselves, ``sample_space``, when there are fewer
samples than features). Stages import only each other (and ``torchlime._backend``); the engine chains
them and the methods plug into their hooks.
"""

from torchlime.stages import features, forward, normal, perturb, sample_space, sampling, surrogate, weighting

__all__ = ["features", "sampling", "perturb", "forward", "weighting", "surrogate", "normal", "sample_space"]
