"""The public type aliases of torchlime, in one place.

The specifications the API accepts (``TargetSpec``, ``BaselineSpec``, ``SamplerSpec``, ...) and the
``Literal`` names of its string choices (``SamplerName``, ``KernelName``, ``FillName``, ...), which
``tests/test_typing.py`` holds equal to what the registry, the presets and the fills accept. A leaf:
it imports only ``typing`` and ``torch`` at run time (the classes it names only for type checkers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ForwardRef, Literal, Optional, Protocol, Sequence, Union

import torch

if TYPE_CHECKING:
    from torchlime.methods.adaptive import Adaptive as _Adaptive
    from torchlime.stages.perturb.fills import Fill as _Fill
    from torchlime.stages.sampling import Sampler as _Sampler
    from torchlime.stages.surrogate import Surrogate as _Surrogate
    from torchlime.stages.weighting import Kernel as _Kernel
    from torchlime.targets._base import Target as _Target
else:  # the classes by reference, resolved in their own modules (``typing.get_type_hints`` works)
    _Adaptive = ForwardRef("Adaptive", module="torchlime.methods.adaptive")
    _Fill = ForwardRef("Fill", module="torchlime.stages.perturb.fills")
    _Sampler = ForwardRef("Sampler", module="torchlime.stages.sampling")
    _Target = ForwardRef("Target", module="torchlime.targets._base")
    _Surrogate = ForwardRef("Surrogate", module="torchlime.stages.surrogate")
    _Kernel = ForwardRef("Kernel", module="torchlime.stages.weighting")

__all__ = [
    "AccelerateMode",
    "BackendMode",
    "BaselineSpec",
    "BaselineSpecs",
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
    "Modality",
    "Model",
    "NSamples",
    "NormalizeSpec",
    "OutputSelector",
    "PresetName",
    "RankBy",
    "Seed",
    "SamplerName",
    "SamplerSpec",
    "SelectionMethod",
    "SmileStatistic",
    "SurrogateName",
    "SurrogateSpec",
    "TargetSpec",
]

# ------------------------------------------------------------------------------------------- names
#: sampler names of ``engine.registry.SAMPLERS``
SamplerName = Literal["bernoulli", "uniform_count", "shapley", "stratified", "antithetic", "sobol"]
#: SMILE's two-sample statistics (``methods.smile.STATISTICS``), also kernel names
SmileStatistic = Literal["wasserstein", "ks", "kuiper", "cvm", "anderson"]
#: kernel names of ``engine.registry.KERNELS``
KernelName = Literal["lime", "captum", "uniform", "wasserstein", "ks", "kuiper", "cvm", "anderson"]
#: surrogate names of ``engine.registry.SURROGATES``
SurrogateName = Literal["ridge", "lasso", "klasso", "bayes"]
#: preset names of ``engine.presets.PRESETS``
PresetName = Literal["lime", "lime_text", "captum", "slime", "veracity", "kernel_shap"]
#: named fills of ``stages.perturb.fills.NAMES``
FillName = Literal["zero", "mean", "blur", "min", "max", "signal_mean", "noise", "shuffle"]
#: ``accelerate=`` modes besides None (``accel.ACCELERATE``)
AccelerateMode = Literal["fast"]
#: the modalities presets have settings for (``engine.presets.MODALITIES``)
Modality = Literal["any", "image", "audio", "text", "tabular"]
#: distances of ``stages.weighting.ExponentialKernel`` (``stages.weighting.DISTANCES``)
DistanceName = Literal["cosine", "hamming", "euclidean"]
#: where a kernel measures distances (``stages.weighting.SPACES``)
KernelSpace = Literal["mask", "input"]
#: lime's feature selection methods (``methods.feature_selection.METHODS``)
SelectionMethod = Literal["forward_selection", "highest_weights", "lasso_path", "auto"]
#: ``TORCHLIME_BACKEND`` values (``_backend.MODES``)
BackendMode = Literal["auto", "torch", "triton"]
#: how features are ranked: by coefficient or by its magnitude (``Explanation.top_features``)
RankBy = Literal["value", "abs"]


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
#: which output columns to explain: None (top class), an int, "all", "topK", a list, a (B,) / (B, T) tensor
TargetSpec = Union[None, int, str, torch.Tensor, Sequence[int], _Target]
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
