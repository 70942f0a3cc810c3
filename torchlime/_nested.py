"""Nested model arguments and outputs for ``accel.Accelerated``: mapped, split, padded and joined.

A model's output may be a tensor or a tuple, list or dict of them (a transformers ``ModelOutput``,
nested); ``Accelerated`` casts every floating tensor of it, and, in fixed-shape mode, slices the
batched tensor arguments into padded chunks and joins the chunks' outputs again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import torch

from torchlime._checks import describe

#: the arguments of a call, by position and by name
Args = tuple[Any, ...]
Kwargs = dict[str, Any]


def tensor_arguments(args: Args, kwargs: Kwargs) -> list[torch.Tensor]:
    """The tensor arguments, positional first, in order."""
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], out: Any) -> Any:
    """Apply ``fn`` to every tensor of a (nested) tensor / tuple / list / dict output."""
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        items = [map_tensors(fn, o) for o in out]
        return type(out)(items) if not hasattr(out, "_fields") else type(out)(*items)
    if isinstance(out, Mapping):
        return rebuild_mapping(out, {k: map_tensors(fn, v) for k, v in out.items()})
    return out


def rebuild_mapping(template: Mapping[Any, Any], values: dict[Any, Any]) -> Any:
    """A mapping of the same type as ``template`` (e.g. a transformers ``ModelOutput``) when possible."""
    kind: Callable[..., Any] = type(template)
    makers: tuple[Callable[[], Any], ...] = (lambda: kind(**values), lambda: kind(values))
    for make in makers:
        try:
            return make()
        except Exception:  # noqa: BLE001 - fall back to a plain dict
            continue
    return dict(values)


def concat_outputs(parts: list[Any], sizes: list[int]) -> Any:
    """Concatenate per-chunk outputs along dim 0 (leaves without a batch dim are taken from part 0)."""
    first = parts[0]
    if isinstance(first, torch.Tensor):
        if first.ndim >= 1 and all(p.shape[0] == s for p, s in zip(parts, sizes)):
            return torch.cat(parts)
        return first
    if isinstance(first, (tuple, list)):
        items = [concat_outputs([p[i] for p in parts], sizes) for i in range(len(first))]
        return type(first)(items) if not hasattr(first, "_fields") else type(first)(*items)
    if isinstance(first, Mapping):
        return rebuild_mapping(first, {k: concat_outputs([p[k] for p in parts], sizes) for k in first})
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
