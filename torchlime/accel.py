"""``Accelerated``: the usual fast-inference options as one model wrapper.

LIME spends almost all of its time in the forward pass of the perturbed batch, so
the options that speed up inference speed up explanations. ``Accelerated`` wraps
any model (an ``nn.Module`` or a callable) and is itself an ``nn.Module`` that
returns float32 scores, so ``explain`` / ``explain_image`` take it like any model::

    fast = Accelerated(model, autocast=torch.bfloat16, channels_last=True, compile=True)
    exp = explain_image(fast, images)

Every option is off by default (the wrapper then only casts the output to float32).
Measured speed-ups are reported in ``benchmarks/README.md`` once a GPU run exists;
this module makes no claim of its own.
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Optional, Union

import torch
from torch import nn

from torchlime._checks import check_positive_int, describe
from torchlime.stages.forward.model import InputFormat

AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)
CompileArg = Union[bool, dict]


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensor arguments, positional first, in order."""
    return [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]


def _map(fn: Callable[[torch.Tensor], Any], out: Any) -> Any:
    """Apply ``fn`` to every tensor of a (nested) tensor / tuple / list / dict output."""
    if isinstance(out, torch.Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        items = [_map(fn, o) for o in out]
        return type(out)(items) if not hasattr(out, "_fields") else type(out)(*items)
    if isinstance(out, Mapping):
        return _rebuild(out, {k: _map(fn, v) for k, v in out.items()})
    return out


def _rebuild(template: Mapping, values: dict) -> Any:
    """A mapping of the same type as ``template`` (e.g. a transformers ``ModelOutput``) when possible."""
    for make in (lambda: type(template)(**values), lambda: type(template)(values)):
        try:
            return make()
        except Exception:  # noqa: BLE001 - fall back to a plain dict
            continue
    return dict(values)


def _concat(parts: list[Any], sizes: list[int]) -> Any:
    """Concatenate per-chunk outputs along dim 0 (leaves without a batch dim are taken from part 0)."""
    first = parts[0]
    if isinstance(first, torch.Tensor):
        if first.ndim >= 1 and all(p.shape[0] == s for p, s in zip(parts, sizes)):
            return torch.cat(parts)
        return first
    if isinstance(first, (tuple, list)):
        items = [_concat([p[i] for p in parts], sizes) for i in range(len(first))]
        return type(first)(items) if not hasattr(first, "_fields") else type(first)(*items)
    if isinstance(first, Mapping):
        return _rebuild(first, {k: _concat([p[k] for p in parts], sizes) for k in first})
    raise TypeError(
        f"Accelerated with `chunk_size` or `cuda_graphs` needs model outputs made of "
        f"tensors, tuples, lists or dicts to split and join, got {describe(first)}"
    )


def _to_float32(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.is_floating_point() else t


def bucket(n: int, chunk_size: Optional[int]) -> int:
    """The padded size of a batch of ``n`` rows: the next power of two, capped at ``chunk_size``.

    Fixed-shape runs (``cuda_graphs`` or ``chunk_size``) therefore see at most
    ``log2(chunk_size) + 2`` distinct batch sizes, each compiled / captured once.
    """
    p = 1 << max(0, math.ceil(math.log2(max(n, 1))))
    return p if chunk_size is None else min(p, chunk_size)


class _CudaGraphs:
    """Plain ``torch.cuda.CUDAGraph`` capture of ``fn``, one graph per input signature.

    Each new signature (shapes, strides, dtypes, devices of the tensor arguments, the
    other arguments by value) is warmed up on a side stream, then captured with static
    input buffers; later calls copy their inputs into the buffers, replay the graph and
    return clones of the static outputs. Each graph keeps its own memory pool.
    """

    def __init__(self, fn: Callable[..., Any], warmup: int = 2) -> None:
        self.fn = fn
        self.warmup = warmup
        self.graphs: dict[tuple, tuple] = {}

    @staticmethod
    def signature(args: tuple, kwargs: dict) -> tuple:
        def one(a: Any) -> Any:
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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self.signature(args, kwargs)
        entry = self.graphs.get(key)
        if entry is None:
            entry = self.graphs[key] = self._capture(args, kwargs)
        graph, s_args, s_kwargs, s_out = entry
        for static, new in zip((*s_args, *s_kwargs.values()), (*args, *kwargs.values())):
            if isinstance(static, torch.Tensor):
                static.copy_(new)
        graph.replay()
        return _map(torch.clone, s_out)

    def _capture(self, args: tuple, kwargs: dict) -> tuple:
        s_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        s_kwargs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        device = _tensors(args, kwargs)[0].device
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up: lazy init, cuDNN algorithm choice
            for _ in range(self.warmup):
                self.fn(*s_args, **s_kwargs)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            s_out = self.fn(*s_args, **s_kwargs)
        return graph, s_args, s_kwargs, s_out


class Accelerated(nn.Module):
    """Wrap a model with fast-inference options; returns float32 scores.

    Args:
        model: an ``nn.Module`` or any callable on (c, ...) batches (tensors, or several
            tensor arguments whose dim 0 is the batch).
        autocast: None (off), ``torch.bfloat16`` or ``torch.float16``: run the model under
            ``torch.autocast`` on the inputs' device (CUDA or CPU). Buys: tensor-core
            matmuls/convolutions and half the activation traffic on GPUs; on CPUs, speed
            only where the CPU has bf16/fp16 units (else it can be slower). Scores change
            by the reduced precision (about 1e-2 relative for bf16); the output is still
            float32.
        channels_last: convert the wrapped module's 4-D weights to ``torch.channels_last``
            **in place** (values unchanged) and every 4-D input to channels_last. Buys:
            cuDNN's NHWC convolution kernels (tensor cores), chiefly together with
            ``autocast``; no effect on models without 4-D convolutions.
        compile: False, True, or a dict of ``torch.compile`` keyword arguments (e.g.
            ``{"mode": "max-autotune"}``, ``{"backend": "aot_eager"}``). Buys: fused
            elementwise work and fewer kernel launches. Costs: a compilation on the first
            call of every new input shape (seconds to minutes), which is why fixed shapes
            (``chunk_size``) help.
        cuda_graphs: replay the model's kernels as CUDA graphs (CUDA only). With
            ``compile`` this is ``torch.compile(mode="reduce-overhead")``; without, a plain
            ``torch.cuda.CUDAGraph`` is captured per batch shape. Buys: no per-kernel
            launch overhead (matters for small models and small chunks). Costs: one
            capture per batch shape and a private memory pool per captured shape.
            Implies fixed shapes.
        chunk_size: fixed-shape mode: batches larger than ``chunk_size`` are split into
            chunks of ``chunk_size``, and every chunk is padded (repeating its last row) to
            the next power of two capped at ``chunk_size``; outputs are sliced back. The
            model then sees a handful of shapes. With ``cuda_graphs`` and no
            ``chunk_size`` batches are padded to the next power of two without splitting.

    The wrapper is for inference: ``forward`` runs under ``torch.inference_mode()``.

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and got);
            ``cuda_graphs=True`` without CUDA or for a module whose weights are not on CUDA.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(144, 2))
        >>> fast = Accelerated(net, autocast=torch.bfloat16, chunk_size=8)
        >>> fast(torch.rand(10, 3, 8, 8)).dtype
        torch.float32
    """

    def __init__(
        self,
        model: Callable[..., Any],
        *,
        autocast: Optional[torch.dtype] = None,
        channels_last: bool = False,
        compile: CompileArg = False,
        cuda_graphs: bool = False,
        chunk_size: Optional[int] = None,
    ) -> None:
        super().__init__()
        if not callable(model):
            raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
        if autocast is not None:
            if not isinstance(autocast, torch.dtype):
                raise TypeError(f"`autocast` must be None, torch.bfloat16 or torch.float16, got {describe(autocast)}")
            if autocast not in AUTOCAST_DTYPES:
                raise ValueError(f"`autocast` must be None, torch.bfloat16 or torch.float16, got {autocast}")
        for name, value in (("channels_last", channels_last), ("cuda_graphs", cuda_graphs)):
            if not isinstance(value, bool):
                raise TypeError(f"`{name}` must be a bool, got {describe(value)}")
        if not isinstance(compile, (bool, dict)):
            raise TypeError(
                f"`compile` must be a bool or a dict of torch.compile keyword arguments, got {describe(compile)}"
            )
        if chunk_size is not None:
            check_positive_int(chunk_size, "chunk_size")
        if cuda_graphs:
            if not torch.cuda.is_available():
                raise ValueError(
                    "`cuda_graphs=True` needs a CUDA device, but torch.cuda.is_available() "
                    "is False; use cuda_graphs=False on CPU"
                )
            devices = {t.device for t in _module_tensors(model)}
            off = sorted(str(d) for d in devices if d.type != "cuda")
            if off:
                raise ValueError(
                    f"`cuda_graphs=True` needs the model's weights on a CUDA device, "
                    f"got weights on {off}; move the model with .to('cuda') first"
                )

        self.model = model  # registered as a submodule when it is one: .to(), .eval(), parameters
        self.autocast = autocast
        self.channels_last = channels_last
        self.compile_options = compile  # not ``self.compile``: that would hide nn.Module.compile()
        self.cuda_graphs = cuda_graphs
        self.chunk_size = chunk_size
        if channels_last and isinstance(model, nn.Module):
            model.to(memory_format=torch.channels_last)
        fn: Callable[..., Any] = model
        if compile is not False:
            kwargs = dict(compile) if isinstance(compile, dict) else {}
            if cuda_graphs:
                kwargs.setdefault("mode", "reduce-overhead")
            if self.fixed_shapes:
                kwargs.setdefault("dynamic", False)
            fn = torch.compile(model, **kwargs)
        elif cuda_graphs:
            inner = model
            fn = _CudaGraphs(lambda *a, **k: _map(_to_float32, inner(*a, **k)))
        # kept out of the submodule registry: the compiled module shares ``model``'s parameters
        object.__setattr__(self, "_fn", fn)

    @property
    def input_format(self) -> InputFormat:
        """The chunks this wrapper wants: its autocast dtype and channels-last 4-D inputs."""
        return InputFormat(self.autocast, self.channels_last)

    @property
    def fixed_shapes(self) -> bool:
        """Whether batches are split / padded to a bounded set of shapes."""
        return self.cuda_graphs or self.chunk_size is not None

    def extra_repr(self) -> str:
        return (
            f"autocast={self.autocast}, channels_last={self.channels_last}, compile={self.compile_options}, "
            f"cuda_graphs={self.cuda_graphs}, chunk_size={self.chunk_size}"
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Scores of a batch.

        Args:
            *args, **kwargs: the wrapped model's arguments; tensors whose dim 0 equals
                the batch size (that of the first tensor argument) are split / padded.

        Returns:
            The model's output with every floating tensor in float32 (e.g. (c, K) scores).
        """
        tensors = _tensors(args, kwargs)
        if not tensors:
            raise TypeError(
                "Accelerated needs at least one tensor argument (the batch), got "
                f"{[describe(a) for a in (*args, *kwargs.values())]}"
            )
        if self.cuda_graphs and not tensors[0].is_cuda:
            raise ValueError(f"Accelerated(cuda_graphs=True) needs CUDA inputs, got inputs on {tensors[0].device}")
        with torch.inference_mode():
            n = tensors[0].shape[0] if tensors[0].ndim else 0
            if not self.fixed_shapes or n == 0:
                return self._run(args, kwargs)
            step = self.chunk_size or n
            parts, sizes = [], []
            for start in range(0, n, step):
                stop = min(start + step, n)
                size = bucket(stop - start, self.chunk_size)
                a, k = _slice_pad(args, kwargs, n, start, stop, size)
                out = self._run(a, k)
                parts.append(_map(lambda t, s=stop - start, p=size: t[:s] if t.ndim and t.shape[0] == p else t, out))
                sizes.append(stop - start)
            return parts[0] if len(parts) == 1 else _concat(parts, sizes)

    def _run(self, args: tuple, kwargs: dict) -> Any:
        """One call of the (compiled / graphed) model on prepared arguments."""
        if self.channels_last:

            def fmt(a: Any) -> Any:
                if isinstance(a, torch.Tensor) and a.ndim == 4:
                    return a.contiguous(memory_format=torch.channels_last)
                return a

            args = tuple(fmt(a) for a in args)
            kwargs = {k: fmt(v) for k, v in kwargs.items()}
        device_type = _tensors(args, kwargs)[0].device.type
        if self.cuda_graphs and self.compile_options is not False:
            torch.compiler.cudagraph_mark_step_begin()
        if self.autocast is not None:
            # cuda graphs: the autocast weight-cast cache must not outlive a capture
            with torch.autocast(device_type, dtype=self.autocast, cache_enabled=not self.cuda_graphs):
                out = self._fn(*args, **kwargs)
        else:
            out = self._fn(*args, **kwargs)
        if self.cuda_graphs and self.compile_options is not False:
            out = _map(torch.clone, out)  # cudagraph-tree outputs are overwritten by the next replay
        return _map(_to_float32, out)


def _module_tensors(model: Any) -> list[torch.Tensor]:
    if isinstance(model, nn.Module):
        return [*model.parameters(), *model.buffers()]
    return []


def _slice_pad(args: tuple, kwargs: dict, n: int, start: int, stop: int, size: int) -> tuple[tuple, dict]:
    """Rows ``start:stop`` of every batched tensor argument, padded to ``size`` rows by repeating the last."""

    def one(a: Any) -> Any:
        if not (isinstance(a, torch.Tensor) and a.ndim and a.shape[0] == n):
            return a
        part = a[start:stop]
        extra = size - (stop - start)
        if extra:
            part = torch.cat((part, part[-1:].expand(extra, *part.shape[1:])))
        return part

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


ACCELERATE = (None, "fast")
_FAST: weakref.WeakKeyDictionary[Any, Accelerated] = weakref.WeakKeyDictionary()


def accelerate_model(model: Callable[..., Any], accelerate: Optional[str], inputs: torch.Tensor) -> Callable[..., Any]:
    """The model the engine runs for ``accelerate`` (None or "fast").

    "fast" on CUDA inputs: ``Accelerated(model, autocast=torch.bfloat16, channels_last=True,
    compile=True)`` (channels-last for 4-D floating inputs, which converts the model's 4-D
    weights to channels-last in place, values unchanged), made once per model and reused, so it
    compiles once. A front door's per-call wrapper (one with ``cache_identity`` and ``model``,
    e.g. the inverse-STFT or token wrapper) gets its inner model accelerated instead. On the CPU
    the model runs as given (bf16 and compilation rarely pay there).

    Raises:
        ValueError: for another value of ``accelerate``.
    """
    if accelerate is None:
        return model
    if not isinstance(accelerate, str) or accelerate not in ACCELERATE:
        raise ValueError(f"`accelerate` must be None or 'fast', got {describe(accelerate)}")
    if not inputs.is_cuda:
        return model
    inner = getattr(model, "cache_identity", None)
    if inner is not None and getattr(model, "model", None) is inner:
        model.model = _fast(inner, image_like=False)
        return model
    return _fast(model, image_like=inputs.ndim == 4 and inputs.is_floating_point())


def _fast(model: Callable[..., Any], image_like: bool) -> Accelerated:
    """The cached ``Accelerated`` "fast" wrapper of ``model``."""
    try:
        fast = _FAST.get(model)
    except TypeError:  # not weak-referenceable: no reuse
        fast = None
    if fast is None:
        fast = Accelerated(model, autocast=torch.bfloat16, channels_last=image_like, compile=True)
        with contextlib.suppress(TypeError):
            _FAST[model] = fast
    return fast
