"""``Explanation.refit``: the surrogate fitted again on an explanation's kept samples, without the model.

An explanation made with ``return_samples=True`` keeps its masks (B, S, F) and model scores (B, S, T).
``refit`` weighs them with another kernel (another width, or ``width="auto"``), fits another surrogate, or
keeps only the first m samples, through the engine's own fit (``fit.fit_samples``, the same blocks): the
result is bit for bit the explanation that a fresh call with ``masks=exp.samples[:, :m]`` and the same
settings returns, and the model is never called. Input-space kernels measure distances on the perturbed
inputs: refit rebuilds those from the recorded perturbation (``Explanation.perturbation.rows``), again
without the model, and refuses an explanation that lost it (loaded from a file, moved with ``to``, sliced).
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any, Optional, Protocol, cast

import torch

from torchlime._util.checks import check_positive_int, user_stacklevel
from torchlime.engine.config import Call, Config
from torchlime.engine.fit import choose_width, fit_samples, padded_as_nan
from torchlime.engine.quality import UnreliableExplanationWarning, assess, report
from torchlime.engine.registry import resolve_kernel, resolve_surrogate
from torchlime.engine.rows import ready
from torchlime.engine.run_record import RunRecord
from torchlime.stages.features import FeatureMap
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.standard_error import se_record
from torchlime.stages.surrogate import Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel, mask_distance
from torchlime.typing import UNSET, KernelSpec, SurrogateSpec

__all__ = ["Kept", "refit_fields", "sample_distances", "recorded_kernel", "recorded_surrogate"]

#: perturbed input elements built at once while input-space distances are measured again
_ROW_ELEMENTS = 1 << 22


class Kept(Protocol):
    """What refit reads of an explanation (``engine.explanation.Explanation`` has all of it)."""

    @property
    def samples(self) -> Optional[torch.Tensor]:
        """Bool (B, S, F) kept masks, or None."""

    @property
    def outputs(self) -> Optional[torch.Tensor]:
        """(B, S, T) their model scores, or None."""

    @property
    def coef(self) -> torch.Tensor:
        """(B, T, F) coefficients."""

    @property
    def features(self) -> torch.Tensor:
        """Long (B, *fshape) the feature map."""

    @property
    def n_features(self) -> torch.Tensor:
        """Long (B,) F_b."""

    @property
    def valid(self) -> torch.Tensor:
        """Bool (B, F) the features that exist."""

    @property
    def target_valid(self) -> Optional[torch.Tensor]:
        """Bool (B, T) the real targets, or None."""

    @property
    def run(self) -> Optional[RunRecord]:
        """The typed record of the call, or None."""

    @property
    def perturbation(self) -> Optional[Perturbation]:
        """How the inputs were perturbed, or None."""

    @property
    def config(self) -> Optional[Config]:
        """How it was explained, or None."""

    @property
    def call(self) -> Optional[Call]:
        """What was explained, or None."""


def _recorded(exp: Kept, name: str) -> object:
    """The kernel or surrogate the explanation was made with (its ``config``), as given to the call.

    Args:
        exp: an explanation returned by a call (not loaded from a file).
        name: the ``Config`` field, "kernel" or "surrogate".

    Returns:
        The field's value: an object, a name or a width.

    Raises:
        ValueError: an explanation that does not record it (loaded from a file).
    """
    value = UNSET if exp.config is None else getattr(exp.config, name)
    if value is UNSET:
        raise ValueError(
            f"`{name}` must be given: this explanation does not record the {name} it was made with (it was "
            f"loaded from a file); pass {name}=..."
        )
    return value


def recorded_kernel(explanation: Kept) -> Kernel:
    """The ``Kernel`` ``explanation`` was made with (``_recorded``, a name or width resolved), not yet bound."""
    return resolve_kernel(cast(KernelSpec, _recorded(explanation, "kernel")))


def recorded_surrogate(explanation: Kept) -> Surrogate:
    """The ``Surrogate`` ``explanation`` was made with (``_recorded``, a name resolved)."""
    return resolve_surrogate(cast(SurrogateSpec, _recorded(explanation, "surrogate")))


def _feature_map(exp: Kept) -> FeatureMap:
    """The call's relabelled feature map, as ``Kernel.bind`` sees it."""
    labels, f_max = exp.features, exp.coef.shape[-1]
    p = exp.perturbation
    fixed = p.fixed if p is not None else bool((labels < 0).any())
    index = torch.where(labels < 0, f_max, labels) if fixed else labels
    return FeatureMap(labels, index, exp.n_features, f_max, fixed)


