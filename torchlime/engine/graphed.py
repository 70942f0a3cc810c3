"""``accelerate="cuda_graphs"``: repeated calls of the same shapes replay the stages after the plan as one graph.

A call's stages after its plan (``run.run_passes``: the mask draw, the fill and blend, the model's forward,
the targets' reduction, the weighting and the normal equations' accumulation) launch the same kernels on
buffers of the same shapes whenever the model, the plan's shapes and its host values are the same. Such a
call is keyed by its plan's *signature* (``walk``: every host value the plan holds, and the shape, stride,
dtype and device of every tensor it holds, in a fixed order): the first call of a key runs eagerly (its
warm-up: lazy initialisation, the chunk probe, kernel compilation), the second captures the stages once
(``accel.GraphBackend``: a ``torch.cuda.CUDAGraph``) on a private plan whose tensors are the graph's static
inputs, and every call of the key then copies its own plan's tensors into them, replays, and takes clones
of the static outputs (the scores, the targets, the normal equations). The graphs live in a
``stages.fixed_cost.ShapeCache`` (at most 64, weak on the model, safe under threads; one call replays a
graph at a time). The fit and the quality check run eagerly on the clones, so a replayed call's
explanation equals the eager call's bit for bit on the same device.

Calls whose stages need the host or change their shapes run eagerly, and ``RunRecord.cuda_graph`` says
why (``refusal``): inputs off CUDA, ``n_samples="auto"``, ``width="auto"``, a structured target
(``Boxes``, ``Region``, a continuation: bound on the host), segments made from the data (SLIC: their
count changes with the input), rows sorted on the host, ``batch_size="measure"``, a capture that raised
(a host synchronisation in the model, say), or a tensor the graph reads that the caller shares with it and
changed (a front door's per-call hook).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import weakref
from typing import Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torchlime._util.keep import keeping
from torchlime.accel import CudaGraphBackend, GraphBackend, Replayable
from torchlime.engine.plan import Plan, plan
from torchlime.engine.run import Passes, run_passes
from torchlime.engine.settings import Settings
from torchlime.engine.signature import Unwalkable, clone_output, private_copy, walk
from torchlime.stages.fixed_cost import ShapeCache, clear_caches, record_function
from torchlime.stages.forward.model import eval_mode
from torchlime.stages.perturb.blend import OrderedPerturbFn
from torchlime.stages.weighting import ExponentialKernel
from torchlime.targets.base import Target
from torchlime.typing import Model

__all__ = ["DATA_SEGMENTS", "GRAPHS", "graphed_passes", "refusal", "set_backend"]

#: the captured graphs, by model (weakly) and plan signature
GRAPHS: ShapeCache[_Entry] = ShapeCache()
#: segment makers whose segment count follows the data (``ImagesInfo.segments``)
DATA_SEGMENTS = frozenset({"slic", "quickshift", "felzenszwalb", "skimage_slic", "callable"})
_OUTPUTS = ("width", "targets", "scores", "acc", "kept_masks", "kept_weights", "dists", "scale", "bound")
_backend: list[GraphBackend] = [CudaGraphBackend()]


def set_backend(backend: Optional[GraphBackend]) -> GraphBackend:
    """Use ``backend`` to capture and replay (None: CUDA graphs again); returns the one used before.

    Args:
        backend: an ``accel.GraphBackend`` (tests use a CPU stand-in), or None.

    Returns:
        The previous backend.
    """
    old = _backend[0]
    _backend[0] = CudaGraphBackend() if backend is None else backend
    return old


def refusal(settings: Settings, planned: Plan, segments: Optional[str] = None) -> Optional[str]:
    """Why a call's stages cannot be graphed, or None.

    Args:
        settings: the call's resolved arguments.
        planned: its plan.
        segments: how a modality made the feature map (``ImagesInfo.segments``), if it says.

    Returns:
        The reason (what needs the host, or changes shape), or None.
    """
    device, kernel = settings.inputs.device, planned.run.kernel
    reasons = (
        (not _backend[0].supports(device), f"inputs on {device}: CUDA graphs need a CUDA device"),
        (settings.adaptive is not None, "n_samples='auto' chooses its rounds on the host"),
        (isinstance(kernel, ExponentialKernel) and kernel.auto, "width='auto' reads the samples on the host"),
        (
            isinstance(settings.target, Target),
            f"a structured target ({type(settings.target).__name__}) binds to the model's output on the host",
        ),
        (segments in DATA_SEGMENTS, f"segments made from the data ({segments}): their count changes with the input"),
        (isinstance(settings.call.perturb_fn, OrderedPerturbFn), "the perturbation sorts its rows on the host"),
        (planned.chunks.measure, "batch_size='measure' times its chunks on the host"),
    )
    return next((why for refused, why in reasons if refused), None)


class _Slot:
    """The model of a captured plan: the current call's, lent for a capture or replay (no strong reference kept)."""

    def __init__(self) -> None:
        self.model: Optional[Model] = None

    def __call__(self, *args: object, **kwargs: object) -> object:
        if self.model is None:
            raise RuntimeError("a captured plan's model is only lent during a capture or a replay")
        return self.model(*args, **kwargs)


