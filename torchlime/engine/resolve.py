"""Step 1 of an explanation: every argument checked, presets and names resolved, before any model call.

Explicit keywords win over the preset's settings for the modality, which win over its settings
for any modality, which win over the engine's defaults (``presets.resolve``); names of samplers,
kernels and surrogates become objects (``registry``). Every check raises an error that names the
argument, what was expected and what came; nothing here touches the device's data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, cast

import torch

from torchlime._checks import check_integer, check_tensor, describe, from_numpy
from torchlime.accel import accelerate_model
from torchlime.engine.config import Call, Config, fill_unset, given
from torchlime.engine.modality import Prepared
from torchlime.engine.presets import defaults
from torchlime.engine.registry import resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.methods.adaptive import Adaptive, resolve_n_samples
from torchlime.stages.forward.chunking import check_batch_size, check_max_memory
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.forward.targets import check_target
from torchlime.stages.perturb.blend import PerturbFn
from torchlime.stages.sampling import Sampler
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import Kernel
from torchlime.targets._base import Target
from torchlime.typing import (
    BaselineSpec,
    BatchSize,
    MemorySpec,
    Model,
    NormalizeSpec,
    OutputSelector,
    PresetName,
    PresetScope,
    Seed,
    TargetSpec,
)


@dataclass(frozen=True)
class Settings:
    """A call's resolved arguments (``resolve``); the fields are ``torchlime.explain``'s keywords.

    Attributes:
        model: the model the engine runs (the front door's adapter and ``accelerate`` applied).
        inputs: (B, ...) the inputs to explain.
        features: integer (B or 1, ...) their feature map.
        modality: which presets' settings applied.
        input_name: the name of ``inputs`` in error messages.
        adapter: the front door's model wrapper, or None.
        target: the target specification, checked for type and shape.
        n_samples: S, an int (the cap with ``n_samples="auto"``).
        adaptive: the settings of ``n_samples="auto"``, or None.
        baseline: the fill specification.
        sampler: the sampler (names and presets resolved), not yet bound to the call.
        kernel: the kernel, the same way.
        surrogate: the surrogate, the same way.
        batch_size: rows per model call, None (the default rule) or "measure".
        generator: the seed or generator of the masks.
        return_samples: keep masks (B, S, F), outputs (B, S, T) and weights (B, S).
        preset: the preset's name, or None.
        output: selector of tuple / dict model outputs.
        softmax: explain the softmax of the outputs.
        progress: show a progress bar.
        masks: explicit bool masks (B, S, F), or None.
        perturb_fn: the front door's perturbation, or None (the blend).
        normalize: ``(mean, std)`` per channel, or None.
        max_memory: the CUDA memory budget of a chunk.
        index: long (B,) index of every input in a larger data set, or None.
        chunk_format: dtype and layout of the perturbed chunks, or None (what the model wants).
        config: the configuration with the preset's settings filled in.
        call: the call, the same way.
    """

    model: Model
    inputs: torch.Tensor
    features: torch.Tensor
    modality: PresetScope
    input_name: str
    adapter: Optional[Callable[[Model], Model]]
    target: TargetSpec
    n_samples: int
    adaptive: Optional[Adaptive]
    baseline: BaselineSpec
    sampler: Sampler
    kernel: Kernel
    surrogate: Surrogate
    batch_size: BatchSize
    generator: Seed
    return_samples: bool
    preset: Optional[PresetName]
    output: OutputSelector
    softmax: bool
    progress: bool
    masks: Optional[torch.Tensor]
    perturb_fn: Optional[PerturbFn]
    normalize: Optional[NormalizeSpec]
    max_memory: MemorySpec
    index: Optional[torch.Tensor]
    chunk_format: Optional[InputFormat]
    config: Config
    call: Call


_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_inputs(inputs: object, features: object, name: str = "inputs") -> None:
    """Validate ``inputs`` and ``features``; no host sync.

    Args:
        inputs: (B, ...) the inputs to explain.
        features: integer (B or 1, ...) feature map, broadcastable to ``inputs``.
        name: the name of ``inputs`` in error messages.

    Raises:
        TypeError / ValueError: anything else (named, with what was expected and what came).
    """
    inputs = check_tensor(inputs, name)  # the inputs first: a bad input is why no feature map was made
    if inputs.ndim < 2:
        raise ValueError(f"`{name}` must be batched with shape (B, ...), got shape {tuple(inputs.shape)}")
    if inputs.shape[0] == 0:
        raise ValueError(f"`{name}` must hold at least one input (B >= 1), got shape {tuple(inputs.shape)}")
    features = check_tensor(features, "features")
    check_integer(features, "features")
    if features.device != inputs.device:
        raise ValueError(f"`features` must be on the same device as `{name}` ({inputs.device}), got {features.device}")
    ok = features.ndim == inputs.ndim and features.shape[0] in (1, inputs.shape[0])
    if ok:
        ok = all(f in (1, i) for f, i in zip(features.shape[1:], inputs.shape[1:]))
    if not ok:
        raise ValueError(
            f"`features` must have shape (B or 1, ...) broadcastable to `{name}` "
            f"{tuple(inputs.shape)}, got {tuple(features.shape)}"
        )


def resolve(model: Model, prepared: Prepared) -> Settings:
    """Check and resolve a prepared call (presets, names, n_samples, the model to run).

    Args:
        model: the caller's model.
        prepared: the call as its modality handed it over.

    Returns:
        The call's ``Settings``.

    Raises:
        TypeError / ValueError: a bad argument (named, with what was expected and what came).
    """
    fills = defaults(prepared.how.preset, prepared.scope)
    how, call = fill_unset(prepared.how, fills), fill_unset(prepared.call, fills)
    n_samples, adaptive = resolve_n_samples(given(call.n_samples, "n_samples"))
    if adaptive is not None and (call.return_samples or call.masks is not None):
        raise ValueError(
            "`n_samples='auto'` draws its own samples in rounds: it cannot return or take `masks` "
            "(pass an int n_samples)"
        )
    sampler = resolve_sampler(given(how.sampler, "sampler"))
    kernel = resolve_kernel(given(how.kernel, "kernel"))
    surrogate = resolve_surrogate(given(how.surrogate, "surrogate"))
    inputs, features = prepared.inputs, prepared.features
    check_inputs(inputs, features, prepared.input_name)
    target = from_numpy(given(call.target, "target"))  # np.int64(3), a numpy array of classes
    if isinstance(target, torch.Tensor) and target.ndim == 0 and target.dtype in _INTEGER_DTYPES:
        target = int(target.item())  # labels[i]: one class for every input, as an int
    check_target(target, inputs.shape[0])
    softmax: object = call.softmax  # a bool by type; 1 or a tensor(True) are as truthy
    if isinstance(target, Target) and softmax is not None and bool(softmax):
        raise ValueError(
            f"`softmax=True` does not apply to a structured target: {type(target).__name__} reads the model's raw "
            f"output itself (for class probabilities of a segmenter, pass Region(probability=True))"
        )
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    run_model = model if prepared.adapter is None else prepared.adapter(model)
    run_model = accelerate_model(run_model, how.accelerate, inputs)
    index = from_numpy(call.index)
    if index is not None:
        check_tensor(index, "index")
        check_integer(index, "index")
        if index.shape != (inputs.shape[0],):
            raise ValueError(f"`index` must have shape ({inputs.shape[0]},), got {tuple(index.shape)}")
    if adaptive is not None and not getattr(sampler, "adaptive", True):
        raise ValueError(
            f"`sampler` {sampler!r} plans all of its samples at once: it needs an int n_samples, not 'auto'"
        )
    return Settings(
        model=run_model,
        inputs=inputs,
        features=features,
        modality=prepared.scope,
        input_name=prepared.input_name,
        adapter=prepared.adapter,
        target=target,
        n_samples=n_samples,
        adaptive=adaptive,
        baseline=cast(BaselineSpec, given(how.baseline, "baseline")),  # a list / tuple is refused by the fill
        sampler=sampler,
        kernel=kernel,
        surrogate=surrogate,
        batch_size=check_batch_size(how.batch_size),
        generator=from_numpy(call.generator),  # np.int64(3) is a seed
        return_samples=call.return_samples,
        preset=how.preset,
        output=call.output,
        softmax=call.softmax,
        progress=how.progress,
        masks=call.masks,
        perturb_fn=call.perturb_fn,
        normalize=call.normalize,
        max_memory=check_max_memory(how.max_memory),
        index=index,
        chunk_format=call.chunk_format,
        config=how,
        call=call,
    )
