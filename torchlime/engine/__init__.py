"""The engine: ``explain`` chains the six stages (``torchlime.stages``) for a batch of inputs.

``explainer`` (the public entry: ``Explainer`` and ``explain``), ``request`` (what a front door hands
the engine, and the four steps over it: ``resolve``, ``plan``, ``run``, ``assemble``),
``explanation`` (the result), ``registry`` (the names of samplers, kernels and surrogates),
``presets`` (other implementations' defaults) and ``quality`` (the check in every explanation).
"""

from torchlime.engine.explainer import Explainer, explain
from torchlime.engine.explanation import Explanation

__all__ = ["Explainer", "explain", "Explanation"]
