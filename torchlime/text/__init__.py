"""Text: LIME for token-ID classifiers.

``explain_tokens`` builds token or word features and a perturbation (replace, delete,
masked-LM infill), then calls the engine once. Submodules: ``perturb`` (token
perturbations), ``infill`` (``Infiller``), ``kernel`` (``HybridKernel``), ``viz`` (HTML and
bar charts), ``data`` and ``models`` (the embedded sentiment CNN and its planted rationales).
"""

from torchlime.text._explain import explain_tokens, feature_positions, token_features, word_ids_from_encoding
from torchlime.text.infill import Infiller
from torchlime.text.proximity import HybridKernel

__all__ = [
    "explain_tokens",
    "feature_positions",
    "token_features",
    "word_ids_from_encoding",
    "Infiller",
    "HybridKernel",
]
