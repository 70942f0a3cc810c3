"""Text: LIME for text classifiers, over raw strings or token IDs.

``explain_text`` takes strings and a function over strings, or a tokenizer and a token-ID model,
with words as features (``split`` cuts texts as lime does). ``explain_tokens`` explains token ids
with token or word features, hiding them by replacement, deletion (``edits``) or masked-LM infill
(``infill``); ``explain_generation`` (the ``Generation`` modality) explains a causal LM's continuation of
prompts (ids, or text with a tokenizer), whose prompt and generated tokens ``prompt_tokens`` and
``generated_tokens`` read; ``viz`` highlights texts. The embedded sentiment CNN and its data are in
``torchlime.demo``.
"""

from torchlime.text._explain import (
    explain_generation,
    explain_text,
    explain_tokens,
    feature_positions,
    token_features,
    word_ids_from_encoding,
)
from torchlime.text._generated import GenerationInfo, generated_tokens, prompt_tokens
from torchlime.text._generation import Generation
from torchlime.text._tokens import Tokens, TokensInfo
from torchlime.text._words import Words, WordsInfo
from torchlime.text.infill import Infiller
from torchlime.text.proximity import HybridKernel

__all__ = [
    "explain_generation",
    "explain_text",
    "explain_tokens",
    "feature_positions",
    "generated_tokens",
    "prompt_tokens",
    "token_features",
    "word_ids_from_encoding",
    "Generation",
    "GenerationInfo",
    "Infiller",
    "HybridKernel",
    "Tokens",
    "TokensInfo",
    "Words",
    "WordsInfo",
]
