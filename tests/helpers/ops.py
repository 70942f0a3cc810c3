"""Counting the operators a call dispatches: on CUDA each is a kernel launch plus Python and dispatcher time.

A ``TorchDispatchMode`` counts every operator dispatched inside the block, with these rules:

* the user's model is wrapped (``paused``) so that counting pauses inside it: its own operators are
  its forward floor, not the call's fixed cost;
* views and metadata operators are left out: every ``func.is_view`` operator (``view``, ``expand``,
  ``slice``, ``select``, ``detach``, ``alias``, ``lift_fresh``, ...) and the allocations that launch
  nothing (``empty.*``, ``empty_like``, ``empty_strided``, ``new_empty*``, ``_unsafe_view``,
  ``set_``, ``resize_``);
* ``record_function`` enters and exits are not operators: each enter is counted apart as a range;
* two things the CPU does not dispatch but CUDA would, counted apart and not in the total: tensors
  made from Python data (``aten.lift_fresh``, ``uploads``: a pinned copy to the device each on CUDA)
  and ``tolist`` / ``numpy`` / ``cpu`` calls (``host_reads``: a copy to the host each on CUDA);
* each ``torchlime._backend`` kernel door (``KERNEL_DOORS``: one Triton launch on CUDA) counts as ONE
  operator named ``door.<name>``, and its CPU torch reference inside is not counted (counting pauses
  in it). The doors without a kernel (``row_hash``, ``mix32``, ``slic_features``, ``normalize_stats``, ``box_iou``)
  are torch code on every device: their operators are counted. SLIC reaches its doors only where
  ``_backend.use_triton`` says so (on CUDA); on the CPU it runs its own torch iterations, so
  ``cuda_path=True`` makes ``use_triton`` answer True outside the doors (False inside, where the
  references then run), to count the CUDA path's SLIC on the CPU.

``call_ops`` runs a call at ``n`` and ``4 n`` samples at a fixed chunk size and splits the count into
a fixed part and a part per chunk (``OpSplit``). Counts are of operators, not of time: on the CPU they
are exact and repeat from run to run, so tests may hold them to budgets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import sys
from collections import Counter
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
#: operators (every overload) that launch nothing although their schema is not a view: allocations, metadata
METADATA = {
    aten.empty,
    aten.empty_like,
    aten.empty_strided,
    aten.new_empty,
    aten.new_empty_strided,
    aten._unsafe_view,
    aten.set_,
    aten.resize_,
}
RANGE_ENTER = torch.ops.profiler._record_function_enter_new.default
RANGE_EXIT = torch.ops.profiler._record_function_exit._RecordFunction
#: the ``torchlime._backend`` functions that are one Triton launch on CUDA
KERNEL_DOORS = (
    "blend",
    "slic_assign",
    "slic_update",
    "hash_words",
    "normal_centre",
    "fit_summary",
    "quality_flags",
    "mask_weights",
    "rank_boxes",
    "match_boxes",
)

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SKIP = (f"{os.sep}torch{os.sep}", "contextlib.py", f"{os.sep}functools.py")


def _short(name: str) -> str:
    """A source file's path from its ``torchlime/`` folder on (any tree's), else repository-relative, else
    from the installed package's folder on."""
    at = name.find(f"{os.sep}torchlime{os.sep}")
    if at >= 0:
        return name[at + 1 :]
    return os.path.relpath(name, _ROOT) if name.startswith(_ROOT) else name.split("site-packages" + os.sep)[-1]


