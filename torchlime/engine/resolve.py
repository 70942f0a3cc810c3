"""Step 1 of an explanation: every argument checked, presets and names resolved, before any model call.

Explicit keywords win over the preset's settings for the modality, which win over its settings
for any modality, which win over the engine's defaults (``presets.resolve``); names of samplers,
kernels and surrogates become objects (``registry``). Every check raises an error that names the
argument, what was expected and what came; nothing here touches the device's data.
"""

from __future__ import annotations

import dataclasses

import torch

from torchlime._util.checks import check_integer, check_tensor, describe, from_numpy
from torchlime.accel import accelerate_model
from torchlime.engine.config import fill_unset, given
from torchlime.engine.modality import Prepared
from torchlime.engine.presets import defaults
from torchlime.engine.registry import resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.engine.settings import Settings
from torchlime.methods.adaptive import resolve_n_samples
from torchlime.stages.forward.chunking import check_batch_size
from torchlime.stages.forward.targets import check_target
from torchlime.targets.base import Target
from torchlime.typing import Model

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
    batch_size, generator = check_batch_size(how.batch_size), from_numpy(call.generator)
    if batch_size is not how.batch_size:  # a numpy integer as a Python int
        how = dataclasses.replace(how, batch_size=batch_size)
    if generator is not call.generator or index is not call.index:  # np.int64(3) is a seed; a numpy index a tensor
        call = dataclasses.replace(call, generator=generator, index=index)
    return Settings(
        config=how,
        call=call,
        model=run_model,
        inputs=inputs,
        features=features,
        modality=prepared.scope,
        input_name=prepared.input_name,
        adapter=prepared.adapter,
        target=target,
        n_samples=n_samples,
        adaptive=adaptive,
        sampler=sampler,
        kernel=kernel,
        surrogate=surrogate,
    )
