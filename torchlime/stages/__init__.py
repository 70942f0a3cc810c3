"""The six stages of an explanation, in pipeline order.

1. ``features``: any integer feature map relabelled to ``0..F_b-1`` per input.
2. ``sampling``: bool masks (c, F) of any block of rows, from a counter-based hash of the key.
3. ``perturb``: the fill (``fills``), the fused blend of a chunk (``blend``) and the record of both
   that metrics replay (``record``).
4. ``forward``: the model's side (``model``), chunked passes (``passes``), chunk sizes
   (``chunking``) and the targets the scores are gathered for (``targets``).
5. ``weighting``: proximity kernels on the masks or on the perturbed inputs.
6. ``surrogate``: weighted normal equations accumulated in blocks, and the batched fits.

Stages import only each other (and the backend door, ``torchlime._backend``); the engine
(``torchlime.engine``) chains them, and the methods (``torchlime.methods``) plug into their hooks.
"""

from torchlime.stages import features, forward, perturb, sampling, surrogate, weighting

__all__ = ["features", "sampling", "perturb", "forward", "weighting", "surrogate"]
