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
from typing import Any, Sequence, Union, cast

import torch
from typing_extensions import Unpack

from torchlime._util.checks import from_numpy
from torchlime.engine.assemble import assemble
from torchlime.engine.config import (
    NAMED,
    Call,
    CallOptions,
    Config,
    ExplainOptions,
    check_options,
    documented,
    field_names,
)
from torchlime.engine.explanation import Explanation
from torchlime.engine.graphed import graphed_passes
from torchlime.engine.modality import FeatureMap, Modality
from torchlime.engine.multi import Packed
from torchlime.engine.plan import plan
from torchlime.engine.resolve import resolve
from torchlime.engine.run import run_passes
from torchlime.stages.fixed_cost import record_function
from torchlime.stages.forward.errors import expecting
from torchlime.typing import UNSET, FeatureSpec, Model, NSamples, Seed, TargetSpec, Unset

#: what may stand in the modality's place: a modality, or a feature map (one per tensor of a tuple)
ModalitySpec = Union[Modality, FeatureSpec]
#: the options of ``ExplainOptions`` in the records' order (how to explain, then the call's other fields)
OPTIONS = tuple(n for n in (*field_names(Config), *field_names(Call)) if n not in NAMED)


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
            graphed = settings.config.accelerate == "cuda_graphs"
            planned = None if graphed else plan(settings)
        if planned is None:  # accelerate="cuda_graphs": the stages after the plan replayed as one graph
            planned, passes = graphed_passes(settings, getattr(prepared.info, "segments", None))
        else:
            passes = run_passes(planned)
        with record_function("torchlime::assemble"):
            explanation = assemble(planned, passes)
    explanation = dataclasses.replace(explanation, info=prepared.info, config=settings.config, call=settings.call)
    return modality.finish(explanation, prepared)  # a modality may replace its records (rows it spent itself)


def _as_modality(inputs: object, modality: ModalitySpec, call: Call) -> Modality:
    """The modality of a call: the one given, else the feature map(s) it stands for."""
    if isinstance(modality, Modality):
        return modality
    # a tuple of tensors (a list of plain values is one malformed input, refused by name later)
    several = isinstance(inputs, (tuple, list)) and (not inputs or any(isinstance(x, torch.Tensor) for x in inputs))
    if several or call.additional_forward_args is not None:
        return Packed(modality)
    return FeatureMap(modality)  # type: ignore[arg-type]


class Explainer(Config):  # Config's fields, __init__ and checks (a frozen dataclass): no fields of its own
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
        **options: Unpack[CallOptions],
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
            **options: the call's other fields (``CallOptions``: ``return_samples``, ``masks``,
                ``index``, ``output``, ``softmax``, ...); how to explain is this explainer's.

        Returns:
            ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T).

        Raises:
            TypeError: a keyword that is no field of ``Call`` (named, with the ones taken), or a
                setting of the explainer (``kernel=``, ...: pass it to ``Explainer(...)``).
        """
        how = [k for k in options if k in field_names(Config)]
        if how:
            raise TypeError(f"{how} are settings of the explainer: pass them to Explainer(...), not to its explain")
        check_options(options, tuple(CallOptions.__annotations__), "Explainer.explain")
        return self.run(
            model, inputs, modality, Call(target=target, n_samples=n_samples, generator=generator, **options)
        )

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


def explain_with(
    model: Model, inputs: object, modality: ModalitySpec, call: Call, options: ExplainOptions, who: str = "explain"
) -> Explanation:
    """Explain with a front door's call (the fields it names) and its options (its ``**options``).

    Args:
        model: the caller's model.
        inputs: the inputs.
        modality: the front door's modality (or a feature map).
        call: the call's fields the door names (``target``, ``n_samples``, ``generator``).
        options: the door's ``ExplainOptions``: how to explain, and the call's other fields; those its
            modality sets itself (``Modality.owns``) are refused.
        who: the door, as the message of a keyword it does not take names it.

    Returns:
        The ``Explanation``.

    Raises:
        TypeError: an option that is no key of ``ExplainOptions``, or one the modality sets itself:
            named, with the options the door takes.
    """
    owned = modality.owns if isinstance(modality, Modality) else frozenset()
    check_options(options, tuple(k for k in OPTIONS if k not in owned), who, owned)
    how = {k: v for k, v in options.items() if k in field_names(Config)}
    explainer = Explainer(**cast(dict[str, Any], how))  # baseline="drop" is refused by name here
    fields = cast(CallOptions, {k: v for k, v in options.items() if k not in how})
    return explainer.run(model, inputs, modality, dataclasses.replace(call, **fields))


@documented
def explain(  # noqa: D417 (target, n_samples, generator: described on ``Call``, added by ``documented``)
    model: Model,
    inputs: Union[torch.Tensor, Sequence[torch.Tensor]],
    modality: ModalitySpec = None,
    *,
    target: Union[TargetSpec, Unset] = UNSET,
    n_samples: Union[NSamples, Unset] = UNSET,
    generator: Seed = None,
    **options: Unpack[ExplainOptions],
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
        modality: integer (B or 1, ...) feature map, broadcastable to ``inputs``, or None: one
            feature per element (captum's default); for a tuple of inputs, None or one map per
            tensor (shared ids are one feature); any ids (relabelled to 0..F_b-1 per input);
            inputs may have different F_b; negative ids mark elements that are never perturbed.
            A ``Modality`` (``torchlime.Images(...)``, ...) in this place builds the map itself.
        **options: the engine's options (``ExplainOptions``): how to explain (``sampler``,
            ``kernel``, ``surrogate``, ``baseline``, ``preset``, ``batch_size``, ...) and the call's
            other fields (``return_samples``, ``masks``, ``index``, ``output``, ``softmax``, ...).

    Returns:
        ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T);
        ``meta`` records the settings, the chunk size, timings and (CUDA) peak memory.

    Raises:
        TypeError / ValueError: bad arguments (names the argument, expected and got; an unknown
            keyword with the options taken), non-finite inputs or model outputs, inputs with a
            single feature, a model whose output width changes between calls.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> x = torch.rand(2, 1, 4, 4)
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features: pairs of pixels in a row
        >>> exp = explain(model, x, feats, n_samples=64)
        >>> exp.coef.shape
        torch.Size([2, 1, 8])
    """
    return explain_with(model, inputs, modality, Call(target, n_samples, generator), options)
