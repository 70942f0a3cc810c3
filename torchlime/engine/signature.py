"""What a plan holds, read without the device: its signature and its tensors (``engine.graphed``).

``walk`` reads an object graph (a ``Plan``: dataclasses, objects' attributes, containers, closures) in a fixed
order into a hashable *signature* (every host value; the shape, stride, offset, dtype and device of every
tensor; modules by identity and the memory of their weights) and the list of its tensors. Two plans with
equal signatures launch the same kernels on buffers of the same shapes, so the tensors of one can be
copied into the other's and a graph captured on the other replayed. ``private_copy`` clones the tensors a
call's settings hold (so a plan made from the copy shares no memory with the caller), ``clone_output``
copies what a run leaves (so nothing returned is a graph's buffer).
"""

from __future__ import annotations

import copy
import dataclasses
import types

import torch
from torch import nn

from torchlime.stages.forward.chunking import ChunkPlan

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "Unwalkable", "clone_output", "private_copy", "walk"]

#: the deepest nesting ``walk`` reads
MAX_DEPTH = 24
#: the most entries a signature may hold (a plan holding a vocabulary or a data set is not walked per call)
MAX_ENTRIES = 50_000
#: a clock; the key tensor made from it; whether a map is the one kept for the caller's (only the explanation's
#: copies after the passes depend on it)
_SKIPPED = frozenset({("Plan", "started"), ("Call", "generator"), ("FeatureMap", "shared")})
_SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.layout)
_ATOMS = (torch.Generator, types.ModuleType, type, types.BuiltinFunctionType)


class Unwalkable(Exception):
    """An object graph nested deeper than ``MAX_DEPTH`` or larger than ``MAX_ENTRIES`` (its call runs eagerly)."""


def _slots(kind: type) -> set[str]:
    """The ``__slots__`` names of a class and its bases (their ``__dict__`` and ``__weakref__`` left out)."""
    names: set[str] = set()
    for c in kind.__mro__:
        declared = c.__dict__.get("__slots__", ())
        names.update((declared,) if isinstance(declared, str) else declared)
    return names - {"__dict__", "__weakref__"}


class _Walk:
    """The state of one ``walk``: the signature so far, the tensors, the objects met (by id, kept alive)."""

    def __init__(self) -> None:
        self.sig: list[object] = []
        self.leaves: list[torch.Tensor] = []
        self.seen: dict[int, int] = {}
        self.held: list[object] = []  # keeps every object met alive, so no id() is reused during the walk

    def visit(self, obj: object, depth: int) -> None:
        if depth > MAX_DEPTH or len(self.sig) > MAX_ENTRIES:
            raise Unwalkable(
                f"a plan nested deeper than {MAX_DEPTH} levels or holding more than {MAX_ENTRIES} values "
                f"({type(obj).__name__})"
            )
        if isinstance(obj, _SCALARS):
            self.sig.append(obj)
        elif isinstance(obj, torch.Tensor):  # by its layout: which names share one is a cache's choice
            self.sig.append(
                ("tensor", tuple(obj.shape), obj.stride(), obj.storage_offset(), obj.dtype, str(obj.device))
            )
            self.leaves.append(obj)
        elif id(obj) in self.seen:
            self.sig.append(("same", self.seen[id(obj)]))
        else:
            self.seen[id(obj)] = len(self.seen)
            self.held.append(obj)
            self.compound(obj, depth + 1)

    def compound(self, obj: object, depth: int) -> None:
        if isinstance(obj, nn.Module):  # by identity and the memory of its weights
            owner = getattr(obj, "cache_identity", obj)
            self.sig.append(("module", id(owner), tuple(t.data_ptr() for t in (*obj.parameters(), *obj.buffers()))))
        elif isinstance(obj, ChunkPlan):  # the chunk it will run, not its memory readings (new every call)
            self.sig.append(("chunks", obj.next_size(1 << 62), obj.measure))
        elif isinstance(obj, _ATOMS):
            self.sig.append(("atom", type(obj).__name__, getattr(obj, "__qualname__", None)))
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple: by its fields' names
            self.attributes(obj, depth)
        elif isinstance(obj, (tuple, list, dict)):
            items = list(obj.items()) if isinstance(obj, dict) else [(None, v) for v in obj]
            self.sig.append((type(obj).__name__, len(items)))
            for k, v in items:
                self.visit(k, depth)
                self.visit(v, depth)
        elif isinstance(obj, (types.FunctionType, types.MethodType)):
            self.function(obj, depth)
        else:
            self.attributes(obj, depth)

    def function(self, fn: types.FunctionType | types.MethodType, depth: int) -> None:
        if isinstance(fn, types.MethodType):
            self.sig.append("method")
            self.visit(fn.__func__, depth)
            self.visit(fn.__self__, depth)
            return
        self.sig.append(("function", fn.__code__))
        for cell in fn.__closure__ or ():
            try:
                self.visit(cell.cell_contents, depth)
            except ValueError:  # an empty cell
                self.sig.append("empty")

    def attributes(self, obj: object, depth: int) -> None:
        name = type(obj).__name__
        self.sig.append(("object", type(obj)))
        names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
        names = list(getattr(obj, "_fields", names))
        if not names:  # its attributes: the instance dict's, and the slots of its classes
            names = sorted({*getattr(obj, "__dict__", {}), *_slots(type(obj))})
        for attr in names:
            if (name, attr) not in _SKIPPED and hasattr(obj, attr):
                self.sig.append(attr)
                self.visit(getattr(obj, attr), depth)


def walk(root: object) -> tuple[tuple[object, ...], list[torch.Tensor]]:
    """The signature of ``root`` (a plan) and its tensors, in a fixed order (module docstring).

    Args:
        root: the object to read.

    Returns:
        ``(signature, tensors)``: a hashable tuple, and the tensors in the order the signature names them.

    Raises:
        Unwalkable: a structure nested deeper than ``MAX_DEPTH`` or larger than ``MAX_ENTRIES``.

    Example:
        >>> sig, tensors = walk({"x": torch.zeros(2, 3), "n": 4})
        >>> sig[:2], len(tensors)
        ((('dict', 2), 'x'), 1)
    """
    state = _Walk()
    state.visit(root, 0)
    return tuple(state.sig), state.leaves


def private_copy(value: object, memo: dict[int, object]) -> object:
    """``value`` with every tensor reachable through dataclasses and containers cloned (modules and functions kept).

    Args:
        value: the call's settings (or any part of them).
        memo: what was copied, by id, to its copy: a tensor met twice is one copy.

    Returns:
        The copy (the same object where nothing in it is a tensor to clone).
    """
    if id(value) in memo:
        return memo[id(value)]
    made = value
    if isinstance(value, torch.Tensor):
        made = value.clone()
    elif isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        made = type(value)(private_copy(v, memo) for v in value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: private_copy(getattr(value, f.name), memo) for f in dataclasses.fields(value) if f.init}
        made = dataclasses.replace(value, **changes)
    memo[id(value)] = made
    return made


def clone_output(value: object) -> object:
    """A copy of something a run left (a tensor, a list of them, an accumulator) whose tensors are new.

    Args:
        value: the output.

    Returns:
        The copy: tensors cloned, lists copied, an object copied with its tensor attributes cloned.
    """
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [clone_output(v) for v in value]
    if isinstance(value, _SCALARS):
        return value
    twin = copy.copy(value)
    for name, attr in vars(twin).items():
        if isinstance(attr, torch.Tensor):
            setattr(twin, name, attr.clone())
    return twin