def sample_distances(
    explanation: Kept, kernel: Kernel, masks: torch.Tensor
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The distances a kernel weighs, of an explanation's samples, without the model.

    Mask-space kernels measure the masks (``stages.weighting.mask_distance`` on ``kernel.distance``); an
    input-space kernel's ``distances`` measures the perturbed inputs, which are rebuilt from the recorded
    perturbation in chunks of rows, as the engine built them.

    Args:
        explanation: the explanation whose samples these are (its feature counts; its perturbation for an
            input-space kernel).
        kernel: the kernel, bound to the call.
        masks: bool (B, m, F) the first m of its kept masks.

    Returns:
        ``(distances, divisors)``: (B, m) float32 distances (before the kernel's ``scale``), and the
        input-space kernel's per-input divisors (B,) (``Kernel.normaliser``) or None.

    Raises:
        ValueError: an input-space kernel for an explanation without a reusable recorded perturbation.
    """
    exp = explanation
    if kernel.space != "input":
        return mask_distance(masks, exp.valid.unsqueeze(1), kernel.distance), None
    p = exp.perturbation
    if p is None or not p.reusable:
        why = (
            "it lost its recorded perturbation (loaded from a file, moved with `to`, or sliced)"
            if p is None
            else "its perturbation depends on its own samples"
        )
        raise ValueError(
            f"`kernel` {kernel!r} measures distances on the perturbed inputs (space='input'), which refit "
            f"rebuilds from the explanation's recorded perturbation, but {why}: pass a mask-space kernel "
            f"(e.g. kernel='lime' or ExponentialKernel(width=...)), or explain again"
        )
    batch, m, _ = masks.shape
    dev = exp.n_features.device
    originals = p.rows(masks[:, :1])  # sample 0, as the engine builds the originals
    step = max(1, _ROW_ELEMENTS // max(1, p.inputs[0].numel()))
    parts = []
    for start in range(0, batch * m, step):  # chunks of rows, not single samples
        stop = min(start + step, batch * m)
        rows = torch.arange(start, stop, device=dev) // m
        parts.append(kernel.distances(p.rows(masks, start, stop), originals, rows).to(dev, torch.float32))
    dists = torch.cat(parts).view(batch, m)
    return dists, kernel.normaliser(dists, torch.ones_like(dists, dtype=torch.bool))


def refit_fields(
    explanation: Kept,
    *,
    kernel: Optional[KernelSpec] = None,
    surrogate: Optional[SurrogateSpec] = None,
    n_samples: Optional[int] = None,
) -> dict[str, Any]:
    """The explanation fitted again on its kept samples (module docstring); the model is not called.

    ``Explanation.refit`` returns ``dataclasses.replace(explanation, **refit_fields(explanation, ...))``.

    Args:
        explanation: an explanation made with ``return_samples=True`` (``samples`` (B, S, F) and
            ``outputs`` (B, S, T) kept).
        kernel: the kernel (any ``kernel=`` of ``torchlime.explain``: a ``Kernel``, a float width, a name;
            ``ExponentialKernel(width="auto")`` chooses the width again); None: the explanation's own.
        surrogate: the surrogate (a ``Surrogate`` or a name); None: the explanation's own.
        n_samples: fit the first m samples only, 2 <= m <= S; None: all S.

    Returns:
        The fields of the new explanation: its coefficients, intercepts, scores and local predictions, with
        samples (B, m, F), outputs (B, m, T) and weights (B, m); its ``run`` says ``model_rows=0`` and
        ``refit_from=S`` (``meta["refit"] == {"from_samples": S}``).

    Raises:
        ValueError: an explanation without kept samples (names ``return_samples``), ``n_samples`` out of
            range, an input-space kernel for an explanation without its recorded perturbation, or a
            kernel / surrogate not given for a loaded explanation.
        TypeError: ``n_samples`` not an int.

    Warns:
        UnreliableExplanationWarning: as a fresh call would (``engine.quality``).
    """
    started = time.perf_counter()
    exp = explanation
    if exp.samples is None or exp.outputs is None:
        raise ValueError(
            "`explanation` keeps no samples: refit reuses the masks and model outputs of its call; explain "
            "with return_samples=True (and an int n_samples) to keep them"
        )
    total = exp.samples.shape[1]
    m = total if n_samples is None else check_positive_int(n_samples, "n_samples", minimum=2)
    if m > total:
        raise ValueError(f"`n_samples` must be at most the {total} samples the explanation kept, got {m}")
    kernel_spec = cast(KernelSpec, _recorded(exp, "kernel")) if kernel is None else kernel
    surrogate_spec = cast(SurrogateSpec, _recorded(exp, "surrogate")) if surrogate is None else surrogate
    bound = resolve_kernel(kernel_spec).bind(_feature_map(exp), m)
    fitter = resolve_surrogate(surrogate_spec)
    masks, scores, valid = exp.samples[:, :m], exp.outputs[:, :m], exp.valid
    auto = isinstance(bound, ExponentialKernel) and bound.auto
    dists, scale = sample_distances(exp, bound, masks) if bound.space == "input" or auto else (None, None)
    if isinstance(bound, ExponentialKernel) and bound.auto:
        bound = choose_width(bound, masks, scores, ready(dists, "the distances"), valid, fitter, exp.target_valid)
    dists = dists if bound.space == "input" else None  # mask-space kernels weigh the masks themselves
    normal, fit, weights = fit_samples(masks, scores, bound, fitter, valid, dists, scale)
    flags = assess(normal, fit.score, exp.n_features)
    if exp.target_valid is not None:  # padded targets of a structured target are no fits to judge
        real = exp.target_valid.to(fit.score.device)
        flags = flags._replace(saturated=flags.saturated & real, poor_fit=flags.poor_fit & real)
    softmax = bool(exp.call.softmax) if exp.call is not None else exp.run is not None and exp.run.softmax
    index = None if exp.call is None else exp.call.index
    _, counts, where = flags.read()
    quality, unreliable = report(
        flags, counts, softmax=softmax, n_samples=m, f_max=masks.shape[2], index=index, where=where
    )
    if unreliable:
        warnings.warn(
            f"unreliable explanation: {unreliable} (see torchlime.engine.quality)",
            UnreliableExplanationWarning,
            stacklevel=user_stacklevel(),
        )
    run = None
    if exp.run is not None:
        run = dataclasses.replace(
            exp.run,
            n_samples=m,
            kernel=repr(bound),
            surrogate=repr(fitter),
            model_rows=0,
            samples_used=[m] * masks.shape[0],
            quality=quality,
            unreliable=unreliable,
            seconds_forward=0.0,
            seconds_total=time.perf_counter() - started,
            width_auto=getattr(bound, "choice", None),
            refit_from=total,
        )
    config = (
        None if exp.config is None else dataclasses.replace(exp.config, kernel=kernel_spec, surrogate=surrogate_spec)
    )
    return dict(
        fit._replace(score=padded_as_nan(fit.score, exp.target_valid))._asdict(),  # coef ... coef_std
        coef_se_record=se_record(fitter, normal, fit, valid, (masks, scores, weights)),
        samples=masks,
        outputs=scores,
        weights=weights,
        run=run,
        config=config,
        call=None if exp.call is None else dataclasses.replace(exp.call, n_samples=m),
    )
