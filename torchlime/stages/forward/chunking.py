"""The chunk-size policy: how many perturbed rows go through the model per call.

The default is a rule, not a measurement, so the same call gives the same chunks (and the same bits)
on its first run and every later one: on the CPU as many rows as fit ``CPU_CHUNK_BYTES`` of input,
and for token rows (``sequence_length``) at most ``CPU_CHUNK_TOKENS`` tokens (a row of token ids is a
few hundred bytes, but a transformer's activations grow with rows x length: 4096 rows of 96 tokens
hold gigabytes of a BERT's activations); on CUDA the first call on a model and row signature runs a
chunk of ``PROBE`` rows twice, the second time measuring the memory a row takes (the first call of a
model at a shape also allocates what it needs once: library workspaces, lazy state, which can make a
row look several times heavier); their rows run again, so the first call's chunks are every later
call's, and a later call makes no probe and no synchronisation for it. All rows run at the largest
power of two within the memory budget (``memory_budget``) and ``CUDA_MAX_CHUNK`` rows, or, for light
rows (a chunk of ``CUDA_MAX_CHUNK`` peaking under ``CUDA_LIGHT_BYTES``), within ``CUDA_LIGHT_BYTES``
and ``CUDA_MAX_ROWS``: a small model's chunk is then large enough that the per-chunk launches stop
mattering.
``batch_size="measure"`` times growing sizes instead (extra chunks whose rows are run again at the
chosen size, cached per model and row signature); an int fixes the size. An out-of-memory error
halves the chunk and runs the same rows again. The fit never depends on the chunk.
"""

from __future__ import annotations

import contextlib
import numbers
import time
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Iterator, Literal, Optional, cast

import torch

from torchlime._util.checks import describe
from torchlime.stages.forward.chunk_rules import CPU_CHUNK_BYTES as CPU_CHUNK_BYTES
from torchlime.stages.forward.chunk_rules import CPU_CHUNK_TOKENS as CPU_CHUNK_TOKENS
from torchlime.stages.forward.chunk_rules import CUDA_LIGHT_BYTES as CUDA_LIGHT_BYTES
from torchlime.stages.forward.chunk_rules import CUDA_MAX_CHUNK as CUDA_MAX_CHUNK
from torchlime.stages.forward.chunk_rules import CUDA_MAX_ROWS as CUDA_MAX_ROWS
from torchlime.stages.forward.chunk_rules import MAX_CHUNK as MAX_CHUNK
from torchlime.stages.forward.chunk_rules import Signature as Signature
from torchlime.stages.forward.chunk_rules import _pow2_floor as _pow2_floor
from torchlime.stages.forward.chunk_rules import cpu_rule as cpu_rule
from torchlime.stages.forward.chunk_rules import cuda_rule as cuda_rule
from torchlime.stages.forward.chunk_rules import row_bytes as row_bytes
from torchlime.stages.forward.chunk_rules import sequence_length as sequence_length
from torchlime.typing import BatchSize, Model
from torchlime.typing import MemorySpec as MemorySpec

GAIN = 0.02  # a larger chunk must be this much faster per row to be worth growing to
PATIENCE = 2  # doublings in a row without that gain before the search stops
REPEATS = 3  # timed calls per size; the size's time per row is the fastest of them
START = {"cpu": 4, "cuda": 16}
PROBE = 16  # default rule on CUDA: the rows of the probe chunk, whose peak memory sizes the chunks

#: the phase of a chunk: "warm" and "timed" while a size is measured, "probe" for the default rule's
#: two first CUDA chunks of a model and row signature (the rows of all three run again), "run" after
Phase = Literal["warm", "timed", "probe", "run"]
_CACHE: dict[tuple[int, Signature, str, MemorySpec], _Entry] = {}


@dataclass
class _Entry:
    """What is known about one (model, row signature, device, max_memory)."""

    per_row: dict[int, float] = field(default_factory=dict)  # size -> seconds per row (fastest timing)
    timings: dict[int, list[float]] = field(default_factory=dict)  # size -> seconds per row of each timed call
    warmed: set[int] = field(default_factory=set)
    bytes_per_row: float = 0.0  # CUDA peak memory of a chunk / its rows
    probe_warmed: bool = False  # the default rule's first probe chunk ran (it is not measured)
    probe_per_row: Optional[float] = None  # the default rule's second probe chunk: its peak memory / its rows
    ceiling: Optional[int] = None  # halved on OOM; None: none ran out of memory (``ChunkPlan.ceiling``)
    best: Optional[int] = None  # set once the measurement is done


def clear_cache() -> None:
    """Forget every measured chunk size (e.g. after the machine's load changed)."""
    _CACHE.clear()


