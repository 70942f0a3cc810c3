"""Nested model arguments and outputs for ``accel.Accelerated``: mapped, split, padded and joined.

A model's output may be a tensor or a tuple, list or dict of them (a transformers ``ModelOutput``,
nested); ``Accelerated`` casts every floating tensor of it, and, in fixed-shape mode, slices the
batched tensor arguments into padded chunks and joins the chunks' outputs again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Callable, cast

import torch

from torchlime._util.checks import describe

#: the arguments of a call, by position and by name
Args = tuple[object, ...]
Kwargs = dict[str, object]


def tensor_arguments(args: Args, kwargs: Kwargs) -> list[torch.Tensor]:
    """The tensor arguments, positional first, in order."""
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], out: object) -> object:
    """Apply ``fn`` to every tensor of a (nested) tensor / tuple / list / dict output."""
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        items = [map_tensors(fn, o) for o in out]
        kind: Callable[..., object] = type(out)  # a named tuple takes its fields one by one
        return kind(items) if not hasattr(out, "_fields") else kind(*items)
    if isinstance(out, Mapping):
        return rebuild_mapping(out, {k: map_tensors(fn, v) for k, v in out.items()})
    return out


def rebuild_mapping(template: Mapping[object, object], values: dict[object, object]) -> object:
    """A mapping of the same type as ``template`` (e.g. a transformers ``ModelOutput``) when possible."""
    kind: Callable[..., object] = type(template)
    by_name = cast("dict[str, object]", values)  # other keys make ``kind(**values)`` raise TypeError, caught below
    makers: tuple[Callable[[], object], ...] = (lambda: kind(**by_name), lambda: kind(values))
    for make in makers:
        try:
            return make()
        except Exception:  # noqa: BLE001 - fall back to a plain dict
            continue
    return dict(values)


def concat_outputs(parts: list[object], sizes: list[int]) -> object:
    """Concatenate per-chunk outputs along dim 0 (leaves without a batch dim are taken from part 0)."""
    first = parts[0]  # every part has the structure of the first (outputs of one model)
    if isinstance(first, torch.Tensor):
        tensors = cast("list[torch.Tensor]", parts)
        if first.ndim >= 1 and all(p.shape[0] == s for p, s in zip(tensors, sizes)):
            return torch.cat(tensors)
        return first
    if isinstance(first, (tuple, list)):
        rows = cast("list[Sequence[object]]", parts)
        items = [concat_outputs([p[i] for p in rows], sizes) for i in range(len(first))]
        kind: Callable[..., object] = type(first)
        return kind(items) if not hasattr(first, "_fields") else kind(*items)
    if isinstance(first, Mapping):
        maps = cast("list[Mapping[object, object]]", parts)
        return rebuild_mapping(first, {k: concat_outputs([p[k] for p in maps], sizes) for k in first})
    raise TypeError(
        f"Accelerated with `chunk_size` or `cuda_graphs` needs model outputs made of "
        f"tensors, tuples, lists or dicts to split and join, got {describe(first)}"
    )


def to_float32(t: torch.Tensor) -> torch.Tensor:
    """A floating tensor in float32 (other tensors as they are)."""
    return t.float() if t.is_floating_point() else t


def slice_pad(args: Args, kwargs: Kwargs, n: int, start: int, stop: int, size: int) -> tuple[Args, Kwargs]:
    """Rows ``start:stop`` of every batched tensor argument, padded to ``size`` rows by repeating the last."""

    def one(a: object) -> object:
        if not (isinstance(a, torch.Tensor) and a.ndim and a.shape[0] == n):
            return a
        part = a[start:stop]
        extra = size - (stop - start)
        if extra:
            part = torch.cat((part, part[-1:].expand(extra, *part.shape[1:])))
        return part

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}
