"""The entry of the engine: ``Explainer`` holds how to explain, ``explain`` explains, ``execute`` runs.

``Explainer(sampler=..., kernel=..., surrogate=..., baseline=..., preset=...)`` is the "how" (a
``config.Config``, checked when it is made, reusable for any number of calls); its ``.explain(model,
inputs, modality, target=..., n_samples=..., generator=...)`` takes the "what" (a ``config.Call``) and
the input kind (a ``modality.Modality``: ``Images``, ``Words``, ``Series``, ...; a tensor there is a
feature map). ``torchlime.explain`` is the same in one call. ``execute`` has the modality prepare the
inputs and runs the four steps of an explanation, each in a module of its own: ``resolve``
(arguments, presets and names checked and resolved) -> ``plan`` (feature map, masks, fill,
perturbation, chunk sizes) -> ``run`` (the chunked forward passes and the accumulated normal
equations) -> ``assemble`` (the fit, the quality check, the ``Explanation``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional, Sequence, Union

import torch

from torchlime._checks import describe, from_numpy
from torchlime.engine.assemble import assemble
from torchlime.engine.config import Call, Config, field_names, pick
from torchlime.engine.explanation import Explanation
from torchlime.engine.modality import FeatureMap, Modality
from torchlime.engine.multi import Packed
from torchlime.engine.plan import plan
from torchlime.engine.resolve import resolve
from torchlime.engine.run import run_passes
from torchlime.engine.run_record import RunRecord
from torchlime.stages.fixed_cost import record_function
from torchlime.stages.forward.errors import expecting
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import PerturbFn
from torchlime.typing import (
    UNSET,
    AccelerateMode,
    BaselineSpecs,
    BatchSize,
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
    Unset,
)

#: what may stand in the modality's place: a modality, or a feature map (one per tensor of a tuple)
ModalitySpec = Union[Modality, FeatureSpec]


def execute(model: Model, inputs: object, modality: Modality, how: Config, call: Call) -> Explanation:
    """Explain ``inputs``: the modality prepares them, then resolve, plan, run, assemble.

    Args:
        model: the caller's model.
        inputs: the caller's inputs (numpy arrays already tensors).
        modality: the input kind.
        how: the configuration.
        call: the call.

    Returns:
        The ``Explanation``, with the modality's info record.
    """
    with record_function("torchlime::prepare"):  # the modality's features (segmentation, tokens)
        prepared = modality.prepare(model, inputs, how, call)  # type: ignore[arg-type]
    with expecting(prepared.input_name, prepared.inputs):
        with record_function("torchlime::plan"):
            settings = resolve(model, prepared)
            planned = plan(settings)
        passes = run_passes(planned)
        with record_function("torchlime::assemble"):
            explanation = assemble(planned, passes)
    meta = explanation.meta
    if prepared.info is not None:
        meta = {**meta, prepared.info.key: prepared.info.as_plain()}
    explanation = dataclasses.replace(
        explanation, info=prepared.info, meta=meta, config=settings.config, call=settings.call
    )
    finished = modality.finish(explanation, prepared)
    # a modality may add to meta (rows it spent itself): the typed record follows what meta says
    return dataclasses.replace(finished, run=RunRecord.from_plain(finished.meta) or finished.run)


def _as_modality(inputs: object, modality: ModalitySpec, call: Call) -> Modality:
    """The modality of a call: the one given, else the feature map(s) it stands for."""
    if isinstance(modality, Modality):
        return modality
    # a tuple of tensors (a list of plain values is one malformed input, refused by name later)
    several = isinstance(inputs, (tuple, list)) and (not inputs or any(isinstance(x, torch.Tensor) for x in inputs))
    if several or call.additional_forward_args is not None:
        return Packed(modality)
    return FeatureMap(modality)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Explainer(Config):
    """How to explain, reusable for any number of calls: a ``config.Config`` with ``explain``.

    Attributes:
        sampler: see ``Config``.
        kernel: see ``Config``.
        surrogate: see ``Config``.
        baseline: see ``Config``.
        preset: see ``Config``.
        accelerate: see ``Config``.
        max_memory: see ``Config``.
        batch_size: see ``Config``.
        progress: see ``Config``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features: pairs of pixels in a row
        >>> lime = Explainer(kernel="lime", surrogate="ridge", baseline="mean")
        >>> exp = lime.explain(model, torch.rand(2, 1, 4, 4), feats, target="top2", n_samples=64)
        >>> exp.coef.shape
        torch.Size([2, 2, 8])
    """

    def explain(
        self,
        model: Model,
        inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
        modality: ModalitySpec = None,
        *,
        target: Union[TargetSpec, Unset] = UNSET,
        n_samples: Union[NSamples, Unset] = UNSET,
        generator: Seed = None,
        index: Optional[torch.Tensor] = None,
        return_samples: bool = False,
        output: OutputSelector = None,
        softmax: bool = False,
        masks: Optional[torch.Tensor] = None,
        perturb_fn: Optional[PerturbFn] = None,
        normalize: Optional[NormalizeSpec] = None,
        chunk_format: Optional[InputFormat] = None,
        additional_forward_args: object = None,
    ) -> Explanation:
        """Explain B inputs with this configuration (the keywords are ``config.Call``'s fields).

        Args:
            model: any callable from a (c, ...) batch to scores (c, K) or (c,).
            inputs: (B, ...) the inputs to explain (never modified), or a tuple of tensors, each
                (B, *shape_i), for a model called as ``model(*inputs, *additional_forward_args)``.
            modality: the input kind (``torchlime.Images(...)``, ``Words(...)``, ``Series(...)``, your
                own ``Modality``), or a feature map: an integer (B or 1, ...) tensor broadcastable to
                ``inputs``, None (one feature per element, captum's default), or for a tuple of
                inputs None or one map per tensor (an id used in several tensors is one feature).
            target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all", "topK", or a
                structured target (``torchlime.targets``).
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
            additional_forward_args: passed to the model after the inputs, never perturbed: one
                object or a tuple; tensors whose first dim is B follow each row's input.

        Returns:
            ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T).
        """
        return self.run(model, inputs, modality, pick(Call, locals()))

    def run(self, model: Model, inputs: object, modality: ModalitySpec, call: Call) -> Explanation:
        """Explain ``inputs`` for a ready ``Call`` (``explain`` with the call as one record).

        Args:
            model: the caller's model.
            inputs: the inputs (numpy arrays become tensors).
            modality: the input kind, or a feature map (see ``explain``).
            call: what to explain.

        Returns:
            The ``Explanation``.
        """
        # numpy where tensors go (copies), numpy integers where ints go: the same rule at every door
        inputs = from_numpy(inputs)
        call = dataclasses.replace(call, target=from_numpy(call.target), masks=from_numpy(call.masks))
        if not isinstance(modality, Modality):
            modality = from_numpy(modality)
        config = Config(**{name: getattr(self, name) for name in field_names(Config)})
        return execute(model, inputs, _as_modality(inputs, modality, call), config, call)


def configure(explainer: Optional[Explainer], keywords: Mapping[str, object], who: str) -> tuple[Explainer, Call]:
    """The explainer and the call of a tool (the data-set runner, the probe) from its keywords.

    Args:
        explainer: the caller's explainer, or None: one made of the ``Config`` fields in ``keywords``.
        keywords: ``Call`` fields (and, without an ``explainer``, ``Config`` fields).
        who: the tool's name, for messages.

    Returns:
        ``(explainer, call)``.

    Raises:
        TypeError: a keyword that is no field of ``Call`` or ``Config``, a ``Config`` field beside an
            ``explainer`` (set it on the explainer), or an ``explainer`` that is not one.
    """
    if explainer is not None and not isinstance(explainer, Explainer):
        raise TypeError(f"`explainer` must be None or a torchlime.Explainer, got {describe(explainer)}")
    how = {k: v for k, v in keywords.items() if k in field_names(Config)}
    unknown = sorted(set(keywords) - set(how) - set(field_names(Call)))
    if unknown:
        raise TypeError(f"{who} got unexpected keyword argument(s) {unknown}")
    if how and explainer is not None:
        raise TypeError(f"{sorted(how)} are settings of the explainer: pass them to Explainer(...), not beside it")
    chosen = explainer if explainer is not None else pick(Explainer, how)
    return chosen, pick(Call, {k: v for k, v in keywords.items() if k not in how})


def explain_with(model: Model, inputs: object, modality: ModalitySpec, values: Mapping[str, object]) -> Explanation:
    """Explain with the configuration and the call made of ``values`` (a front door's keywords).

    Args:
        model: the caller's model.
        inputs: the inputs.
        modality: the front door's modality (or a feature map).
        values: keyword -> value (e.g. the door's ``locals()``); the fields of ``Config`` and ``Call``
            are picked, the rest ignored.

    Returns:
        The ``Explanation``.
    """
    how = pick(Config, values)
    explainer = Explainer(**{name: getattr(how, name) for name in field_names(Config)})
    return explainer.run(model, inputs, modality, pick(Call, values))


def explain(
    model: Model,
    inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    features: ModalitySpec = None,
    *,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    index: Optional[torch.Tensor] = None,
    return_samples: bool = False,
    output: OutputSelector = None,
    softmax: bool = False,
    masks: Optional[torch.Tensor] = None,
    perturb_fn: Optional[PerturbFn] = None,
    normalize: Optional[NormalizeSpec] = None,
    chunk_format: Optional[InputFormat] = None,
    additional_forward_args: object = None,
    sampler: Union[SamplerSpec, Unset] = UNSET,
    kernel: Union[KernelSpec, Unset] = UNSET,
    surrogate: Union[SurrogateSpec, Unset] = UNSET,
    baseline: Union[BaselineSpecs, Unset] = UNSET,
    preset: Optional[PresetName] = None,
    accelerate: Optional[AccelerateMode] = None,
    max_memory: MemorySpec = None,
    batch_size: BatchSize = None,
    progress: bool = False,
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
            A ``Modality`` (``torchlime.Images(...)``, ...) in this place builds the map itself.
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
    return explain_with(model, inputs, features, locals())
