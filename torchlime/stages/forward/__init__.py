"""Stage 4: the forward passes.

The model's side (``model``), the chunked passes (``passes``), the chunk-size policy (``chunking``)
and the targets the outputs are gathered for (``targets``).
"""

from torchlime.stages.forward import chunking, model, passes, targets

__all__ = ["model", "passes", "chunking", "targets"]
