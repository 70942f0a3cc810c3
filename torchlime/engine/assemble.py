"""Step 4 of an explanation: the surrogate fit, the quality check and the ``Explanation``.

The surrogate is solved from the accumulated normal equations for all B·T fits at once (a sample-space
surrogate: on the kept samples, ``engine.sample_fit``); the non-finite outputs and the quality flags
(``quality``) are read back together, the call's last host synchronisation; the ``RunRecord`` records
the settings, the chunk size, the timings and the flags (``Explanation.meta`` renders it).
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Optional, Union

import torch

from torchlime._util.checks import user_stacklevel
from torchlime._util.upload import upload
from torchlime.engine.design_se import Prefixes, design_se, paired_se
from torchlime.engine.explanation import Explanation
from torchlime.engine.fit import padded_as_nan, solve
from torchlime.engine.plan import Plan
from torchlime.engine.quality import UnreliableExplanationWarning, assess, report
from torchlime.engine.rows import ready
from torchlime.engine.run import Passes
from torchlime.engine.run_record import RunRecord
from torchlime.engine.sample_fit import solve_samples
from torchlime.methods.kernel_shap import KernelShapRegression, KernelShapSampler
from torchlime.stages.fixed_cost import columns
from torchlime.stages.normal import Fit, Normal
from torchlime.stages.perturb.fills import describe_baseline
from torchlime.stages.perturb.packing import UnpackArgs
from torchlime.stages.sample_space import Design
from torchlime.stages.standard_error import DesignError, se_record
from torchlime.stages.surrogate import Ridge


def _raise_nonfinite_outputs(outputs: torch.Tensor) -> None:
    """Raise ValueError naming how many samples of which inputs gave NaN/inf scores."""
    bad = ~torch.isfinite(outputs).all(-1)  # (B, S)
    if bool(bad.any()):
        per_input = bad.sum(1)
        which = per_input.nonzero().flatten().tolist()
        raise ValueError(
            f"the model returned non-finite outputs for {int(per_input.sum())} of "
            f"{outputs.shape[0] * outputs.shape[1]} samples (inputs {which}); "
            f"check the model and the baseline"
        )


def _record(plan: Plan, passes: Passes, quality: dict[str, Any], unreliable: Optional[str]) -> RunRecord:
    """``Explanation.run``: the settings as plain data, the chunk size, the timings, the quality flags."""
    s = plan.settings
    perturbation = "blend" if s.call.perturb_fn is None and s.adapter is None else "custom"
    fields: dict[str, Any] = dict(
        n_samples=s.n_samples if s.adaptive is None else repr(s.adaptive),
        sampler=repr(plan.sampler),
        kernel=repr(plan.run.kernel),
        surrogate=repr(s.surrogate),
        baseline=describe_baseline(s.baseline),
        perturbation=perturbation,
        normalize=None if plan.normalize is None else list(plan.normalize),
        preset=s.config.preset,
        batch_size=plan.chunks.chosen,
        softmax=s.call.softmax,
        model_rows=sum(passes.used),
        samples_used=passes.used,
        peak_memory=plan.chunks.peak_memory(),
        quality=quality,
        unreliable=unreliable,
        seconds_forward=passes.finished - plan.started,
        seconds_total=time.perf_counter() - plan.started,
    )
    if isinstance(s.call.perturb_fn, UnpackArgs):  # a tuple of inputs: the shape of each tensor
        fields["input_shapes"] = [list(shape) for shape in s.call.perturb_fn.shapes]
    if plan.run.bound is not None:  # a structured target: its record of what its targets are
        fields["targets"] = plan.run.bound.info
    if passes.graph is not None:  # accelerate="cuda_graphs": how the passes ran
        fields["cuda_graph"] = passes.graph
    choice = getattr(plan.run.kernel, "choice", None)  # how width="auto" chose the width
    if choice is not None:
        fields["width_auto"] = choice
    return RunRecord(**fields)


def _drawn(used: list[int], n_samples: int, device: torch.device) -> torch.Tensor:
    """Bool (B, S): the samples each input got (``used[b]`` of the ``n_samples``)."""
    return columns(n_samples, device) < upload(used, torch.long, device).unsqueeze(1)


def _count_nonfinite(outputs: torch.Tensor, used: list[int], n_samples: int) -> torch.Tensor:
    """Long 0-d: the NaN and inf among the drawn samples' (B, S, T) outputs, without a host sync.

    Where every input got all its samples (known on the host), ``x * 0`` is 0 for a finite x and NaN
    otherwise, and ``count_nonzero`` counts the NaN: two operators where ``isfinite`` and the mask of the
    drawn samples take seven; the same count.
    """
    if all(u == n_samples for u in used):
        return torch.count_nonzero(outputs * 0)
    drawn = _drawn(used, n_samples, outputs.device)
    return ((~torch.isfinite(outputs)) & drawn.unsqueeze(-1)).sum()


def _design(plan: Plan, passes: Passes, normal: object, fit: Fit) -> Optional[DesignError]:
    """What turns a designed call's standard errors into its own error's (``engine.design_se``), or None.

    The factorial masks' ridge fits (nested prefixes) and KernelSHAP's paired designs (the pairs' strata);
    None for masks the user gave, samplers of independent masks and other surrogates.
    """
    s, run, sampler = plan.settings, plan.run, plan.sampler
    if s.call.masks is not None or not isinstance(normal, Normal):
        return None
    surrogate = s.surrogate

    def samples() -> Prefixes:
        scores = ready(run.scores, "the scores")
        return Prefixes(run.draw, scores, run.kernel, plan.fmap.valid, passes.used, run.dists, run.scale)

    if isinstance(surrogate, Ridge) and sampler.nested_error(plan.fmap.f_max):
        prefixes = samples()
        slim = normal._replace(raw=None)  # the uncentred moments are not read: not kept
        return DesignError("sandwich", "design", lambda sandwich: design_se(prefixes, surrogate, slim, sandwich))
    if isinstance(surrogate, KernelShapRegression) and isinstance(sampler, KernelShapSampler):
        design = sampler.design
        if design != "plain":  # plain: independent draws, the estimator's own assumption
            kept = samples()
            return DesignError("kernel_shap", "pairs", lambda se: paired_se(kept, fit, normal, design, se))
    return None


def assemble(plan: Plan, passes: Passes) -> Explanation:
    """Fit the surrogates, check the outputs and the fits, and build the ``Explanation``.

    Args:
        plan: the call.
        passes: what its forward passes left.

    Returns:
        The ``Explanation`` of the call.

    Raises:
        ValueError: when the model returned NaN or inf for some drawn sample.

    Warns:
        UnreliableExplanationWarning: when some surrogate should not be trusted (``quality``).
    """
    s, run, fmap = plan.settings, plan.run, plan.fmap
    n_samples, dev = s.n_samples, s.inputs.device
    outputs = ready(run.scores, "the scores")
    nonfinite = _count_nonfinite(outputs, passes.used, n_samples)  # read with the quality flags
    normal: Union[Normal, Design]  # either has the moments the quality check reads
    exists = fmap.valid  # (B, F) the features of each input: made once (a property: one operator a read)
    if run.sample_space:  # no normal equations: the surrogate fits on the kept samples
        masks, weights = torch.cat(run.kept_masks, 1), torch.cat(run.kept_weights, 1)
        normal, fit = solve_samples(masks, weights, outputs, s.surrogate, exists)
    else:
        normal, fit = solve(ready(run.acc, "the normal equations"), s.surrogate, exists, outputs)
    flags = assess(normal, fit.score, fmap.n_features)
    valid = None if run.bound is None else run.bound.valid.to(dev)
    padded = None if run.bound is None or run.bound.all_valid else valid  # None: no target is padding
    if padded is not None:  # padded targets of a structured target are no fits to judge
        flags = flags._replace(saturated=flags.saturated & padded, poor_fit=flags.poor_fit & padded)
    (n_bad,), counts, where = flags.read(nonfinite)  # the call's last host sync
    if n_bad:
        _raise_nonfinite_outputs(outputs.masked_fill(~_drawn(passes.used, n_samples, dev).unsqueeze(-1), 0.0))
    quality, unreliable = report(
        flags, counts, softmax=s.call.softmax, n_samples=n_samples, f_max=fmap.f_max, index=s.call.index, where=where
    )
    if unreliable:
        warnings.warn(
            f"unreliable explanation: {unreliable} (see torchlime.engine.quality)",
            UnreliableExplanationWarning,
            stacklevel=user_stacklevel(),
        )
    keep = s.call.return_samples
    record = _record(plan, passes, quality, unreliable)
    kept_masks = torch.cat(run.kept_masks, 1) if keep else None
    kept_weights = torch.cat(run.kept_weights, 1) if keep else None
    kept = None if kept_masks is None or kept_weights is None else (kept_masks, outputs, kept_weights)
    return Explanation(
        perturbation=plan.perturbation,
        coef=fit.coef,
        intercept=fit.intercept,
        score=padded_as_nan(fit.score, padded),
        local_pred=fit.local_pred,
        coef_std=fit.coef_std,
        target_valid=valid,
        scorer=run.bound,
        target=ready(run.targets, "the targets"),
        features=fmap.labels.clone() if fmap.shared else fmap.labels,  # no two explanations share them
        n_features=fmap.n_features.clone() if fmap.shared else fmap.n_features,
        input_shape=tuple(s.inputs.shape[1:]),
        samples=kept_masks,
        outputs=outputs if keep else None,
        weights=kept_weights,
        coef_se_record=se_record(s.surrogate, normal, fit, exists, kept, _design(plan, passes, normal, fit)),
        run=record,
    )
