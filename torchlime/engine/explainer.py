"""The entry of the engine: ``Explainer`` holds how to explain, ``explain`` explains, ``execute`` runs.

``Explainer(sampler=..., kernel=..., surrogate=..., baseline=..., preset=...)`` is the "how" (the
configuration, checked when it is made, reusable for any number of calls); its ``.explain(model,
inputs, features, target=..., n_samples=..., generator=...)`` takes the "what". ``torchlime.explain``
is the same in one call. Both hand ``execute`` a ``request.Request``, as the modality front doors do,
and ``execute`` runs the four steps of an explanation, each in a module of its own: ``resolve``
(arguments, presets and names checked and resolved) -> ``plan`` (feature map, masks, fill,
perturbation, chunk sizes) -> ``run`` (the chunked forward passes and the accumulated normal
equations) -> ``assemble`` (the fit, the quality check, the ``Explanation``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Union, cast

import torch

from torchlime._checks import describe, from_numpy
from torchlime.accel import ACCELERATE
from torchlime.engine.assemble import assemble
from torchlime.engine.explanation import Explanation
from torchlime.engine.multi import packed_request
from torchlime.engine.plan import plan
from torchlime.engine.presets import UNSET, check_preset
from torchlime.engine.registry import resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.engine.request import Request
from torchlime.engine.resolve import resolve
from torchlime.engine.run import run_passes
from torchlime.stages.forward.chunking import BatchSize, check_batch_size, check_max_memory
from torchlime.stages.forward.errors import expecting
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import PerturbFn
from torchlime.stages.perturb.fills import NAMES
from torchlime.typing import (
    AccelerateMode,
    BaselineSpecs,
    FeatureSpec,
    KernelSpec,
    MemorySpec,
    Model,
    NormalizeSpec,
    NSamples,
    OutputSelector,
    PresetName,
    SamplerSpec,
    Seed,
    SurrogateSpec,
    TargetSpec,
)


def execute(request: Request) -> Explanation:
    """Explain ``request``: resolve, plan, run, assemble.

    Args:
        request: the call, as the front door hands it over.

    Returns:
        The ``Explanation``.
    """
    with expecting(request.input_name, request.inputs):
        settings = resolve(request)
        prepared = plan(settings)
        passes = run_passes(prepared)
        return assemble(prepared, passes)


@dataclass(frozen=True)
class Explainer:
    """How to explain: the sampler, kernel, surrogate, fill and run settings of LIME calls.

    Every argument is checked when the explainer is made; unset ones take the preset's setting,
    else the engine's default (Bernoulli(1/2) masks, lime's cosine kernel of width 0.25,
    ``Ridge(alpha=1)``, a fill of 0), when ``explain`` runs.

    Attributes:
        sampler: a ``Sampler`` or a name: "bernoulli", "uniform_count", "shapley", "stratified",
            "antithetic", "sobol".
        kernel: a ``Kernel``, a float width of lime's kernel, or a name: "lime", "captum",
            "uniform", or SMILE's "wasserstein", "ks", "kuiper", "cvm", "anderson".
        surrogate: a ``Surrogate`` or a name: "ridge", "lasso", "klasso", "bayes".
        baseline: the fill of hidden features: a number, a tensor (B, ...) or (...), a callable
            ``inputs -> tensor``, or "zero", "mean", "blur", "min", "max", "signal_mean", "noise",
            "shuffle" (``torchlime.stages.perturb.fills``); for a tuple of inputs, one fill or a tuple
            of fills, one per tensor.
        preset: None or a name in ``presets.PRESETS`` ("lime", "lime_text", "captum", "slime",
            "kernel_shap"): another implementation's defaults for whatever is not set here.
        accelerate: None (the model runs as given) or "fast" (bf16 autocast, channels-last and
            ``torch.compile`` on CUDA; ``accel.accelerate_model``).
        max_memory: CUDA memory budget of a chunk: bytes (int) or a fraction of the device's
            memory in (0, 1]; None: half of the memory free when a call starts.
        batch_size: rows per model call; None: the default rule (the same chunks on every call);
            "measure": timed once per model and input shape (``torchlime.stages.forward.chunking``).
        progress: show a progress bar over the samples.

    Raises:
        TypeError / ValueError: an argument of the wrong type or value, named, with what was
            expected and what came.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features: pairs of pixels in a row
        >>> lime = Explainer(kernel="lime", surrogate="ridge", baseline="mean")
        >>> exp = lime.explain(model, torch.rand(2, 1, 4, 4), feats, target="top2", n_samples=64)
        >>> exp.coef.shape
        torch.Size([2, 2, 8])
    """

    sampler: SamplerSpec = UNSET
    kernel: KernelSpec = UNSET
    surrogate: SurrogateSpec = UNSET
    baseline: BaselineSpecs = UNSET
    preset: Optional[PresetName] = None
    accelerate: Optional[AccelerateMode] = None
    max_memory: MemorySpec = None
    batch_size: BatchSize = None
    progress: bool = False

    def __post_init__(self) -> None:
        check_preset(self.preset)
        if self.sampler is not UNSET:
            resolve_sampler(self.sampler)
        if self.kernel is not UNSET:
            resolve_kernel(self.kernel)
        if self.surrogate is not UNSET:
            resolve_surrogate(self.surrogate)
        if isinstance(self.baseline, str) and self.baseline not in NAMES:
            raise ValueError(f"`baseline` string must be one of {list(NAMES)}, got {self.baseline!r}")
        if self.accelerate is not None and (not isinstance(self.accelerate, str) or self.accelerate not in ACCELERATE):
            raise ValueError(f"`accelerate` must be None or 'fast', got {describe(self.accelerate)}")
        check_max_memory(self.max_memory)
        check_batch_size(self.batch_size)
        if not isinstance(self.progress, bool):
            raise TypeError(f"`progress` must be True or False, got {describe(self.progress)}")

    def explain(
        self,
        model: Model,
        inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
        features: FeatureSpec = None,
        *,
        additional_forward_args: object = None,
        target: TargetSpec = UNSET,
        n_samples: NSamples = UNSET,
        generator: Seed = None,
        index: Optional[torch.Tensor] = None,
        return_samples: bool = False,
        output: OutputSelector = None,
        softmax: bool = False,
        masks: Optional[torch.Tensor] = None,
        perturb_fn: Optional[PerturbFn] = None,
        normalize: Optional[NormalizeSpec] = None,
        chunk_format: Optional[InputFormat] = None,
    ) -> Explanation:
        """Explain B inputs with this configuration (the arguments are ``torchlime.explain``'s).

        Args:
            model: any callable from a (c, ...) batch to scores (c, K) or (c,).
            inputs: (B, ...) the inputs to explain (never modified), or a tuple of tensors, each
                (B, *shape_i), for a model called as ``model(*inputs, *additional_forward_args)``.
            features: integer (B or 1, ...) feature map, broadcastable to ``inputs``, or None: one
                feature per element (captum's default); for a tuple, None or a tuple of maps, one
                per tensor (an id used in several tensors is one feature).
            additional_forward_args: passed to the model after the inputs, never perturbed: one
                object or a tuple; tensors whose first dim is B follow each row's input.
            target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all" or "topK".
            n_samples: S samples per input (the input itself included), or "auto".
            generator: an int seed or a ``torch.Generator``; None: seed 0.
            index: long (B,) index of every input in a larger data set (masks follow it).
            return_samples: keep the masks (B, S, F), outputs (B, S, T) and weights (B, S).
            output: selector of tuple / dict model outputs (a key, an index or a callable).
            softmax: explain the softmax of the outputs.
            masks: explicit bool masks (B, S, F) instead of sampling.
            perturb_fn: replaces the blend of stage 3 (``stages.perturb.blend.PerturbFn``).
            normalize: ``(mean, std)`` per channel (dim 1), fused into the blend.
            chunk_format: dtype and layout of the perturbed chunks (``stages.forward.model.InputFormat``).

        Returns:
            ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T).
        """
        # numpy where tensors go (copies), numpy integers where ints go: the same rule at every door
        inputs, features, target, masks = (
            from_numpy(inputs),
            from_numpy(features),
            from_numpy(target),
            from_numpy(masks),
        )
        options = dict(
            sampler=self.sampler,
            kernel=self.kernel,
            surrogate=self.surrogate,
            baseline=self.baseline,
            preset=self.preset,
            accelerate=self.accelerate,
            max_memory=self.max_memory,
            batch_size=self.batch_size,
            progress=self.progress,
            target=target,
            n_samples=n_samples,
            generator=generator,
            index=index,
            return_samples=return_samples,
            output=output,
            softmax=softmax,
            masks=masks,
            perturb_fn=perturb_fn,
            normalize=normalize,
            chunk_format=chunk_format,
        )
        # a tuple of tensors (a list of plain values is one malformed input, refused by name below)
        several = isinstance(inputs, (tuple, list)) and (not inputs or any(isinstance(x, torch.Tensor) for x in inputs))
        if several or additional_forward_args is not None:
            return execute(packed_request(model, inputs, features, options, additional_forward_args))
        if features is None and isinstance(inputs, torch.Tensor) and inputs.dim() >= 1:
            features = torch.arange(inputs[0].numel(), device=inputs.device).view(1, *inputs.shape[1:])
        # one tensor and its map, checked by ``resolve.check_inputs`` before any use
        return execute(Request(model, cast(torch.Tensor, inputs), cast(torch.Tensor, features), options))


def explain(
    model: Model,
    inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    features: FeatureSpec = None,
    *,
    additional_forward_args: object = None,
    target: TargetSpec = UNSET,
    n_samples: NSamples = UNSET,
    baseline: BaselineSpecs = UNSET,
    sampler: SamplerSpec = UNSET,
    kernel: KernelSpec = UNSET,
    surrogate: SurrogateSpec = UNSET,
    batch_size: BatchSize = None,
    generator: Seed = None,
    return_samples: bool = False,
    preset: Optional[PresetName] = None,
    output: OutputSelector = None,
    softmax: bool = False,
    progress: bool = False,
    masks: Optional[torch.Tensor] = None,
    perturb_fn: Optional[PerturbFn] = None,
    normalize: Optional[NormalizeSpec] = None,
    max_memory: MemorySpec = None,
    index: Optional[torch.Tensor] = None,
    chunk_format: Optional[InputFormat] = None,
    accelerate: Optional[AccelerateMode] = None,
) -> Explanation:
    """Explain B inputs with LIME in one chunked batched pass (``Explainer(...).explain(...)`` in one call).

    Args:
        model: any callable from a (c, ...) batch to scores (c, K) or (c,): an
            ``nn.Module``, a TorchScript module, a function. Tuple/dict/``.logits``
            outputs are handled (``output=`` selects). It runs on its own device
            and dtype, in eval mode, under ``torch.inference_mode()``.
        inputs: (B, ...) inputs to explain (never modified), or a tuple of tensors, each
            (B, *shape_i), for a model called as ``model(*inputs, *additional_forward_args)``
            (``baseline`` may then be a tuple of fills, one per tensor).
        features: integer (B or 1, ...) feature map, broadcastable to ``inputs``, or None: one
            feature per element (captum's default); for a tuple of inputs, None or one map per
            tensor (shared ids are one feature); any ids (relabelled to 0..F_b-1 per input);
            inputs may have different F_b; negative ids mark elements that are never perturbed.
        additional_forward_args: passed to the model after the inputs, never perturbed: one
            object or a tuple; tensors whose first dim is B follow each row's input.
        target: None (top class), int, (B,) or (B, T) tensor, list, "all" or "topK".
        n_samples: S, perturbed samples per input (sample 0 is the input itself); "auto" (or
            an ``methods.adaptive.Adaptive``): rounds of doubling samples until each input's
            top-k features are stable (``meta["samples_used"]``).
        baseline: the fill of hidden features (``torchlime.stages.perturb.fills``): a number, a
            tensor, a callable, "zero", "mean", "blur", "min", "max", "signal_mean",
            "noise" or "shuffle".
        sampler: ``Sampler`` or "bernoulli" / "uniform_count" / "shapley" / a design's name.
        kernel: ``Kernel``, a float width, or "lime" / "captum" / "uniform" / a SMILE statistic.
        surrogate: ``Surrogate`` or "ridge" / "lasso" / "klasso" / "bayes".
        batch_size: rows per model call; None: the default rule, the same chunks on every call;
            "measure": timed once per model and input shape (``torchlime.stages.forward.chunking``).
        generator: ``torch.Generator`` (one number is drawn from it) or int seed; None = seed 0.
        return_samples: keep masks (B, S, F), outputs (B, S, T), weights (B, S).
        preset: a name in ``presets.PRESETS`` ("lime", "lime_text", "captum", "slime",
            "kernel_shap") fills the keywords not given.
        output: selector for tuple/dict outputs (key, index or callable).
        softmax: apply softmax to the scores first (explain probabilities of logit models).
        progress: show a progress bar.
        masks: optional explicit bool masks (B, S, F) instead of sampling (held whole).
        perturb_fn: replaces stage 3 (``stages.perturb.blend.PerturbFn``): builds the model input
            of a ``Chunk`` of rows.
        normalize: ``(mean, std)`` per channel (dim 1): the model sees ``(x - mean) / std``,
            computed in the same fused pass as the blend.
        max_memory: CUDA memory budget of a chunk: bytes, or a fraction of the device's
            memory; None = half of the memory free at the start of the call.
        index: long (B,) index of every input in a larger data set: masks and random
            fills depend only on (seed, index), not on the batch (default 0..B-1).
        chunk_format: dtype and layout of the perturbed chunks (``stages.forward.model.InputFormat``);
            None: what the model wants (``stages.forward.model.input_format``).
        accelerate: None (the model runs as given) or "fast": on CUDA, bf16 autocast,
            channels-last 4-D inputs and ``torch.compile`` (``accel.accelerate_model``), made
            once per model; the first chunk (with the unperturbed inputs) has the shape of the
            others, so one compiled graph serves the whole call.

    Returns:
        ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T);
        ``meta`` records the settings, the chunk size, timings and (CUDA) peak memory.

    Raises:
        TypeError / ValueError: bad arguments (names the argument, expected and got),
            non-finite inputs or model outputs, inputs with a single feature, a model
            whose output width changes between calls.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> x = torch.rand(2, 1, 4, 4)
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features: pairs of pixels in a row
        >>> exp = explain(model, x, feats, n_samples=64)
        >>> exp.coef.shape
        torch.Size([2, 1, 8])
    """
    how = Explainer(
        sampler=sampler,
        kernel=kernel,
        surrogate=surrogate,
        baseline=baseline,
        preset=preset,
        accelerate=accelerate,
        max_memory=max_memory,
        batch_size=batch_size,
        progress=progress,
    )
    return how.explain(
        model,
        inputs,
        features,
        additional_forward_args=additional_forward_args,
        target=target,
        n_samples=n_samples,
        generator=generator,
        index=index,
        return_samples=return_samples,
        output=output,
        softmax=softmax,
        masks=masks,
        perturb_fn=perturb_fn,
        normalize=normalize,
        chunk_format=chunk_format,
    )
