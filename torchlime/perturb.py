"""Stage 3: perturbed model inputs.

The masks (B, S, F) are expanded through the feature maps and blended with the
baseline, one chunk of rows of the flattened (B·S) batch at a time:

    x[b, s] = where(Z[b, s, features[b]], inputs[b], baseline[b])

There is no Python loop over samples or features: one gather and one ``where``
per chunk. ``_backend`` may replace this with a fused Triton kernel on CUDA.
"""
from __future__ import annotations

import torch

from . import _backend


def perturb_chunk(inputs: torch.Tensor, baseline: torch.Tensor, labels: torch.Tensor,
                  masks: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """Build rows ``start:stop`` of the flattened (B·S, ...) perturbed batch.

    Args:
        inputs: (B, *shape) explained inputs.
        baseline: (B, *shape) what hidden features become.
        labels: long (B, *fshape), feature ids 0..F_b-1, ``fshape`` broadcastable to ``shape``.
        masks: bool (B, S, F).
        start, stop: row range in the flattened B·S order (input-major).

    Returns:
        (stop - start, *shape) tensor in ``inputs.dtype``.
    """
    n_samples = masks.shape[1]
    flat_masks = masks.reshape(-1, masks.shape[-1])[start:stop]  # (c, F)
    first, last = start // n_samples, (stop - 1) // n_samples
    if first == last:  # the whole chunk explains one input: broadcast, don't gather
        sel = slice(first, first + 1)
        x, base, lab = inputs[sel], baseline[sel], labels[sel]
    else:
        rows = torch.arange(start, stop, device=inputs.device) // n_samples
        x, base, lab = inputs[rows], baseline[rows], labels[rows]
    return _backend.blend(x, base, lab, flat_masks)


def blend_reference(x: torch.Tensor, base: torch.Tensor, labels: torch.Tensor,
                    masks: torch.Tensor) -> torch.Tensor:
    """Torch reference of the fused blend.

    Args:
        x, base: (1 or c, *shape). labels: long (1 or c, *fshape). masks: bool (c, F).

    Returns:
        (c, *shape): ``where(masks[i, labels], x, base)``, exactly (no rounding).

    Floating inputs use ``index_select`` of the masks as floats and ``lerp``,
    which is exact at weights 0 and 1 for finite values and several times
    faster on CPU than a ``gather`` + ``where`` with broadcasting; other dtypes
    (token ids, complex spectra) use ``where``.
    """
    c = masks.shape[0]
    lab = labels.reshape(labels.shape[0], -1)
    if x.is_floating_point() and base.is_floating_point():  # finite: ``explain`` checks once
        weights = masks.to(x.dtype)
        keep = weights.index_select(1, lab[0]) if lab.shape[0] == 1 else weights.gather(1, lab)
        return torch.lerp(base, x, keep.view(c, *labels.shape[1:]))
    keep = masks.gather(1, lab.expand(c, -1)).view(c, *labels.shape[1:])
    return torch.where(keep, x, base)
