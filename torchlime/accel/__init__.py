"""``Accelerated``: the usual fast-inference options as one model wrapper.

LIME spends almost all of its time in the forward pass of the perturbed batch, so the options that
speed up inference speed up explanations. ``Accelerated`` wraps any model (an ``nn.Module`` or a
callable) and is itself an ``nn.Module`` that returns float32 scores, so ``explain`` takes it like
any model: ``explain_image(Accelerated(model, autocast=torch.bfloat16, compile=True), images)``.
Every option is off by default (the wrapper then only casts the output to float32).
"""

from __future__ import annotations

import contextlib
import math
import weakref
from typing import Callable, Optional, Protocol, cast

import torch
from torch import nn

from torchlime._util.checks import check_positive_int, describe
from torchlime._util.nested import Args, Kwargs, concat_outputs, map_tensors, slice_pad, tensor_arguments, to_float32
from torchlime.accel._cudagraphs import CudaGraphBackend as CudaGraphBackend
from torchlime.accel._cudagraphs import CudaGraphs
from torchlime.accel._cudagraphs import GraphBackend as GraphBackend
from torchlime.accel._cudagraphs import Replayable as Replayable
from torchlime.stages.forward.model import InputFormat as InputFormat  # the chunk dtype/layout a call may set
from torchlime.typing import AccelerateMode, Model
from torchlime.typing import CompileArg as CompileArg

AUTOCAST_DTYPES = (torch.bfloat16, torch.float16)
#: ``torch.compiler.cudagraph_mark_step_begin``, typed (torch leaves it unannotated)
_mark_step: Callable[[], None] = torch.compiler.cudagraph_mark_step_begin


def bucket(n: int, chunk_size: Optional[int]) -> int:
    """The padded size of a batch of ``n`` rows: the next power of two, capped at ``chunk_size``.

    Fixed-shape runs (``cuda_graphs`` or ``chunk_size``) therefore see at most
    ``log2(chunk_size) + 2`` distinct batch sizes, each compiled / captured once.

    Args:
        n: the rows of the batch.
        chunk_size: the cap, or None.

    Returns:
        The padded size.
    """
    p = 1 << max(0, math.ceil(math.log2(max(n, 1))))
    return p if chunk_size is None else min(p, chunk_size)


