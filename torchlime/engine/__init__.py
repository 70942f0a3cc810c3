"""The engine: ``explain`` chains the six stages (``torchlime.stages``) for a batch of inputs.

``explainer`` (the public entry: ``Explainer`` and ``explain``), ``config`` (how to explain:
``Config``; what to explain: ``Call``; both as the doors' keywords: ``ExplainOptions``), ``modality`` (what
an input kind hands the engine: a ``Modality`` prepares a ``Prepared`` call), the four steps over it
(``resolve`` into ``settings``, ``plan``, ``run``, ``assemble``), ``info`` (the typed records explanations carry),
``explanation`` (the result), ``registry`` (the names of samplers, kernels and surrogates),
``presets`` (other implementations' defaults) and ``quality`` (the check in every explanation).
"""

from torchlime.engine.config import Call, CallOptions, Config, ExplainOptions, documented
from torchlime.engine.explainer import Explainer, explain, explain_with
from torchlime.engine.explanation import Explanation
from torchlime.engine.info import Info
from torchlime.engine.modality import FeatureMap, Modality, Prepared
from torchlime.engine.run_record import RunRecord

__all__ = [
    "Explainer",
    "explain",
    "explain_with",
    "Explanation",
    "Config",
    "Call",
    "ExplainOptions",
    "CallOptions",
    "Modality",
    "Prepared",
    "FeatureMap",
    "Info",
    "RunRecord",
    "documented",
]
