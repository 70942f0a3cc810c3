"""The names the engine accepts for its samplers, kernels and surrogates, wherever they are defined.

The stage modules (``sampling``, ``weighting``, ``surrogate``) define the protocols and lime's own
members; the methods built on them (``designs``, ``smile``, ``bayes``) live in modules of their
own. The name tables are here, above all of them, so that no stage module imports the modules
that build on it.
"""

from __future__ import annotations

from typing import Callable

from torchlime.methods.baylime import BayesianRidge
from torchlime.methods.designs import AntitheticSampler, SobolSampler, StratifiedSampler
from torchlime.methods.smile import STATISTICS, SmileKernel
from torchlime.stages.sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from torchlime.stages.surrogate import KLasso, Lasso, Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, UniformKernel
from torchlime.typing import KernelSpec, SamplerSpec, SmileStatistic, SurrogateSpec

SAMPLERS: dict[str, Callable[[], Sampler]] = {
    "bernoulli": BernoulliSampler,
    "uniform_count": UniformCountSampler,
    "shapley": ShapleySampler,
    "stratified": StratifiedSampler,
    "antithetic": AntitheticSampler,
    "sobol": SobolSampler,
}


def _smile_kernel(statistic: SmileStatistic) -> Callable[[], Kernel]:
    """The factory of SMILE's kernel on ``statistic``."""
    return lambda: SmileKernel(statistic=statistic)


KERNELS: dict[str, Callable[[], Kernel]] = {
    "lime": lambda: ExponentialKernel(width=0.25),
    "captum": lambda: ExponentialKernel(width=1.0, space="input"),
    "uniform": UniformKernel,
    **{name: _smile_kernel(name) for name in STATISTICS},
}

SURROGATES: dict[str, Callable[[], Surrogate]] = {
    "ridge": Ridge,
    "lasso": Lasso,
    "klasso": KLasso,
    "bayes": BayesianRidge,
}


def resolve_sampler(sampler: SamplerSpec) -> Sampler:
    """A ``Sampler`` as given, or the one named in ``SAMPLERS`` (lime's "bernoulli", the designs, ...).

    Args:
        sampler: a ``Sampler`` or a name in ``SAMPLERS``.

    Returns:
        The sampler.

    Raises:
        ValueError: anything else.
    """
    if isinstance(sampler, Sampler):
        return sampler
    if isinstance(sampler, str) and sampler in SAMPLERS:
        return SAMPLERS[sampler]()
    raise ValueError(f"`sampler` must be a Sampler or one of {list(SAMPLERS)}, got {sampler!r}")


def resolve_kernel(kernel: KernelSpec) -> Kernel:
    """A ``Kernel`` as given, one named in ``KERNELS``, or a float: the width of lime's kernel.

    Args:
        kernel: a ``Kernel``, a float width, or a name: "lime", "captum", "uniform", a SMILE
            statistic ("wasserstein", "ks", "kuiper", "cvm", "anderson").

    Returns:
        The kernel.

    Raises:
        ValueError: anything else.
    """
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, (int, float)) and not isinstance(kernel, bool):
        return ExponentialKernel(width=float(kernel))
    if isinstance(kernel, str) and kernel in KERNELS:
        return KERNELS[kernel]()
    raise ValueError(f"`kernel` must be a Kernel, a float width, or one of {list(KERNELS)}, got {kernel!r}")


def resolve_surrogate(surrogate: SurrogateSpec) -> Surrogate:
    """A ``Surrogate`` as given, or the one named in ``SURROGATES`` ("bayes": BayLIME's non-informative prior).

    Args:
        surrogate: a ``Surrogate`` or a name in ``SURROGATES``.

    Returns:
        The surrogate.

    Raises:
        ValueError: anything else.
    """
    if isinstance(surrogate, Surrogate):
        return surrogate
    if isinstance(surrogate, str) and surrogate in SURROGATES:
        return SURROGATES[surrogate]()
    raise ValueError(f"`surrogate` must be a Surrogate or one of {list(SURROGATES)}, got {surrogate!r}")
