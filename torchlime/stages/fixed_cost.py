"""What a call need not pay every time: profiler ranges nobody reads, and work that depends only on shapes.

Every operator a call dispatches is a kernel launch on CUDA, plus Python and dispatcher time, whatever
its size: for a small model these launches, not the forward, are the call. Two of their sources are
removed here:

* ``record_function`` opens a ``torch.profiler`` range (``torchlime::plan``, ``::masks``, ...) only
  while a profiler is active (``torch.autograd``'s profiler state): outside one, a range is two
  dispatched operators and a record that no one reads;
* ``ShapeCache`` keeps the results of work that depends only on shapes, settings and an object's
  identity (a feature map a caller passes again, a model): a small LRU (``MAX_ENTRIES`` entries), whose
  entries die with their object (a weak reference) and which two threads may use at once. Its users
  key only on what decides the result, so a cached result equals the one computed afresh, bit for bit;
  a result whose tensors were written in place since (their ``_version`` moved) is computed again.
  A tensor's values are known by its identity, memory and ``_version``: a write torch does not count
  (through a NumPy array sharing the memory, or through ``.data``) is not seen, so a map changed that
  way must be passed as a new tensor (``.clone()``).
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Callable, ContextManager, Generic, Optional, TypeVar

import torch
from torch.profiler import record_function as _record_function

from torchlime._util.keep import keep

__all__ = [
    "CACHED_ELEMENTS",
    "MAX_ENTRIES",
    "ShapeCache",
    "clear_caches",
    "columns",
    "constant",
    "derived",
    "profiling",
    "record_function",
    "tensor_key",
    "zeros",
]

V = TypeVar("V")
#: the most entries a ``ShapeCache`` keeps (the least recently used goes first)
MAX_ENTRIES = 64
#: the most elements a kept result may hold: beyond it the work saved is small beside the call's own, and
#: 64 such results would hold too much memory
CACHED_ELEMENTS = 1 << 20
_NO_RANGE: ContextManager[None] = contextlib.nullcontext()
_ALL: weakref.WeakSet[ShapeCache[Any]] = weakref.WeakSet()  # every cache, for ``clear_caches``


def profiling() -> bool:
    """Whether a ``torch.profiler`` (or ``torch.autograd.profiler``) profile is recording now."""
    return bool(torch.autograd._profiler_enabled())


def record_function(name: str) -> ContextManager[object]:
    """``torch.profiler.record_function(name)`` while a profiler is active, else a context that does nothing.

    Args:
        name: the range's name (``torchlime::<stage>``).

    Returns:
        A context manager: the range, or nothing at all (no operator dispatched, no record made).

    Example:
        >>> with record_function("torchlime::plan"):  # no profiler: nothing is recorded
        ...     pass
    """
    return _record_function(name) if profiling() else _NO_RANGE


def tensor_key(t: torch.Tensor) -> Optional[tuple[int, int, tuple[int, ...], tuple[int, ...], torch.dtype, str, int]]:
    """What identifies a tensor's current values without reading them: its storage, view, dtype and version.

    Equal keys of two live tensors mean the same elements in the same memory, unchanged since (every
    in-place write bumps ``_version``); the object itself is the ``ShapeCache``'s weak key, so a later
    tensor that reuses the memory of a dead one is not mistaken for it.

    Args:
        t: any tensor.

    Returns:
        ``(data_ptr, storage_offset, shape, stride, dtype, device, version)``, or None for an inference
        tensor (it has no version: a write in inference mode would not be seen, so it is not a key).
    """
    if t.is_inference():
        return None
    return (t.data_ptr(), int(t.storage_offset()), tuple(t.shape), t.stride(), t.dtype, str(t.device), t._version)


def _versions(value: object) -> tuple[int, ...]:
    """The ``_version`` of every tensor of a result (a tensor, or a tuple of them and other things)."""
    parts = value if isinstance(value, tuple) else (value,)
    # an inference tensor has no version (and cannot be written outside inference mode): -1
    return tuple(-1 if t.is_inference() else t._version for t in parts if isinstance(t, torch.Tensor))


class ShapeCache(Generic[V]):
    """A thread-safe LRU of at most ``size`` results, each keyed on an object (weakly) and a hashable key.

    Args:
        size: the most entries kept.

    Example:
        >>> cache: ShapeCache[int] = ShapeCache()
        >>> owner = torch.zeros(2)
        >>> cache.get(owner, ("twice", 3), lambda: 6), cache.get(owner, ("twice", 3), lambda: -1)
        (6, 6)
    """

    def __init__(self, size: int = MAX_ENTRIES) -> None:
        self.size = size
        self._entries: OrderedDict[tuple[int, Hashable], tuple[Optional[weakref.ref[object]], V, tuple[int, ...]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self._dead: list[tuple[int, Hashable]] = []  # keys of owners that died, forgotten under the lock
        _ALL.add(self)

    def __len__(self) -> int:
        with self._lock:
            self._purge()
            return len(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def get(self, owner: Optional[object], key: Hashable, make: Callable[[], V]) -> V:
        """The result for ``(owner, key)``: the cached one, else ``make()`` (then kept).

        Args:
            owner: the object the result belongs to (held weakly; the entry goes when it dies), or None
                (the key alone decides: shapes and settings).
            key: everything else the result depends on (shapes, dtypes, devices, settings).
            make: computes the result (outside the lock: two threads may both compute a missing entry,
                the same result, and the last one is kept).

        Returns:
            The result.
        """
        found = self.find(owner, key)
        if found is not None:
            return found
        value = make()
        self.put(owner, key, value)
        keep(value)
        return value

    def find(self, owner: Optional[object], key: Hashable) -> Optional[V]:
        """The cached result for ``(owner, key)``, or None (none, or its tensors were written since).

        Args:
            owner: as ``get``.
            key: as ``get``.
        """
        full = (0 if owner is None else id(owner), key)
        with self._lock:
            self._purge()
            found = self._entries.get(full)
            if found is not None and (found[0] is None or found[0]() is owner) and _versions(found[1]) == found[2]:
                self._entries.move_to_end(full)
                keep(found[1])
                return found[1]
        return None

    def put(self, owner: Optional[object], key: Hashable, value: V) -> None:
        """Keep ``value`` for ``(owner, key)`` (nothing for an owner without weak references).

        Args:
            owner: as ``get``.
            key: as ``get``.
            value: the result.
        """
        full = (0 if owner is None else id(owner), key)
        ref: Optional[weakref.ref[object]] = None
        if owner is not None:
            try:
                ref = weakref.ref(owner, lambda _, full=full: self._drop(full))  # type: ignore[misc]
            except TypeError:  # an object without weak references: not cached
                return
        with self._lock:
            self._purge()
            self._entries[full] = (ref, value, _versions(value))
            self._entries.move_to_end(full)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def _drop(self, full: tuple[int, Hashable]) -> None:
        """Note the key of an owner that died (a weak reference's callback).

        It never takes the lock: the garbage collector may run it inside ``find`` or ``put`` of the same
        thread, which hold it. The entry goes at the next ``find`` or ``put``.
        """
        self._dead.append(full)

    def _purge(self) -> None:
        """Forget the entries of the owners that died (if still theirs); called with the lock held."""
        while self._dead:
            full = self._dead.pop()
            found = self._entries.get(full)
            if found is not None and found[0] is not None and found[0]() is None:
                del self._entries[full]


def clear_caches(keep: Optional[ShapeCache[Any]] = None) -> None:
    """Forget the entries of every ``ShapeCache`` but ``keep``.

    A CUDA graph capture that failed may have cached tensors whose kernels never ran (``engine.graphed``).

    Args:
        keep: a cache to leave as it is, or None.
    """
    for cache in list(_ALL):
        if cache is not keep:
            cache.clear()


_COLUMNS: ShapeCache[torch.Tensor] = ShapeCache()


def columns(n: int, device: torch.device, shift: bool = False) -> torch.Tensor:
    """Long (n,) ``0..n-1`` on ``device`` (or with ``shift``, ``1 << 0..n-1``), made once per size and device.

    The engine compares feature and bit positions against them in every call; a tensor from here must
    not be written (a written one is made again).

    Args:
        n: the length.
        device: where it lives.
        shift: the powers of two ``1 << j`` instead of ``j``.

    Example:
        >>> columns(4, torch.device("cpu")).tolist(), columns(3, torch.device("cpu"), shift=True).tolist()
        ([0, 1, 2, 3], [1, 2, 4])
    """

    def make() -> torch.Tensor:
        j = torch.arange(n, device=device)
        return torch.ones_like(j) << j if shift else j

    return _COLUMNS.get(None, (n, str(device), shift), make)


def constant(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A 0-d tensor holding ``value``, made once per value, dtype and device (not to be written).

    ``torch.where(mask, constant(a, ...), constant(b, ...))`` is one operator of that dtype, where a cast of
    the mask and arithmetic on it would be two or three.

    Args:
        value: the number.
        dtype: its dtype.
        device: where it lives.

    Example:
        >>> constant(0.5, torch.float64, torch.device("cpu"))
        tensor(0.5000, dtype=torch.float64)
    """
    return _COLUMNS.get(
        None, ("constant", value, dtype, str(device)), lambda: torch.full((), value, dtype=dtype, device=device)
    )


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor of zeros, made once per shape, dtype and device (not to be written).

    Out-of-place operators such as ``torch.scatter_add`` start from it in one operator, where a fresh
    one costs a fill first.

    Args:
        shape: its shape (at most ``CACHED_ELEMENTS`` elements are kept).
        dtype: its dtype.
        device: where it lives.

    Example:
        >>> torch.scatter_add(zeros((1, 3), torch.float64, torch.device("cpu")), 1, torch.tensor([[0, 2, 2]]),
        ...                   torch.ones(1, 3, dtype=torch.float64)).tolist()
        [[1.0, 0.0, 2.0]]
    """

    def make() -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, device=device)

    return (
        make() if math.prod(shape) > CACHED_ELEMENTS else _COLUMNS.get(None, ("zeros", shape, dtype, str(device)), make)
    )


_DERIVED: ShapeCache[tuple[torch.Tensor, ...]] = ShapeCache()


def derived(name: str, make: Callable[[], torch.Tensor], *tensors: torch.Tensor, extra: Hashable = ()) -> torch.Tensor:
    """``make()``, a tensor that depends only on the values of ``tensors`` (and ``extra``): kept while they live.

    Work on tensors that later calls pass again unchanged (a map's feature counts, the rows' coordinates,
    ``columns``) is done once. The first tensor (or the tensor it views) is the entry's weak owner and the
    others are held by the entry, so that none of their memory can serve another tensor while it lives;
    each is known by ``tensor_key`` (a write into any of them makes the result again). Not kept for an
    inference tensor (no version) or a result of more than ``CACHED_ELEMENTS`` elements.

    Args:
        name: what ``make`` computes (part of the key: two functions of the same tensors differ by it).
        make: computes the result from ``tensors``.
        tensors: what the result depends on (at least one).
        extra: the settings it depends on besides (hashable).

    Returns:
        The result: kept, or made now. It must not be written.

    Example:
        >>> counts = torch.tensor([3, 2])
        >>> derived("valid", lambda: columns(3, counts.device) < counts.unsqueeze(1), counts).tolist()
        [[True, True, True], [True, True, False]]
    """
    keys = tuple(tensor_key(t) for t in tensors)
    if any(k is None for k in keys):
        return make()
    first = tensors[0]
    owner = first if first._base is None else first._base
    found = _DERIVED.find(owner, (name, keys, extra))
    if found is not None:
        return found[0]
    value = make()
    if value.numel() <= CACHED_ELEMENTS:
        _DERIVED.put(owner, (name, keys, extra), (value, *tensors[1:]))
    return value
