"""The names the engine accepts for its samplers, kernels and surrogates, wherever they are defined.

The stage modules (``sampling``, ``weighting``, ``surrogate``) define the protocols and lime's own
members; the methods built on them (``designs``, ``smile``, ``bayes``) live in modules of their
own. The name tables are here, above all of them, so that no stage module imports the modules
that build on it.
"""

from __future__ import annotations

from typing import Callable, Mapping, TypeVar

from torchlime.methods.baylime import BayesianRidge
from torchlime.methods.designs import AntitheticSampler, FactorialSampler, SobolSampler, StratifiedSampler
from torchlime.methods.smile import STATISTICS, SmileKernel
from torchlime.stages.sampling import BernoulliSampler, Sampler, ShapleySampler, UniformCountSampler
from torchlime.stages.surrogate import KLasso, Lasso, Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, UniformKernel
from torchlime.typing import KernelSpec, SamplerSpec, SmileStatistic, SurrogateSpec

_T = TypeVar("_T")

SAMPLERS: dict[str, Callable[[], Sampler]] = {
    "bernoulli": BernoulliSampler,
    "uniform_count": UniformCountSampler,
    "shapley": ShapleySampler,
    "stratified": StratifiedSampler,
    "antithetic": AntitheticSampler,
    "sobol": SobolSampler,
    "factorial": FactorialSampler,
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


def _by_name(spec: object, kind: type[_T], table: Mapping[str, Callable[[], _T]], name: str, also: str = "") -> _T:
    """``spec`` if it is a ``kind``, else a new member of ``table`` by its name, else a ValueError.

    Args:
        spec: the caller's object or name.
        kind: the base class an object must be an instance of.
        table: name -> factory of a member.
        name: the argument's name in the error ("sampler", "kernel", "surrogate").
        also: what else the argument may be, for the error (", a float width,").

    Returns:
        The object.

    Raises:
        ValueError: anything else.
    """
    if isinstance(spec, kind):
        return spec
    if isinstance(spec, str) and spec in table:
        return table[spec]()
    raise ValueError(f"`{name}` must be a {kind.__name__}{also} or one of {list(table)}, got {spec!r}")


def resolve_sampler(sampler: SamplerSpec) -> Sampler:
    """``_by_name`` on ``SAMPLERS``: a ``Sampler`` as given, or the one named (lime's "bernoulli", the designs, ...)."""
    return _by_name(sampler, Sampler, SAMPLERS, "sampler")


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
    if isinstance(kernel, (int, float)) and not isinstance(kernel, bool):
        return ExponentialKernel(width=float(kernel))
    return _by_name(kernel, Kernel, KERNELS, "kernel", ", a float width,")


def resolve_surrogate(surrogate: SurrogateSpec) -> Surrogate:
    """``_by_name`` on ``SURROGATES``: a ``Surrogate`` as given, or the one named ("bayes": BayLIME's prior)."""
    return _by_name(surrogate, Surrogate, SURROGATES, "surrogate")