def check_max_memory(max_memory: object) -> MemorySpec:
    """Validate ``max_memory``: None, bytes (int >= 1) or a fraction of the device memory in (0, 1].

    Args:
        max_memory: the value to check.

    Returns:
        ``max_memory`` itself.

    Raises:
        TypeError / ValueError: naming the argument, what was expected and what came.
    """
    if max_memory is None:
        return None
    if isinstance(max_memory, bool) or not isinstance(max_memory, (int, float)):
        raise TypeError(
            f"`max_memory` must be None, a number of bytes (int) or a fraction in (0, 1] "
            f"(float), got {describe(max_memory)}"
        )
    if isinstance(max_memory, int) and max_memory < 1:
        raise ValueError(f"`max_memory` in bytes must be >= 1, got {max_memory}")
    if isinstance(max_memory, float) and not 0.0 < max_memory <= 1.0:
        raise ValueError(f"`max_memory` as a fraction must be in (0, 1], got {max_memory}")
    return max_memory


def memory_budget(max_memory: MemorySpec, device: torch.device) -> Optional[int]:
    """Bytes a chunk may take on ``device``: None off CUDA (no budget).

    Args:
        max_memory: None (half of the memory free, counting what torch's allocator caches), bytes
            (int), or a fraction (float) of the device's total memory.
        device: where the model runs.
    """
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info(device)
    if max_memory is None:
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int((free + cached) // 2)
    if isinstance(max_memory, float):
        return int(max_memory * total)
    return int(max_memory)


def check_batch_size(batch_size: object) -> BatchSize:
    """Validate ``batch_size``: None (the default rule), a positive int, or "measure".

    Args:
        batch_size: the value to check.

    Returns:
        ``batch_size`` (an int as a Python int).

    Raises:
        TypeError / ValueError: naming the argument, what was expected and what came.
    """
    if batch_size is None or batch_size == "measure":
        return cast(BatchSize, batch_size)  # None or "measure", as just checked
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise TypeError(f'`batch_size` must be None, a positive int or "measure", got {describe(batch_size)}')
    if int(batch_size) < 1:
        raise ValueError(f"`batch_size` must be >= 1, got {batch_size}")
    return int(batch_size)


def _forget(owner_id: int) -> None:
    for key in [k for k in _CACHE if k[0] == owner_id]:
        del _CACHE[key]


class ChunkPlan:
    """Chunk sizes for one engine call (see the module docstring).

    Args:
        model: the model run on the chunks (its ``chunk_size`` attribute, if a positive
            int, fixes the size; its ``cache_identity``, if any, keys the measured sizes).
        signature: per-row shapes / dtypes / layout of the chunks (sizes the default rule on the
            CPU, keys the measured sizes).
        device: where the model runs.
        batch_size: a fixed size, None (the default rule) or "measure" (see the module docstring).
        max_memory: see ``check_max_memory``.
    """

    def __init__(
        self,
        model: Model,
        signature: Signature,
        device: torch.device,
        batch_size: BatchSize,
        max_memory: MemorySpec = None,
    ) -> None:
        self.device = device
        self.on_cuda = device.type == "cuda" and torch.cuda.is_available()
        self.measure = batch_size == "measure"
        fixed: object = batch_size if batch_size is not None else getattr(model, "chunk_size", None)
        self.fixed: Optional[int] = None
        if isinstance(fixed, numbers.Integral) and not isinstance(fixed, bool) and int(fixed) > 0:
            self.fixed = int(fixed)
        self.budget = memory_budget(max_memory, device)
        # the default rule: on the CPU from the row's bytes; on CUDA from the first chunk's memory
        self.rule: Optional[int] = None
        if not self.on_cuda:
            self.rule = cpu_rule(signature)
        owner = getattr(model, "cache_identity", None)
        owner = model if owner is None else owner
        key = (id(owner), signature, str(device), max_memory)
        entry = _CACHE.get(key)
        if entry is None:
            entry = _CACHE[key] = _Entry()
            with contextlib.suppress(TypeError):  # a later model with the same id() must not inherit it
                weakref.finalize(owner, _forget, id(owner))
        self.entry: _Entry = entry
        if self.on_cuda and entry.probe_per_row is not None:  # probed by an earlier call: no probe chunk
            self.rule = cuda_rule(entry.probe_per_row, self.budget)
        self.sizes_used: list[int] = []
        self._peak = 0
        self._base = 0
        if self.on_cuda:  # the call's peak memory: tracked across the resets of measured chunks
            self._base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)

    # ------------------------------------------------------------------ choosing
    def ceiling(self) -> int:
        """The largest chunk: half the last size that ran out of memory, else ``MAX_CHUNK`` rows.

        A fixed ``batch_size`` above ``MAX_CHUNK`` is kept (lime's layers send 5000 rows in one call).
        """
        e = self.entry
        return e.ceiling if e.ceiling is not None else max(MAX_CHUNK, self.fixed or 0)

    def _fits(self, size: int) -> bool:
        e = self.entry
        if size > self.ceiling():
            return False
        return self.budget is None or e.bytes_per_row == 0 or size * e.bytes_per_row <= self.budget

    def _largest_fitting(self, size: int) -> int:
        while size > 1 and not self._fits(size):
            size //= 2
        return size

    def next_size(self, remaining: int) -> tuple[int, Phase]:
        """The next chunk's size and its phase: "warm" or "timed" (measuring), or "run".

        Args:
            remaining: the rows left to run.

        Returns:
            ``(size, phase)``.
        """
        e = self.entry
        if self.fixed is not None:
            return min(self._largest_fitting(self.fixed), remaining), "run"
        if not self.measure:
            if self.rule is None:  # CUDA: the probe chunks size the rest (a call of a few rows is one chunk)
                probe = min(PROBE, self.ceiling())  # smaller after an out-of-memory error
                return (probe, "probe") if remaining > probe else (remaining, "run")
            return min(self.rule, self.ceiling(), remaining), "run"
        if e.best is not None:
            return min(self._largest_fitting(e.best), remaining), "run"
        size = self._candidate()
        if size > remaining:  # too few rows left to measure this size: finish with the best so far
            return min(self._choice(), remaining), "run"
        return size, ("timed" if size in e.warmed else "warm")

    def _candidate(self) -> int:
        """The size being measured: the next doubling after the largest timed size.

        Within the ceiling and the memory budget (a size that ran out of memory is never tried again).
        """
        e = self.entry
        if not e.per_row:
            return self._largest_fitting(START["cuda" if self.on_cuda else "cpu"])
        return self._largest_fitting(max(e.per_row) * 2)

    def _choice(self) -> int:
        """The smallest measured size within GAIN of the fastest per row (the start size if none)."""
        e = self.entry
        if not e.per_row:
            return self._candidate()
        fastest = min(e.per_row.values())
        return min(s for s, t in e.per_row.items() if t <= fastest * (1 + GAIN))

    # ------------------------------------------------------------------ observing
    @contextlib.contextmanager
    def run(self, size: int, phase: Phase) -> Iterator[None]:
        """Wrap one chunk: a "warm", "timed" or "probe" chunk records its peak memory (CUDA).

        A "timed" one records its time per row, which decides whether the next size is tried; a
        "probe" one sets the default rule's size (cached with the model and row signature).

        Args:
            size: the chunk's rows.
            phase: "warm", "timed", "probe" or "run" (from ``next_size``).

        Yields:
            Nothing: the chunk runs inside the context.
        """
        measuring = phase != "run"
        if measuring and self.on_cuda:
            torch.cuda.synchronize(self.device)
            self._peak = max(self._peak, torch.cuda.max_memory_allocated(self.device) - self._base)
            base = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        t0 = time.perf_counter()
        yield
        self.sizes_used.append(size)
        if not measuring:
            return
        e = self.entry
        if phase == "probe":
            if self.on_cuda:
                torch.cuda.synchronize(self.device)
                if e.probe_warmed:  # the second probe: the first one's once-only allocations are behind it
                    e.probe_per_row = (torch.cuda.max_memory_allocated(self.device) - base) / size
                    e.bytes_per_row = max(e.bytes_per_row, e.probe_per_row)
                    self.rule = cuda_rule(e.probe_per_row, self.budget)
                e.probe_warmed = True
            else:
                self.rule = self.rule or PROBE
            return
        if self.on_cuda:
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device) - base
            e.bytes_per_row = max(e.bytes_per_row, peak / size)
        seconds = time.perf_counter() - t0
        if phase == "warm":
            e.warmed.add(size)
            return
        runs = e.timings.setdefault(size, [])
        runs.append(seconds / size)
        if len(runs) < REPEATS:
            return
        e.per_row[size] = min(runs)
        # stop growing after PATIENCE doublings in a row that did not lower the time per row by GAIN
        # (one noisy timing on a busy machine does not end the search)
        sizes = sorted(e.per_row)
        recent = sizes[-PATIENCE:] if len(sizes) > PATIENCE else []
        stalled = bool(recent) and all(
            e.per_row[s] >= min(e.per_row[t] for t in sizes if t < s) * (1 - GAIN) for s in recent
        )
        if stalled or 2 * size > MAX_CHUNK or not self._fits(2 * size):
            e.best = self._choice()

    def out_of_memory(self, size: int) -> None:
        """After a device out-of-memory error at ``size``: halve (warn), or re-raise at size 1.

        Args:
            size: the size that ran out of memory.
        """
        if size <= 1:
            raise
        half = max(1, size // 2)
        e = self.entry
        e.ceiling = min(self.ceiling(), half)
        if self.fixed is not None:
            self.fixed = half
        if self.rule is not None:
            self.rule = min(self.rule, half)
        # an out-of-memory error ends the size search: the sizes that fit are the ones measured
        # (without this the search would try the next doubling, the failed size, forever)
        e.best = min(e.best if e.best is not None else self._choice(), half)
        warnings.warn(
            f"out of memory with a chunk of {size} samples; retrying with {half} (finished samples are kept)",
            RuntimeWarning,
            stacklevel=4,
        )
        torch.cuda.empty_cache()

    def peak_memory(self) -> Optional[int]:
        """Peak CUDA memory allocated during the call above what it held at the start (None off CUDA)."""
        if not self.on_cuda:
            return None
        return int(max(self._peak, torch.cuda.max_memory_allocated(self.device) - self._base))

    @property
    def chosen(self) -> Optional[int]:
        """The size used for most rows of this call (for ``Explanation.meta``)."""
        return max(set(self.sizes_used), key=lambda s: s * self.sizes_used.count(s)) if self.sizes_used else None
