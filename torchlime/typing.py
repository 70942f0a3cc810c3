"""The public type aliases of torchlime, in one place.

The specifications the API accepts (``TargetSpec``, ``BaselineSpec``, ``SamplerSpec``, ...) and the
``Literal`` names of its string choices (``SamplerName``, ``KernelName``, ``FillName``, ...), which
``tests/test_typing.py`` holds equal to what the registry, the presets and the fills accept. A leaf:
it imports only ``typing`` and ``torch``, and names the engine's classes by protocols.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Final, Literal, Optional, Protocol, Sequence, Union

import torch


# ---------------------------------------------------------------------- the engine's hooks, by shape
# The specifications below name the engine's hook classes (``Sampler``, ``Kernel``, ``Surrogate``,
# ``Fill``, ``Target``, ``Adaptive``) by protocols of the members the engine calls, so that this module
# imports nothing of torchlime, not even for type checkers (the stages import it: a circle otherwise).
# Every subclass matches its protocol and no other's; the engine tells them apart with ``isinstance``.
class _Sampler(Protocol):
    """A ``stages.sampling.Sampler``: bool masks (B, S, F) of the samples."""

    def bind(self, features: Any, n_samples: int, /) -> _Sampler:
        """The sampler planned for a call's feature map and sample count."""
        ...

    def masks(self, rows: Any, /) -> torch.Tensor:
        """Bool (c, F_max) masks of c rows."""
        ...

    def __call__(self, n_features: torch.Tensor, n_samples: int, f_max: int, generator: Seed = None, /) -> torch.Tensor:
        """Bool (B, S, F_max) masks of B inputs with n_features (B,) features each."""
        ...


class _Kernel(Protocol):
    """A ``stages.weighting.Kernel``: the weights of the samples from their distances to the inputs."""

    @property
    def distance(self) -> DistanceName:
        """The distance between a sample and its input."""
        ...

    @property
    def space(self) -> KernelSpace:
        """Where the distance is measured."""
        ...

    def distances(self, perturbed: Any, inputs: Any, rows: torch.Tensor, /) -> torch.Tensor:
        """(c,) distances of c perturbed rows to their inputs."""
        ...

    def weigh(self, distances: torch.Tensor, /) -> torch.Tensor:
        """The weights of distances."""
        ...

    def bind(self, features: Any, n_samples: int, /) -> _Kernel:
        """The kernel planned for a call's feature map and sample count."""
        ...


class _Surrogate(Protocol):
    """A ``stages.surrogate.Surrogate``: the weighted linear fit of the outputs on the masks."""

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the fit."""
        ...

    def solve(self, ne: Any, valid: torch.Tensor, /) -> torch.Tensor:
        """The coefficients from accumulated normal equations."""
        ...

    def fit(self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, valid: torch.Tensor, /) -> object:
        """The fit of the masks x on the outputs y with the weights w."""
        ...


class _Fill(Protocol):
    """A ``stages.perturb.fills.Fill``: ``fill(inputs, ctx)``, the values hidden features take.

    The context is left open (``*ctx``): a spec that is no ``Fill`` is called with the inputs alone.
    """

    def __call__(self, inputs: torch.Tensor, /, *ctx: Any) -> torch.Tensor:
        """(B, *shape) fill of the inputs (B, *shape), given the fill context."""
        ...


class _Target(Protocol):
    """A ``targets.Target``: a structured target, reduced from the model's raw outputs."""

    def bind(self, reference: object, batch: int, /) -> object:
        """Each input's targets, from the raw output of the unperturbed inputs."""
        ...

    def check(self, batch: int, /) -> None:
        """Check the target's arguments for B inputs."""
        ...


class _Adaptive(Protocol):
    """A ``methods.adaptive.Adaptive``: the settings of ``n_samples="auto"``."""

    @property
    def start(self) -> int:
        """The samples of the first round."""
        ...

    @property
    def cap(self) -> int:
        """The most samples an input gets."""
        ...

    @property
    def confidence(self) -> float:
        """The one-sided confidence of the stopping test."""
        ...

    def stable(self, normal: Any, fit: Any, valid: torch.Tensor, alpha: float, /) -> torch.Tensor:
        """Bool (B,): the inputs settled under the rule (``Adaptive.stable``)."""
        ...


__all__ = [
    "AccelerateMode",
    "BackendMode",
    "BaselineSpec",
    "BaselineSpecs",
    "BatchSize",
    "ChannelStats",
    "CompileArg",
    "Device",
    "DistanceName",
    "FeatureSpec",
    "FillName",
    "HasCoef",
    "KernelName",
    "KernelSpace",
    "KernelSpec",
    "MemorySpec",
    "Model",
    "NSamples",
    "NormalizeSpec",
    "OutputSelector",
    "PresetName",
    "PresetScope",
    "RankBy",
    "Seed",
    "SamplerName",
    "SamplerSpec",
    "SelectionMethod",
    "SmileStatistic",
    "SurrogateName",
    "SurrogateSpec",
    "TargetSpec",
    "UNSET",
    "Unset",
]

