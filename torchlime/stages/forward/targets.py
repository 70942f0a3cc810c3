"""Targets: which output columns of the model each input's surrogates explain.

``target=None`` is the top class of the unperturbed input; an int, ``"all"`` or ``"topK"`` (e.g.
"top5") is the same for every input. Lists follow tensors' shapes, one rule at every door: a flat list
of B ints is one class per input, as a (B,) tensor; a list of B rows is T classes per input, as a
(B, T) tensor; one row ``[[3, 5]]`` gives the same classes to every input. A flat list whose length
is not B is refused, with both spellings. The type and shape are checked before any model call
(``check_target``), the values once the model's output width is known (``resolve_target``).
"""

from __future__ import annotations

import re
from typing import Sequence, cast

import torch

from torchlime._util.checks import check_integer, describe
from torchlime.targets.base import Target
from torchlime.typing import TargetSpec as TargetSpec


def resolve_target(target: TargetSpec, reference: torch.Tensor) -> torch.Tensor:
    """Turn a target specification into long (B, T) output columns.

    Args:
        target: None (top class), an int, ``"all"``, ``"topK"`` (e.g. "top5"), a list of B ints
            (one per input), a list of B rows or one row ``[[...]]`` of ints, or a long tensor (B,) or (B, T).
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
        rows = list_rows(target, batch)
        bad = [t for row in rows for t in row if not 0 <= t < k]
        if bad:
            raise ValueError(f"`target` must be in [0, {k}) for a model with {k} outputs, got {sorted(set(bad))}")
        return torch.as_tensor(rows, dtype=torch.long, device=dev).expand(batch, -1)
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
        list_rows(target, batch)
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


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def list_rows(target: Sequence[object], batch: int) -> list[list[int]]:
    """The rows of a list ``target``: B rows of one class, B rows of T classes, or one row for every input.

    Args:
        target: a flat list of B ints (one class per input), a list of B equal-length rows of ints, or one
            row ``[[c1, c2, ...]]`` (the same classes for every input).
        batch: B, the number of inputs.

    Returns:
        (B, T) or (1, T) ints as nested lists (one row: broadcast over the inputs).

    Raises:
        TypeError: items that are not ints (or rows of ints).
        ValueError: a flat list whose length is not B, a row count other than 1 or B, rows of unequal or zero
            length; each message shows both spellings.

    Example:
        >>> list_rows([3, 5], 2), list_rows([[3, 5]], 4)
        ([[3], [5]], [[3, 5]])
    """
    spell = (
        f"a flat list gives one class per input ({batch} ints, as a ({batch},) tensor); the same classes for "
        f"every input are one row, e.g. [[3, 5]]"
    )
    items = list(target)
    if items and all(_is_int(t) for t in items):
        if len(items) != batch:
            raise ValueError(
                f"`target` list of {len(items)} ints for {batch} input(s): {spell}; got {items}"
                + (f" (for these classes for every input: [{items}])" if len(items) <= 16 else "")
            )
        return [[cast(int, t)] for t in items]
    if items and all(isinstance(r, (list, tuple)) for r in items):
        rows: list[list[int]] = [list(cast(Sequence[int], r)) for r in items]
        if any(not _is_int(t) for r in rows for t in r):
            raise TypeError(f"`target` rows must hold ints, got {items}")
        if len(rows) not in (1, batch) or len({len(r) for r in rows}) != 1 or not rows[0]:
            raise ValueError(
                f"`target` rows must be one row (the same classes for every input) or {batch} rows of equal, "
                f"non-zero length (one per input), got {len(rows)} row(s) of lengths {[len(r) for r in rows]}"
            )
        return rows
    raise TypeError(f"`target` list must hold ints or rows of ints ({spell}), got {items}")


def check_shared_target(target: object, where: str) -> None:
    """Refuse per-input targets where the inputs come in batches the caller does not see (data sets, Ray).

    A flat list or a tensor gives one class per input of one call, so it cannot follow a data set cut into
    batches; the same classes for every input are one row ``[[3, 5]]``, and each input's own label is
    ``target="label"``.

    Args:
        target: the ``target`` keyword.
        where: the tool's name, for the message (e.g. "explain_dataset").

    Raises:
        ValueError: a flat list, several rows, or a tensor.
    """
    per_input = isinstance(target, torch.Tensor) or (
        isinstance(target, (list, tuple)) and not (len(target) == 1 and isinstance(target[0], (list, tuple)))
    )
    if per_input:
        shown = f"a tensor of shape {tuple(target.shape)}" if isinstance(target, torch.Tensor) else repr(target)
        raise ValueError(
            f"`target` for {where} must be the same for every input (None, an int, 'topK', 'all', or one row such "
            f"as [[3, 5]]) or target='label' (each input's own label): its inputs come in batches, so a per-input "
            f"list or tensor cannot follow them; got {shown}"
        )