def _where() -> tuple[str, str]:
    """(``file:line``, ``file:function``) of the innermost caller outside torch and this module."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name != __file__ and not any(s in name for s in _SKIP):
            short = _short(name)
            return f"{short}:{frame.f_lineno}", f"{short}:{frame.f_code.co_name}"
        frame = frame.f_back
    return "?", "?"


class OpCounter(TorchDispatchMode):
    """Counts dispatched operators (by name), ``record_function`` ranges and, with ``where=True``,
    the source line, function and innermost profiler range of each operator."""

    def __init__(self, where: bool = False) -> None:
        super().__init__()
        self.paused = 0  # > 0 inside the model or a kernel door
        self.model_calls = 0
        self.uploads = 0  # tensors made from Python data
        self.host_reads: Counter[str] = Counter()  # Tensor.tolist / numpy / cpu calls
        self.where = where
        self.ops: Counter[str] = Counter()
        self.ranges: Counter[str] = Counter()  # record_function ranges entered, by name
        self.lines: Counter[str] = Counter()
        self.functions: Counter[str] = Counter()
        self.stages: Counter[str] = Counter()  # the innermost record_function range of each operator
        self.sites: Counter[str] = Counter()  # "operator @ file:line"
        self.stage_functions: Counter[str] = Counter()  # "range | file:function"
        self._open: list[str] = []

    @property
    def total(self) -> int:
        """The operators counted."""
        return sum(self.ops.values())

    @property
    def n_ranges(self) -> int:
        """The ``record_function`` ranges entered."""
        return sum(self.ranges.values())

    def add(self, name: str) -> None:
        """Count one operator ``name`` (with its source when ``where``)."""
        self.ops[name] += 1
        if self.where:
            line, function = _where()
            self.sites[f"{name} @ {line}"] += 1
            self.lines[line] += 1
            self.functions[function] += 1
            stage = self._open[-1] if self._open else "(no range)"
            self.stages[stage] += 1
            self.stage_functions[f"{stage} | {function}"] += 1

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is RANGE_ENTER:
            self._open.append(str(args[0]))
            if not self.paused:
                self.ranges[str(args[0])] += 1
        elif func is RANGE_EXIT:
            if self._open:
                self._open.pop()
        elif func is aten.lift_fresh.default:
            self.uploads += 0 if self.paused else 1
        elif not self.paused and not func.is_view and func.overloadpacket not in METADATA:
            self.add(str(func.overloadpacket.__name__) if func.name().startswith("aten::") else str(func))
        return func(*args, **kwargs)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """No operator is counted inside the block."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1


def paused(counter: OpCounter, model: Any) -> Any:
    """``model`` with counting paused inside it: a module gets forward hooks (removed by
    ``unpause``), any other callable a wrapper."""
    if isinstance(model, torch.nn.Module):

        def enter(*_: Any) -> None:
            counter.paused += 1
            counter.model_calls += 1

        def leave(*_: Any) -> None:
            counter.paused -= 1

        handles = [
            model.register_forward_pre_hook(enter, prepend=True),
            model.register_forward_hook(leave, always_call=True),
        ]
        model.__dict__.setdefault("_op_counter_hooks", []).extend(handles)
        return model

    @functools.wraps(model)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counter.model_calls += 1
        with counter.pause():
            return model(*args, **kwargs)

    return wrapper


def unpause(model: Any) -> None:
    """Remove the hooks ``paused`` put on a module (nothing for a wrapped function)."""
    for handle in getattr(model, "__dict__", {}).pop("_op_counter_hooks", []):
        handle.remove()


@contextlib.contextmanager
def _doors(counter: OpCounter, cuda_path: bool = False) -> Iterator[None]:
    """Every loaded ``torchlime`` module's name for a kernel door replaced by a wrapper that counts one
    operator and pauses counting inside (modules that imported the function by name included); with
    ``cuda_path``, ``_backend.use_triton`` True outside the doors."""
    from torchlime import _backend

    patched: list[tuple[object, str, object]] = []
    if cuda_path:
        chooses = _backend.use_triton

        def use_triton(x: torch.Tensor) -> bool:
            return True if not counter.paused else bool(chooses(x))

        patched.append((_backend, "use_triton", chooses))
        _backend.use_triton = use_triton
    for door in KERNEL_DOORS:
        original = getattr(_backend, door, None)
        if original is None:
            continue

        def wrapper(*args: Any, _door: str = door, _original: Any = original, **kwargs: Any) -> Any:
            if not counter.paused:
                counter.add(f"door.{_door}")
            with counter.pause():
                return _original(*args, **kwargs)

        for name, module in list(sys.modules.items()):
            if (name == "torchlime" or name.startswith("torchlime.")) and getattr(module, door, None) is original:
                patched.append((module, door, original))
                setattr(module, door, wrapper)
    try:
        yield
    finally:
        for module, door, original in patched:
            setattr(module, door, original)


@contextlib.contextmanager
def _host_reads(counter: OpCounter) -> Iterator[None]:
    """``Tensor.tolist`` / ``numpy`` / ``cpu`` counted as host reads while the block runs."""
    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy", "cpu")}
    for name, original in originals.items():

        def wrapper(self: torch.Tensor, *a: Any, _name: str = name, _original: Any = original, **k: Any) -> Any:
            if not counter.paused:
                counter.host_reads[_name] += 1
            with counter.pause():
                return _original(self, *a, **k)

        setattr(torch.Tensor, name, wrapper)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)


@contextlib.contextmanager
def count_ops(where: bool = False, cuda_path: bool = False) -> Iterator[OpCounter]:
    """Yields the ``OpCounter`` of the block, the kernel doors counted once each; wrap the model with
    ``paused(counter, model)`` to leave its operators out (``cuda_path``: see the module's docstring)."""
    counter = OpCounter(where=where)
    with _doors(counter, cuda_path), _host_reads(counter), counter:
        yield counter