class _Touched(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    """Keeps every tensor made before a capture that an operator reads in it: the graph reads their memory later.

    Tensors made inside the capture (the graph's own pool) are left to it; a cached tensor made by an
    earlier call (row coordinates, ``columns``) is kept even if its cache lets it go.
    """

    def __init__(self, into: list[object]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.into = into
        self.made: dict[int, weakref.ref[torch.Tensor]] = {}

    def _new(self, t: torch.Tensor) -> bool:
        ref = self.made.get(id(t))
        return ref is not None and ref() is t

    def __torch_dispatch__(self, func, types, args=(), kwargs=None) -> object:  # type: ignore[no-untyped-def]  # noqa: ANN001
        kwargs = kwargs or {}
        self.into.extend(a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor) and not self._new(a))
        out = func(*args, **kwargs)
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.made[id(t)] = weakref.ref(t)
        return out


@dataclasses.dataclass
class _Entry:
    """One key's graph: "warm" (its first call ran eagerly), "ready" or "failed" (with the reason).

    A ready graph whose shared tensor changed is captured anew once (``recaptured``), then given up.
    """

    state: str
    reason: Optional[str] = None
    plan: Optional[Plan] = None
    graph: Optional[Replayable] = None
    leaves: list[torch.Tensor] = dataclasses.field(default_factory=list)
    shared: list[bool] = dataclasses.field(default_factory=list)
    slot: _Slot = dataclasses.field(default_factory=_Slot)
    start: dict[str, object] = dataclasses.field(default_factory=dict)
    kept: list[object] = dataclasses.field(default_factory=list)  # what the graph reads that others own
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    recaptured: bool = False


class _Stale(Exception):
    """A tensor the graph reads cannot be refreshed for this call (the call runs eagerly)."""


def _fresh(start: dict[str, object]) -> dict[str, object]:
    """A run's attributes as they were before its passes (its lists copied), to start a run again from."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in start.items()}


def _refresh(entry: _Entry, leaves: list[torch.Tensor]) -> None:
    """Copy the call's tensors into the graph's static inputs (those the graph shares must be the same)."""
    with torch.inference_mode():
        for static, new, shared in zip(entry.leaves, leaves, entry.shared):
            if static is new:
                continue
            if shared:
                raise _Stale("a tensor the graph reads is the caller's own and changed between calls")
            if any(st == 0 and n > 1 for st, n in zip(static.stride(), static.shape)):  # a broadcast view
                static, new = static._base, new._base  # type: ignore[assignment]
                if static is None or new is None or static.shape != new.shape:
                    raise _Stale("a broadcast tensor the graph reads has no base to refresh")
            static.copy_(new)


def _capture(entry: _Entry, settings: Settings, signature: tuple[object, ...], leaves: list[torch.Tensor]) -> None:
    """Plan the call again on private copies of its tensors, and capture that plan's passes."""
    planned = plan(private_copy(settings, {}))  # type: ignore[arg-type]  # a Settings, tensors cloned
    own, own_leaves = walk(planned)
    if own != signature:
        raise _Stale("the plan of private copies differs from the call's")
    entry.shared = [a is b for a, b in zip(own_leaves, leaves)]
    entry.leaves, entry.plan = own_leaves, planned
    object.__setattr__(planned.settings, "model", entry.slot)  # no strong reference to the model
    run = planned.run
    entry.start = _fresh(vars(run))

    def step() -> None:
        vars(run).update(_fresh(entry.start))
        run_passes(planned)

    entry.slot.model = settings.model
    try:
        touched = _Touched(entry.kept) if settings.inputs.is_cuda else contextlib.nullcontext()  # CPU: no pool
        with eval_mode(settings.model), keeping(entry.kept), touched:
            entry.graph = _backend[0].capture(step, settings.inputs.device)
    finally:
        entry.slot.model = None
    entry.state = "ready"


def _identity(model: Model) -> object:
    """What the graphs of a model are kept under: a front door's per-call wrapper's model."""
    return getattr(model, "cache_identity", model)


def _state() -> tuple[object, ...]:
    """The global settings a capture bakes in."""
    return (
        torch.is_autocast_enabled("cuda"),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.are_deterministic_algorithms_enabled(),
        os.environ.get("TORCHLIME_BACKEND"),
        os.environ.get("TORCHLIME_DISABLE_TRITON"),
    )


def _eager(planned: Plan, mode: str) -> tuple[Plan, Passes]:
    return planned, run_passes(planned)._replace(graph=mode)


def graphed_passes(settings: Settings, segments: Optional[str] = None) -> tuple[Plan, Passes]:
    """Plan a call and run its passes: replayed from the graph of its key, or eagerly (module docstring).

    Args:
        settings: the call's resolved arguments (``accelerate="cuda_graphs"``).
        segments: how a modality made the feature map (``ImagesInfo.segments``), if it says.

    Returns:
        The call's plan (its ``Run`` holding the scores and normal equations) and its ``Passes``, whose
        ``graph`` says how they ran.
    """
    with record_function("torchlime::plan"):
        planned = plan(settings)
    why = refusal(settings, planned, segments)
    if why is not None:
        return _eager(planned, f"eager: {why}")
    if planned.chunks.fixed is None and planned.chunks.rule is None:  # the chunk probe runs first
        return _eager(planned, "warm-up")
    try:
        signature, leaves = walk(planned)
    except Unwalkable as err:
        return _eager(planned, f"eager: {err}")
    owner, key = _identity(settings.model), (signature, _state())
    entry = GRAPHS.find(owner, key)
    if entry is None:
        GRAPHS.put(owner, key, _Entry("warm"))
        return _eager(planned, "warm-up")
    with entry.lock:  # one call replays a graph at a time
        mode = "replayed"
        if entry.state == "warm":
            try:
                _capture(entry, settings, signature, leaves)
            except Exception as err:  # a host synchronisation, an operator that cannot be captured, ...
                entry.state, entry.reason = "failed", f"the capture raised {type(err).__name__}: {err}"[:300]
                entry.plan, entry.graph, entry.leaves, entry.kept = None, None, [], []
                clear_caches(keep=GRAPHS)  # what a failed capture cached was never computed
            mode = "captured"
        if entry.state == "failed":
            return _eager(planned, f"eager: {entry.reason}")
        try:
            _refresh(entry, leaves)
        except _Stale as err:  # captured anew once (a cache made its tensor again), then given up
            entry.plan, entry.graph, entry.leaves, entry.kept = None, None, [], []
            entry.state, entry.reason = ("failed", str(err)) if entry.recaptured else ("warm", None)
            entry.recaptured = True
            return _eager(planned, f"eager: {err}")
        return _replay(entry, settings.model, planned, mode)


def _replay(entry: _Entry, model: Model, planned: Plan, mode: str) -> tuple[Plan, Passes]:
    """Replay the entry's graph with the call's model lent, and move clones of its outputs into ``planned``."""
    static = entry.plan
    if static is None or entry.graph is None:
        raise RuntimeError("a graph entry is ready without its plan")
    entry.slot.model = model
    try:
        with eval_mode(model):  # the stand-in backend runs the model's Python again
            entry.graph.replay()
        for name in _OUTPUTS:
            setattr(planned.run, name, clone_output(getattr(static.run, name)))
    finally:
        entry.slot.model = None
    used = [planned.settings.n_samples] * planned.run.batch
    return dataclasses.replace(planned, chunks=static.chunks), Passes(used, time.perf_counter(), mode)