class Accelerated(nn.Module):
    """Wrap a model with fast-inference options; returns float32 scores.

    LIME spends almost all of its time in the forward pass, so the options that speed up inference
    speed up explanations. Measured speed-ups are reported in ``benchmarks/README.md`` once a GPU run
    exists; this class makes no claim of its own.

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

    _fn: Callable[..., object]  # the model as called: compiled, graphed or as given (not a submodule)

    def __init__(  # noqa: C901
        self,
        model: Model,
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
            devices = {t.device for t in _moduletensor_arguments(model)}
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
        fn: Callable[..., object] = model
        if compile is not False:
            kwargs = dict(compile) if isinstance(compile, dict) else {}
            if cuda_graphs:
                kwargs.setdefault("mode", "reduce-overhead")
            if self.fixed_shapes:
                kwargs.setdefault("dynamic", False)
            fn = torch.compile(model, **kwargs)
        elif cuda_graphs:
            inner = model
            fn = CudaGraphs(lambda *a, **k: map_tensors(to_float32, inner(*a, **k)))
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
        """The options, for ``repr``."""
        return (
            f"autocast={self.autocast}, channels_last={self.channels_last}, compile={self.compile_options}, "
            f"cuda_graphs={self.cuda_graphs}, chunk_size={self.chunk_size}"
        )

    def forward(self, *args: object, **kwargs: object) -> object:
        """Scores of a batch.

        Args:
            *args: the wrapped model's positional arguments; tensors (c, ...) whose dim 0 equals the
                batch size c (that of the first tensor argument) are split / padded.
            **kwargs: its keyword arguments, the same way.

        Returns:
            The model's output with every floating tensor in float32 (e.g. (c, K) scores).
        """
        tensors = tensor_arguments(args, kwargs)
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
                a, k = slice_pad(args, kwargs, n, start, stop, size)
                out = self._run(a, k)

                def trim(t: torch.Tensor, s: int = stop - start, p: int = size) -> torch.Tensor:
                    return t[:s] if t.ndim and t.shape[0] == p else t

                parts.append(map_tensors(trim, out))
                sizes.append(stop - start)
            return parts[0] if len(parts) == 1 else concat_outputs(parts, sizes)

    def _run(self, args: Args, kwargs: Kwargs) -> object:
        """One call of the (compiled / graphed) model on prepared arguments."""
        if self.channels_last:

            def fmt(a: object) -> object:
                if isinstance(a, torch.Tensor) and a.ndim == 4:
                    return a.contiguous(memory_format=torch.channels_last)
                return a

            args = tuple(fmt(a) for a in args)
            kwargs = {k: fmt(v) for k, v in kwargs.items()}
        device_type = tensor_arguments(args, kwargs)[0].device.type
        if self.cuda_graphs and self.compile_options is not False:
            _mark_step()
        if self.autocast is not None:
            # cuda graphs: the autocast weight-cast cache must not outlive a capture
            with torch.autocast(device_type, dtype=self.autocast, cache_enabled=not self.cuda_graphs):
                out = self._fn(*args, **kwargs)
        else:
            out = self._fn(*args, **kwargs)
        if self.cuda_graphs and self.compile_options is not False:
            out = map_tensors(torch.clone, out)  # cudagraph-tree outputs are overwritten by the next replay
        return map_tensors(to_float32, out)


def _moduletensor_arguments(model: object) -> list[torch.Tensor]:
    if isinstance(model, nn.Module):
        return [*model.parameters(), *model.buffers()]
    return []


ACCELERATE: tuple[Optional[AccelerateMode], ...] = (None, "fast", "cuda_graphs")
_FAST: weakref.WeakKeyDictionary[Model, Accelerated] = weakref.WeakKeyDictionary()


class _FrontDoorWrapper(Protocol):
    """A front door's per-call model wrapper: the model it wraps, and the identity it caches under."""

    model: Model
    cache_identity: Model


def accelerate_model(model: Model, accelerate: object, inputs: torch.Tensor) -> Model:
    """The model the engine runs for ``accelerate`` (None, "fast" or "cuda_graphs").

    "fast" on CUDA inputs: ``Accelerated(model, autocast=torch.bfloat16, channels_last=True,
    compile=True)`` (channels-last for 4-D floating inputs, which converts the model's 4-D
    weights to channels-last in place, values unchanged), made once per model and reused, so it
    compiles once. A front door's per-call wrapper (one with ``cache_identity`` and ``model``,
    e.g. the inverse-STFT or token wrapper) gets its inner model accelerated instead. On the CPU
    the model runs as given (bf16 and compilation rarely pay there).

    Args:
        model: the model the engine would run.
        accelerate: None, "fast" or "cuda_graphs" (the model as given: the engine graphs its own stages
            with the model's forward, ``engine.graphed``).
        inputs: (B, ...) the explained inputs (their device and shape decide).

    Returns:
        The model to run.

    Raises:
        ValueError: for another value of ``accelerate``.
    """
    if accelerate is None:
        return model
    if not isinstance(accelerate, str) or accelerate not in ACCELERATE:
        raise ValueError(f"`accelerate` must be None, 'fast' or 'cuda_graphs', got {describe(accelerate)}")
    if accelerate == "cuda_graphs" or not inputs.is_cuda:
        return model
    inner = getattr(model, "cache_identity", None)
    if inner is not None and getattr(model, "model", None) is inner:
        wrapper = cast(_FrontDoorWrapper, model)  # checked just above
        wrapper.model = _fast(wrapper.cache_identity, image_like=False)  # ``inner``
        return model
    return _fast(model, image_like=inputs.ndim == 4 and inputs.is_floating_point())


def _fast(model: Model, image_like: bool) -> Accelerated:
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