@dataclasses.dataclass
class OpSplit:
    """A call's operators split into a fixed part and a part per chunk (from calls at n and 4n)."""

    fixed: float
    per_chunk: float
    ranges: int  # record_function ranges of the call at n
    ranges_fixed: float  # the ranges split the same way
    ranges_per_chunk: float
    chunks: tuple[int, int]
    totals: tuple[int, int]
    model_calls: tuple[int, int]
    uploads: tuple[int, int]  # tensors from Python data, at n and scale * n (not in the totals)
    host_reads: tuple[int, int]  # tolist / numpy / cpu calls, the same way
    ops: Counter[str]  # by operator, the call at n
    lines: Counter[str] = dataclasses.field(default_factory=Counter)
    functions: Counter[str] = dataclasses.field(default_factory=Counter)
    stages: Counter[str] = dataclasses.field(default_factory=Counter)
    sites: Counter[str] = dataclasses.field(default_factory=Counter)
    range_names: Counter[str] = dataclasses.field(default_factory=Counter)
    #: with ``where``: the fixed part and the part per chunk of each operator, site ("op @ file:line"),
    #: line, function, innermost profiler range and (range, function) pair, split like the totals
    fixed_by: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    per_chunk_by: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)


def count_call(run: Callable[[Any], object], model: Any, where: bool = False, cuda_path: bool = False) -> OpCounter:
    """Count one ``run(model)``, the model's own operators left out (after an uncounted warm-up call,
    so chunk probes and first-call caches are not counted)."""
    run(model)
    with count_ops(where=where, cuda_path=cuda_path) as counter:
        wrapped = paused(counter, model)
        try:
            run(wrapped)
        finally:
            unpause(model)
    return counter


def call_ops(
    run: Callable[[Any, int], object],
    model: Any,
    n: int,
    chunk: int,
    rows: int = 1,
    where: bool = False,
    scale: int = 4,
    cuda_path: bool = False,
) -> OpSplit:
    """Operators of ``run(model, n_samples)`` at ``n`` and ``scale * n`` samples split as
    ``total = fixed + per_chunk * chunks``, with ``chunks = ceil(rows * n_samples / chunk)``: ``run``
    passes ``batch_size=chunk`` (model rows per call), ``rows`` is the model rows per sample (the
    inputs explained at once). The model calls seen are recorded beside (a call may run the model
    once more, on the unperturbed inputs)."""
    small = count_call(lambda m: run(m, n), model, where=where, cuda_path=cuda_path)
    large = count_call(lambda m: run(m, scale * n), model, where=where, cuda_path=cuda_path)
    chunks = (math.ceil(rows * n / chunk), math.ceil(rows * scale * n / chunk))
    per_chunk = (large.total - small.total) / (chunks[1] - chunks[0])
    ranges_per_chunk = (large.n_ranges - small.n_ranges) / (chunks[1] - chunks[0])
    fixed_by: dict[str, dict[str, float]] = {}
    per_chunk_by: dict[str, dict[str, float]] = {}
    for field in ("ops", "sites", "lines", "functions", "stages", "stage_functions") if where else ():
        a, b = getattr(small, field), getattr(large, field)
        slope = {k: (b[k] - a[k]) / (chunks[1] - chunks[0]) for k in a.keys() | b.keys()}
        fixed = {k: a[k] - slope[k] * chunks[0] for k in slope}
        fixed_by[field] = dict(sorted(((k, v) for k, v in fixed.items() if v), key=lambda kv: -kv[1]))
        per_chunk_by[field] = dict(sorted(((k, v) for k, v in slope.items() if v), key=lambda kv: -kv[1]))
    return OpSplit(
        fixed=small.total - per_chunk * chunks[0],
        per_chunk=per_chunk,
        ranges=small.n_ranges,
        ranges_fixed=small.n_ranges - ranges_per_chunk * chunks[0],
        ranges_per_chunk=ranges_per_chunk,
        chunks=chunks,
        totals=(small.total, large.total),
        model_calls=(small.model_calls, large.model_calls),
        uploads=(small.uploads, large.uploads),
        host_reads=(sum(small.host_reads.values()), sum(large.host_reads.values())),
        ops=small.ops,
        lines=small.lines,
        functions=small.functions,
        stages=small.stages,
        sites=small.sites,
        range_names=small.ranges,
        fixed_by=fixed_by,
        per_chunk_by=per_chunk_by,
    )
