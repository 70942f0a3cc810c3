"""Targets: which output columns of the model each input's surrogates explain.

``target=None`` is the top class of the unperturbed input; an int, a list shared by all
inputs, a (B,) or (B, T) tensor, ``"all"`` or ``"topK"`` (e.g. "top5"). The type and shape
are checked before any model call (``check_target``), the values once the model's output
width is known (``resolve_target``).
"""

from __future__ import annotations

import re
from typing import cast

import torch

from torchlime._checks import check_integer, describe
from torchlime.targets._base import Target
from torchlime.typing import TargetSpec as TargetSpec


def resolve_target(target: TargetSpec, reference: torch.Tensor) -> torch.Tensor:
    """Turn a target specification into long (B, T) output columns.

    Args:
        target: None (top class), an int, ``"all"``, ``"topK"`` (e.g. "top5"), a list of
            ints shared by all inputs, or a long tensor (B,) or (B, T).
        reference: (B, K) model scores of the unperturbed inputs.

    Returns:
        Long (B, T) the output columns of every input.

    Raises:
        ValueError: a column outside [0, K), or a malformed string.
    """
    batch, k = reference.shape
    dev = reference.device
    if target is None:
        return reference.argmax(1, keepdim=True)
    if isinstance(target, str):
        if target == "all":
            return torch.arange(k, device=dev).expand(batch, k)
        m = re.fullmatch(r"top(\d+)", target)
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"`target` string must be 'all' or 'topK' (e.g. 'top5'), got {target!r}")
        return reference.topk(min(int(m.group(1)), k), dim=1).indices
    if isinstance(target, int) and not isinstance(target, bool):
        if not 0 <= target < k:
            raise ValueError(f"`target` must be in [0, {k}) for a model with {k} outputs, got {target}")
        return torch.full((batch, 1), target, dtype=torch.long, device=dev)
    if isinstance(target, (list, tuple)):
        bad = [t for t in target if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < k]
        if bad or not target:
            raise ValueError(
                f"`target` list must hold ints in [0, {k}) for a model with {k} outputs, got {list(target)}"
            )
        return torch.as_tensor(target, dtype=torch.long, device=dev).reshape(1, -1).expand(batch, -1)
    t = cast(torch.Tensor, target).to(dev).long()  # a tensor, checked by ``check_target``
    t = t.unsqueeze(1) if t.ndim == 1 else t
    lo, hi = torch.stack((t.min(), t.max())).tolist()
    if lo < 0 or hi >= k:
        bad = torch.unique(t[(t < 0) | (t >= k)]).tolist()
        raise ValueError(f"`target` must be in [0, {k}) for a model with {k} outputs, got {bad}")
    return t


def check_target(target: object, batch: int) -> None:
    """Check the type and shape of ``target`` before any model call (values are checked later).

    Args:
        target: the ``target`` argument (see ``resolve_target``).
        batch: B, the number of inputs.

    Raises:
        TypeError / ValueError: a target of the wrong type or shape.
    """
    if isinstance(target, Target):
        target.check(batch)
        return
    if isinstance(target, str):
        m = re.fullmatch(r"top(\d+)", target)
        if target != "all" and (not m or int(m.group(1)) < 1):
            raise ValueError(f"`target` string must be 'all' or 'topK' (e.g. 'top5'), got {target!r}")
        return
    if target is None or (isinstance(target, int) and not isinstance(target, bool)):
        return
    if isinstance(target, (list, tuple)):
        return
    if isinstance(target, torch.Tensor):
        check_integer(target, "target")
        t = target.unsqueeze(1) if target.ndim == 1 else target
        if t.ndim != 2 or t.shape[0] != batch or t.shape[1] == 0:
            raise ValueError(f"`target` tensor must have shape ({batch},) or ({batch}, T), got {tuple(target.shape)}")
        return
    raise TypeError(
        f"`target` must be None, an int, a string, a list, a tensor or a torchlime.targets object (Boxes, Region, "
        f"Similarity), got {describe(target)}"
    )
