"""The engine: ``explain`` chains the six stages (``torchlime.stages``) for a batch of inputs.

``explainer`` (the public entry), ``run`` (one call's forward pass and accumulated fit),
``explanation`` (the result), ``registry`` (the names of samplers, kernels and surrogates),
``presets`` (other implementations' defaults) and ``quality`` (the check in every explanation).
"""
from torchlime.engine.explainer import explain
from torchlime.engine.explanation import Explanation

__all__ = ["explain", "Explanation"]
