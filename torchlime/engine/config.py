"""How to explain (``Config``) and what to explain in one call (``Call``): the engine's two records.

Each keyword of ``torchlime.explain`` is a field of exactly one of them, written once here: ``Config``
holds the settings an ``Explainer`` keeps for any number of calls (sampler, kernel, surrogate, fill,
preset and run settings), ``Call`` those of one call (targets, samples, seed, model output). A field
left ``UNSET`` is filled by the preset, else by the engine's default (``presets``), by
``dataclasses.replace``; front doors and modalities change a record the same way.

The front doors take the fields as keywords: ``target``, ``n_samples`` and ``generator`` by name, the
others as ``**options: Unpack[ExplainOptions]`` (``Explainer.explain``: ``Unpack[CallOptions]``), one
typed set whose keys are the records' fields, so a type checker sees every keyword.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, TypeVar, Union, cast

import torch
from typing_extensions import TypedDict

from torchlime._util.argdocs import with_args
from torchlime._util.checks import describe
from torchlime.accel import ACCELERATE
from torchlime.engine.presets import check_preset, resolve
from torchlime.engine.registry import resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.stages.forward.chunking import check_batch_size, check_max_memory
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import PerturbFn
from torchlime.stages.perturb.fills import NAMES
from torchlime.typing import (
    UNSET,
    AccelerateMode,
    BaselineSpecs,
    BatchSize,
    KernelSpec,
    MemorySpec,
    NormalizeSpec,
    NSamples,
    OutputSelector,
    PresetName,
    PresetScope,
    SamplerSpec,
    Seed,
    SurrogateSpec,
    TargetSpec,
    Unset,
)

R = TypeVar("R", bound=Union["Config", "Call"])


@dataclass(frozen=True)
class Config:
    """How to explain: the sampler, kernel, surrogate, fill and run settings of LIME calls.

    Every field is checked when the record is made; unset ones take the preset's setting, else the
    engine's default (Sobol masks keeping each feature half of the time, lime's cosine kernel of width
    0.25, ``Ridge(alpha=0.01)``, a fill of 0; ``presets.ENGINE``), when a call runs.

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
            "kernel_shap", "kernel_shap_plain"): another implementation's defaults for whatever is not set here.
        accelerate: None (the model runs as given), "fast" (bf16 autocast, channels-last and
            ``torch.compile`` on CUDA; ``accel.accelerate_model``) or "cuda_graphs" (repeated calls of
            the same shapes replay the engine's stages after the plan as one CUDA graph;
            ``engine.graphed``).
        max_memory: CUDA memory budget of a chunk: bytes (int) or a fraction of the device's
            memory in (0, 1]; None: half of the memory free when a call starts.
        batch_size: rows per model call; None: the default rule (the same chunks on every call);
            "measure": timed once per model and input shape (``torchlime.stages.forward.chunking``).
        progress: show a progress bar over the samples.

    Raises:
        TypeError / ValueError: a field of the wrong type or value, named, with what was expected
            and what came.
    """

    sampler: Union[SamplerSpec, Unset] = UNSET
    kernel: Union[KernelSpec, Unset] = UNSET
    surrogate: Union[SurrogateSpec, Unset] = UNSET
    baseline: Union[BaselineSpecs, Unset] = UNSET
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
            raise ValueError(f"`accelerate` must be None, 'fast' or 'cuda_graphs', got {describe(self.accelerate)}")
        check_max_memory(self.max_memory)
        check_batch_size(self.batch_size)
        if not isinstance(self.progress, bool):
            raise TypeError(f"`progress` must be True or False, got {describe(self.progress)}")

    def refuse_input_kernel(self, scope: PresetScope, why: str, instead: str = "a mask-space kernel") -> None:
        """Refuse a kernel (given, or the preset's for ``scope``) that measures distances on the inputs.

        For modalities whose explained inputs cannot be compared as numbers (token ids, complex STFTs).

        Args:
            scope: the modality's preset scope (the preset's kernel for it is checked too).
            why: what an input-space kernel would do wrong, e.g. "would compare token ids as numbers".
            instead: what to pass instead, as the message names it.

        Raises:
            ValueError: naming the kernel (and the preset it came from), ``why`` and ``instead``.
        """
        kernel, source = self.kernel, "`kernel`"
        if kernel is UNSET and self.preset is not None:
            kernel = resolve(self.preset, dict(kernel=UNSET), scope)["kernel"]
            source = f"`kernel` (from preset={self.preset!r})"
        if kernel is not UNSET and kernel is not None and resolve_kernel(kernel).space == "input":
            raise ValueError(
                f"{source} must measure distances on the masks (space='mask'): the input-space kernel "
                f"{kernel!r} {why}; pass {instead} (e.g. kernel='lime')"
            )


@dataclass(frozen=True)
class Call:
    """What to explain in one call, besides the model and the inputs (checked when the call runs).

    Attributes:
        target: None (top class), an int, a (B,) or (B, T) tensor, a list, "all", "topK", or a
            structured target (``torchlime.targets``).
        n_samples: S samples per input (the input itself included), or "auto" (rounds of doubling
            until each input's explanation is as precise as lime's at 1000 samples; ``methods.adaptive``).
        generator: an int seed or a ``torch.Generator`` (one number is drawn from it); None: seed 0.
        index: long (B,) index of every input in a larger data set: masks and random fills depend
            only on (seed, index), not on the batch (default 0..B-1).
        return_samples: keep the masks (B, S, F), outputs (B, S, T) and weights (B, S).
        output: selector of tuple / dict model outputs (a key, an index or a callable).
        softmax: explain the softmax of the outputs (probabilities of a logit model).
        masks: explicit bool masks (B, S, F) instead of sampling.
        perturb_fn: replaces the blend of stage 3 (``stages.perturb.blend.PerturbFn``).
        normalize: ``(mean, std)`` per channel (dim 1), fused into the blend.
        chunk_format: dtype and layout of the perturbed chunks (``stages.forward.model.InputFormat``).
        additional_forward_args: passed to the model after the inputs, never perturbed: one object
            or a tuple; tensors whose first dim is B follow each row's input.
    """

    target: Union[TargetSpec, Unset] = UNSET
    n_samples: Union[NSamples, Unset] = UNSET
    generator: Seed = None
    index: Optional[torch.Tensor] = None
    return_samples: bool = False
    output: OutputSelector = None
    softmax: bool = False
    masks: Optional[torch.Tensor] = None
    perturb_fn: Optional[PerturbFn] = None
    normalize: Optional[NormalizeSpec] = None
    chunk_format: Optional[InputFormat] = None
    additional_forward_args: object = None


#: the ``Call`` fields a front door names itself (the others are its options)
NAMED = ("target", "n_samples", "generator")


class CallOptions(TypedDict, total=False):
    """The keywords of one call besides ``target``, ``n_samples`` and ``generator``: ``Call``'s other fields.

    ``Explainer.explain`` takes them (``**options: Unpack[CallOptions]``), each with its ``Call`` field's
    type and meaning.
    """

    index: Optional[torch.Tensor]
    return_samples: bool
    output: OutputSelector
    softmax: bool
    masks: Optional[torch.Tensor]
    perturb_fn: Optional[PerturbFn]
    normalize: Optional[NormalizeSpec]
    chunk_format: Optional[InputFormat]
    additional_forward_args: object


class ExplainOptions(CallOptions, total=False):
    """The engine's options, the keywords of ``torchlime.explain`` and of every front door (``**options``).

    Every field of ``Config`` and ``Call`` but ``target``, ``n_samples`` and ``generator`` (which each door
    names itself), with the field's type (``baseline`` also takes "drop" at ``explain_image``): a door is
    ``explain_x(model, inputs, *, <its modality's fields>, target, n_samples, generator, **options:
    Unpack[ExplainOptions])``, and type checkers and IDEs see each keyword. None is required: an option
    not given takes the preset's setting, else the engine's default. A door refuses by name, with the
    keywords it takes, an unknown keyword and an option its modality sets itself (``Modality.owns``:
    e.g. ``baseline`` with token ids, whose fill is the modality's ``mode``).
    """

    sampler: Union[SamplerSpec, Unset]
    kernel: Union[KernelSpec, Unset]
    surrogate: Union[SurrogateSpec, Unset]
    baseline: Union[BaselineSpecs, Literal["drop"], Unset]
    preset: Optional[PresetName]
    accelerate: Optional[AccelerateMode]
    max_memory: MemorySpec
    batch_size: BatchSize
    progress: bool


def check_options(
    options: Mapping[str, object], accepted: Sequence[str], who: str, owned: Collection[str] = ()
) -> None:
    """Refuse a keyword that ``who`` does not take, naming it and the options ``who`` takes.

    Args:
        options: the keywords that reached ``who``'s ``**options``.
        accepted: the options ``who`` takes.
        who: the function, as the message names it (e.g. "explain_tokens").
        owned: options ``who``'s modality sets itself (``Modality.owns``), named as such.

    Raises:
        TypeError: ``who() got an unexpected keyword argument 'x'`` (Python's words), with the options
            ``who`` takes besides its own keywords and ``target``, ``n_samples``, ``generator``.
    """
    bad = [k for k in options if k not in accepted]
    if not bad:
        return
    what = f"an unexpected keyword argument {bad[0]!r}" if len(bad) == 1 else f"unexpected keyword arguments {bad}"
    mine = [k for k in bad if k in owned]
    note = f" ({mine} set by its modality itself)" if mine else ""
    raise TypeError(
        f"{who}() got {what}{note}; besides its own keywords and {', '.join(NAMED)} it takes the options "
        f"{', '.join(accepted)}"
    )


def field_names(record: type[Union[Config, Call]]) -> tuple[str, ...]:
    """The field names of ``Config`` or ``Call``, in order."""
    return tuple(f.name for f in dataclasses.fields(record))


def fill_unset(record: R, defaults: Mapping[str, object]) -> R:
    """``record`` with every ``UNSET`` field that ``defaults`` names replaced (``dataclasses.replace``).

    Args:
        record: a ``Config`` or ``Call``.
        defaults: field -> value, e.g. a preset's settings.

    Returns:
        The record with those fields filled.
    """
    names = tuple(f.name for f in dataclasses.fields(record))
    given = {k: v for k, v in defaults.items() if k in names and getattr(record, k) is UNSET}
    return dataclasses.replace(record, **cast(dict[str, Any], given)) if given else record


T = TypeVar("T")


def given(value: Union[T, Unset], name: str) -> T:
    """``value``, which a preset or the engine's default has filled (``fill_unset``).

    Args:
        value: a filled field.
        name: its name, for the message.

    Returns:
        ``value``.

    Raises:
        ValueError: ``value`` is still unset (no default exists for ``name``).
    """
    if isinstance(value, Unset):
        raise ValueError(f"`{name}` was not given and has no default")
    return value


F = TypeVar("F", bound=Callable[..., object])


def _attributes(record: type) -> dict[str, str]:
    """Name -> its description (continuation lines included) from a record's ``Attributes:`` section."""
    doc = record.__doc__ or ""
    lines = doc.split("Attributes:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    out: dict[str, str] = {}
    name = ""
    for line in lines:
        head = line.strip().split(":", 1)
        if line.startswith(" " * 8) and not line.startswith(" " * 12) and len(head) == 2:
            name = head[0]
            out[name] = head[1].strip()
        elif name:
            out[name] += "\n" + line.strip()
    return {n: text.rstrip() for n, text in out.items()}


def _describe(options: type) -> None:
    """Complete the docstring of ``CallOptions`` / ``ExplainOptions`` with the records' descriptions of its keys."""
    known = {**_attributes(Config), **_attributes(Call)}
    lines = "".join(
        f"        {n}: " + known[n].strip().replace("\n", "\n            ") + "\n"
        for n in known
        if n in options.__annotations__
    )
    options.__doc__ = f"{(options.__doc__ or '').rstrip()}\n\n    Attributes:\n{lines}"


_describe(CallOptions)  # the options are described once, on the records
_describe(ExplainOptions)


def documented(fn: F) -> F:
    """Add to ``fn``'s ``Args:`` the ``Config`` and ``Call`` fields it names but does not describe.

    A front door's docstring describes its own keywords; the engine's are described once, on the
    records, and copied here (before its ``**options``, which ``ExplainOptions`` describes) so that
    ``help()`` and the API reference show them.

    Args:
        fn: a front door whose keywords include fields of ``Config`` / ``Call``.

    Returns:
        ``fn``, its ``__doc__`` completed.
    """
    return _complete(fn, {**_attributes(Call), **_attributes(Config)})


def documented_by(modality: type) -> Callable[[F], F]:
    """``documented``, and the fields of ``modality`` too: a door that builds a modality describes them once, there.

    Args:
        modality: the door's modality class, its ``Attributes:`` describing the keywords it takes.

    Returns:
        The decorator: ``fn`` with its ``__doc__`` completed from ``modality``, then from the records.
    """

    def decorate(fn: F) -> F:
        return documented(_complete(fn, _attributes(modality)))

    return decorate


def _complete(fn: F, known: dict[str, str]) -> F:
    """``fn`` with the descriptions in ``known`` of the keywords its ``Args:`` leaves out (``_util.argdocs``)."""
    if "    Returns:" not in (fn.__doc__ or ""):
        return fn
    return with_args(known)(fn)