# ------------------------------------------------------------------------------------------- names
#: sampler names of ``engine.registry.SAMPLERS``
SamplerName = Literal["bernoulli", "uniform_count", "shapley", "stratified", "antithetic", "sobol", "factorial"]
#: SMILE's two-sample statistics (``methods.smile.STATISTICS``), also kernel names
SmileStatistic = Literal["wasserstein", "ks", "kuiper", "cvm", "anderson"]
#: kernel names of ``engine.registry.KERNELS``
KernelName = Literal["lime", "captum", "uniform", "wasserstein", "ks", "kuiper", "cvm", "anderson"]
#: surrogate names of ``engine.registry.SURROGATES``
SurrogateName = Literal["ridge", "lasso", "klasso", "bayes"]
#: preset names of ``engine.presets.PRESETS``
PresetName = Literal["lime", "lime_text", "captum", "slime", "veracity", "kernel_shap", "kernel_shap_plain"]
#: named fills of ``stages.perturb.fills.NAMES``
FillName = Literal["zero", "mean", "blur", "min", "max", "signal_mean", "noise", "shuffle"]
#: ``accelerate=`` modes besides None (``accel.ACCELERATE``)
AccelerateMode = Literal["fast", "cuda_graphs"]
#: the input kinds presets have settings for (``engine.presets.SCOPES``)
PresetScope = Literal["any", "image", "audio", "text", "tabular"]
#: distances of ``stages.weighting.ExponentialKernel`` (``stages.weighting.DISTANCES``)
DistanceName = Literal["cosine", "hamming", "euclidean"]
#: where a kernel measures distances (``stages.weighting.SPACES``)
KernelSpace = Literal["mask", "input"]
#: lime's feature selection methods (``methods.feature_selection.METHODS``)
SelectionMethod = Literal["forward_selection", "highest_weights", "lasso_path", "auto"]
#: ``TORCHLIME_BACKEND`` values (``_backend.MODES``)
BackendMode = Literal["auto", "torch", "triton"]
#: how features are ranked: coefficient, magnitude, or magnitude / standard error (``Explanation.top_features``)
RankBy = Literal["value", "abs", "t"]


# ---------------------------------------------------------------------------------- not given
class Unset(enum.Enum):
    """The type of ``UNSET``: the value of a keyword the caller did not pass."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "<default>"


#: the default of a keyword a preset or the engine's default fills (``Union[Spec, Unset]`` fields)
UNSET: Final = Unset.UNSET


# ---------------------------------------------------------------------------------- specifications
class HasCoef(Protocol):
    """Anything with coefficients (B, T, F), such as an ``Explanation`` (for the modules below the engine)."""

    @property
    def coef(self) -> torch.Tensor:
        """(B, T, F) coefficients."""
        ...


#: where tensors go: a device, its name, or None (the default device)
Device = Union[str, torch.device, None]
#: a model: any callable from a batch (one tensor, or several positional / keyword tensors) to its
#: output (a tensor, a tuple or dict holding one, or an object with ``.logits``)
Model = Callable[..., Any]
#: which part of a model output holds the scores: None (automatic), a key / index, or a callable
OutputSelector = Union[None, int, str, Callable[[Any], torch.Tensor]]
#: which output columns to explain: None (top class), an int, "all", "topK", a (B,) / (B, T) tensor or a list
#: shaped like one (B ints, B rows), or one row ``[[3, 5]]`` for every input
TargetSpec = Union[None, int, str, torch.Tensor, Sequence[int], Sequence[Sequence[int]], _Target]
#: ``batch_size``: rows per model call, None (the default rule) or "measure" (a timed search)
BatchSize = Union[int, Literal["measure"], None]
#: CUDA memory budget of a chunk: None, bytes (int) or a fraction of the device's memory (float)
MemorySpec = Union[None, int, float]
#: an int seed, a ``torch.Generator`` (one number is drawn from it) or None (seed 0)
Seed = Union[None, int, torch.Generator]
#: the fill of hidden features: a number, a name, a tensor, a callable ``inputs -> tensor`` or a ``Fill``
BaselineSpec = Union[float, int, FillName, torch.Tensor, Callable[[torch.Tensor], torch.Tensor], _Fill]
#: one fill, or one per tensor of a tuple of inputs
BaselineSpecs = Union[BaselineSpec, tuple[BaselineSpec, ...], list[BaselineSpec]]
#: a feature map (B or 1, ...) for one input tensor; None or one map per tensor for a tuple of inputs
FeatureSpec = Optional[Union[torch.Tensor, Sequence[torch.Tensor]]]
#: samples per input: an int, "auto" or the ``Adaptive`` settings of "auto"
NSamples = Union[int, Literal["auto"], _Adaptive]
#: a sampler or its name
SamplerSpec = Union[_Sampler, SamplerName]
#: a kernel, its name, or the width of lime's kernel
KernelSpec = Union[_Kernel, KernelName, float]
#: a surrogate or its name
SurrogateSpec = Union[_Surrogate, SurrogateName]
#: per-channel statistics: one number, one per channel, or a 1-D tensor
ChannelStats = Union[float, Sequence[float], torch.Tensor]
#: ``normalize=(mean, std)`` per channel (dim 1)
NormalizeSpec = tuple[ChannelStats, ChannelStats]
#: ``Accelerated(compile=...)``: off, on, or ``torch.compile`` keyword arguments
CompileArg = Union[bool, dict[str, Any]]
