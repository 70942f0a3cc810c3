"""Plain ``torch.cuda.CUDAGraph`` capture of a model, one graph per input signature (``accel``)."""

from __future__ import annotations

from typing import Callable, Protocol, cast

import torch

from torchlime._util.checks import describe
from torchlime._util.nested import Args, Kwargs, map_tensors, tensor_arguments

#: ``torch.cuda.Stream``, typed (torch leaves its constructor unannotated)
_stream: Callable[[torch.device], torch.cuda.Stream] = torch.cuda.Stream
#: a captured CUDA graph: the graph, its static arguments and its static output
Captured = tuple["torch.cuda.CUDAGraph", Args, Kwargs, object]


class CudaGraphs:
    """Plain ``torch.cuda.CUDAGraph`` capture of ``fn``, one graph per input signature.

    Each new signature (shapes, strides, dtypes, devices of the tensor arguments, the
    other arguments by value) is warmed up on a side stream, then captured with static
    input buffers; later calls copy their inputs into the buffers, replay the graph and
    return clones of the static outputs. Each graph keeps its own memory pool.
    """

    def __init__(self, fn: Callable[..., object], warmup: int = 2) -> None:
        self.fn = fn
        self.warmup = warmup
        self.graphs: dict[tuple[object, ...], Captured] = {}

    @staticmethod
    def signature(args: Args, kwargs: Kwargs) -> tuple[object, ...]:
        """The key of a call: shapes, strides, dtypes and devices of tensors, other arguments by value."""

        def one(a: object) -> tuple[object, ...]:
            if isinstance(a, torch.Tensor):
                return ("T", tuple(a.shape), a.stride(), a.dtype, a.device)
            try:
                hash(a)
            except TypeError:
                raise TypeError(
                    f"Accelerated(cuda_graphs=True) takes tensors and hashable arguments only, got {describe(a)}"
                ) from None
            return ("V", type(a), a)

        return (
            tuple(one(a) for a in args),
            tuple((k, one(v)) for k, v in sorted(kwargs.items())),
            torch.is_autocast_enabled("cuda"),
            torch.get_autocast_dtype("cuda"),
        )

    def __call__(self, *args: object, **kwargs: object) -> object:
        key = self.signature(args, kwargs)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self.graphs[key] = self._capture(args, kwargs)
        graph, s_args, s_kwargs, s_out = entry
        for static, new in zip((*s_args, *s_kwargs.values()), (*args, *kwargs.values())):
            if isinstance(static, torch.Tensor):
                static.copy_(cast(torch.Tensor, new))  # the same signature: a tensor where the static one is
        graph.replay()
        return map_tensors(torch.clone, s_out)

    def _capture(self, args: Args, kwargs: Kwargs) -> Captured:
        s_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        s_kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        device = tensor_arguments(args, kwargs)[0].device
        side = _stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: lazy init, cuDNN algorithm choice
            for _ in range(self.warmup):
                self.fn(*s_args, **s_kwargs)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            s_out = self.fn(*s_args, **s_kwargs)
        return graph, s_args, s_kwargs, s_out


class Replayable(Protocol):
    """A captured piece of work: ``replay()`` runs it again on the buffers it was captured with."""

    def replay(self) -> None:
        """Run the captured work again."""


class GraphBackend(Protocol):
    """How the engine captures and replays its stages (``engine.graphed``): CUDA graphs, or a test stand-in."""

    def supports(self, device: torch.device) -> bool:
        """Whether work on ``device`` can be captured."""

    def capture(self, fn: Callable[[], None], device: torch.device) -> Replayable:
        """Capture ``fn`` (its Python runs once; its device work is recorded, then run by ``replay``)."""


class CudaGraphBackend:
    """``GraphBackend`` of ``torch.cuda.CUDAGraph``: one graph and memory pool per capture, on a side stream.

    ``capture`` records ``fn``'s kernels without running them (``torch.cuda.graph``: a synchronisation,
    the caching allocator's private pool); the caller replays the graph to run them. A host
    synchronisation inside ``fn`` (``.item()``, a pageable copy) makes the capture raise.
    """

    def supports(self, device: torch.device) -> bool:
        """True for a CUDA device.

        Args:
            device: where the work runs.
        """
        return device.type == "cuda" and torch.cuda.is_available()

    def capture(self, fn: Callable[[], None], device: torch.device) -> Replayable:
        """One ``torch.cuda.CUDAGraph`` of ``fn``'s kernels, captured on a side stream of ``device``.

        Args:
            fn: the work (its outputs stay where it leaves them: the graph's static buffers).
            device: the CUDA device.

        Returns:
            The graph (``replay()`` runs it on the current stream's order).
        """
        graph = torch.cuda.CUDAGraph()
        side = _stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        # thread_local: another thread's CUDA work during the capture is not refused (nor captured)
        with torch.cuda.device(device), torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            fn()
        torch.cuda.current_stream(device).wait_stream(side)
        return cast(Replayable, graph)
