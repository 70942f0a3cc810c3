"""``explain``: the modality-free engine that chains the six stages.

features → sample → perturb → forward → weight → fit, for B inputs and T targets
each, with one chunked pass of the B·S perturbed inputs through the model:

* the forward pass runs the B unperturbed inputs first (sample 0 of every input,
  whose scores choose the default targets), then every input's samples 1..S-1, in
  chunks of the size ``chunking`` measured; the model sees each of the B·S rows
  exactly once, and every chunk, the first included, has the same shape;
* masks are drawn per chunk from the call's counter-based key and drawn again for
  the fit, which accumulates the weighted normal equations in fixed blocks of
  ``FIT_BLOCK`` samples per input: memory is bounded by the chunk and the block, not
  by S x F, and the coefficients do not depend on the chunk size;
* the host synchronises twice per call (the feature counts with the input checks,
  and the finite check of the outputs with the quality flags of ``torchlime.engine.quality``)
  and never per chunk, except around the chunks the first call on a model and input
  shape times to choose the chunk size.
"""
from __future__ import annotations

import math
import time
import warnings
from typing import Any, Callable, Optional, Sequence, Union

import torch

from torchlime._checks import check_finite, check_integer, check_normalize, check_positive_int, check_tensor, describe
from torchlime.accel import accelerate_model
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import UNSET, resolve
from torchlime.engine.quality import UnreliableExplanationWarning, assess, report
from torchlime.engine.registry import resolve_kernel, resolve_sampler, resolve_surrogate
from torchlime.engine.run import RowOrder, Run
from torchlime.methods.adaptive import NSamples, resolve_n_samples
from torchlime.stages.features import prepare_features
from torchlime.stages.forward.chunking import ChunkPlan, check_max_memory
from torchlime.stages.forward.model import InputFormat, Model, chunk_placement, input_format
from torchlime.stages.forward.targets import TargetSpec, check_target
from torchlime.stages.perturb.blend import Normalize, PerturbFn
from torchlime.stages.perturb.fills import (
    BaselineSpec,
    Fill,
    FillContext,
    describe_baseline,
    resolve_baseline,
    signal_dims,
)
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.sampling import Rows, Sampler, make_key
from torchlime.stages.surrogate import Ridge, Surrogate
from torchlime.stages.weighting import Kernel


def check_inputs(inputs: Any, features: Any, name: str = "inputs") -> None:
    """Validate ``inputs`` (B, ...) and ``features`` (B or 1, ... broadcastable); no host sync."""
    check_tensor(inputs, name)
    check_tensor(features, "features")
    if inputs.ndim < 2:
        raise ValueError(f"`{name}` must be batched with shape (B, ...), got shape {tuple(inputs.shape)}")
    if inputs.shape[0] == 0:
        raise ValueError(f"`{name}` must hold at least one input (B >= 1), got shape {tuple(inputs.shape)}")
    check_integer(features, "features")
    if features.device != inputs.device:
        raise ValueError(f"`features` must be on the same device as `{name}` ({inputs.device}), "
                         f"got {features.device}")
    ok = features.ndim == inputs.ndim and features.shape[0] in (1, inputs.shape[0])
    if ok:
        ok = all(f in (1, i) for f, i in zip(features.shape[1:], inputs.shape[1:]))
    if not ok:
        raise ValueError(f"`features` must have shape (B or 1, ...) broadcastable to `{name}` "
                         f"{tuple(inputs.shape)}, got {tuple(features.shape)}")


def _check_finite_fill(base: torch.Tensor, spec: Any) -> None:
    """A fill must be finite: numbers checked on the host, tensors and callables on the device
    (named fills of finite inputs are finite)."""
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        if not math.isfinite(spec):
            raise ValueError(f"`baseline` must be finite, got {spec}")
    elif isinstance(spec, torch.Tensor) or (callable(spec) and not isinstance(spec, Fill)):
        check_finite(base, "baseline")


def explain(model: Model, inputs: torch.Tensor, features: torch.Tensor, *,
            target: TargetSpec = UNSET, n_samples: NSamples = UNSET, baseline: BaselineSpec = UNSET,
            sampler: Union[Sampler, str] = UNSET, kernel: Union[Kernel, str, float] = UNSET,
            surrogate: Union[Surrogate, str] = UNSET, batch_size: Optional[int] = None,
            generator: Union[None, int, torch.Generator] = None, return_samples: bool = False,
            preset: Optional[str] = None, output: Any = None, softmax: bool = False,
            progress: bool = False, masks: Optional[torch.Tensor] = None,
            perturb_fn: Optional[PerturbFn] = None, normalize: Optional[tuple[Sequence[float], Sequence[float]]] = None,
            max_memory: Union[None, int, float] = None, index: Optional[torch.Tensor] = None,
            chunk_format: Optional[InputFormat] = None, accelerate: Optional[str] = None,
            _adapter: Optional[Callable[[Model], Model]] = None, _modality: str = "any",
            _input_name: str = "inputs") -> Explanation:
    """Explain B inputs with LIME in one chunked batched pass.

    Args:
        model: any callable from a (c, ...) batch to scores (c, K) or (c,): an
            ``nn.Module``, a TorchScript module, a function. Tuple/dict/``.logits``
            outputs are handled (``output=`` selects). It runs on its own device
            and dtype, in eval mode, under ``torch.inference_mode()``.
        inputs: (B, ...) inputs to explain (never modified).
        features: integer (B or 1, ...) feature map, broadcastable to ``inputs``;
            any ids (relabelled to 0..F_b-1 per input); inputs may have different F_b;
            negative ids mark elements that are never perturbed.
        target: None (top class), int, (B,) or (B, T) tensor, list, "all" or "topK".
        n_samples: S, perturbed samples per input (sample 0 is the input itself); "auto" (or
            an ``adaptive.Adaptive``): rounds of doubling samples until each input's top-k
            features are stable (``meta["samples_used"]``).
        baseline: the fill of hidden features (``torchlime.stages.perturb.fills``): a number, a
            tensor, a callable, "zero", "mean", "blur", "min", "max", "signal_mean",
            "noise" or "shuffle".
        sampler: ``Sampler`` or "bernoulli" / "uniform_count" / "shapley".
        kernel: ``Kernel``, a float width, or "lime" / "captum" / "uniform".
        surrogate: ``Surrogate`` or "ridge" / "lasso" / "klasso".
        batch_size: rows per model call; None measures the best (``torchlime.stages.forward.chunking``).
        generator: ``torch.Generator`` (one number is drawn from it) or int seed; None = seed 0.
        return_samples: keep masks (B, S, F), outputs (B, S, T), weights (B, S).
        preset: a name in ``presets.PRESETS`` ("lime", "lime_text", "captum", "slime")
            fills the keywords not given.
        output: selector for tuple/dict outputs (key, index or callable).
        softmax: apply softmax to the scores first (explain probabilities of logit models).
        progress: show a progress bar.
        masks: optional explicit bool masks (B, S, F) instead of sampling (held whole).
        perturb_fn: replaces stage 3 (``perturb.PerturbFn``): builds the model input of a
            ``perturb.Chunk`` of rows.
        normalize: ``(mean, std)`` per channel (dim 1): the model sees ``(x - mean) / std``,
            computed in the same fused pass as the blend.
        max_memory: CUDA memory budget of a chunk: bytes, or a fraction of the device's
            memory; None = half of the memory free at the start of the call.
        index: long (B,) index of every input in a larger data set: masks and random
            fills depend only on (seed, index), not on the batch (default 0..B-1).
        chunk_format: dtype and layout of the perturbed chunks (``forward.InputFormat``);
            None: what the model wants (``forward.input_format``).
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
    opts = resolve(preset, dict(target=target, n_samples=n_samples, baseline=baseline, sampler=sampler,
                                kernel=kernel, surrogate=surrogate), _modality)
    n_samples, adaptive = resolve_n_samples(opts["n_samples"])
    if adaptive is not None and (return_samples or masks is not None):
        raise ValueError("`n_samples='auto'` draws its own samples in rounds: it cannot return or take `masks` "
                         "(pass an int n_samples)")
    sampler_, kernel_, surrogate_ = (resolve_sampler(opts["sampler"]), resolve_kernel(opts["kernel"]),
                                     resolve_surrogate(opts["surrogate"]))
    masks_given = masks is not None
    check_inputs(inputs, features, _input_name)
    if batch_size is not None:
        batch_size = check_positive_int(batch_size, "batch_size")
    max_memory = check_max_memory(max_memory)
    batch, dev = inputs.shape[0], inputs.device
    check_target(opts["target"], batch)
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    model = accelerate_model(model if _adapter is None else _adapter(model), accelerate, inputs)
    if index is not None:
        check_tensor(index, "index")
        check_integer(index, "index")
        if index.shape != (batch,):
            raise ValueError(f"`index` must have shape ({batch},), got {tuple(index.shape)}")
    t0 = time.perf_counter()

    fmap = prepare_features(inputs, features, _input_name)
    f_max = fmap.f_max
    if masks is not None:
        check_tensor(masks, "masks")
        if masks.dtype != torch.bool or masks.shape != (batch, n_samples, f_max):
            raise ValueError(f"`masks` must be bool with shape ({batch}, {n_samples}, {f_max}), got {describe(masks)}")
        masks = masks.to(dev)
    if adaptive is not None and not getattr(sampler_, "adaptive", True):
        raise ValueError(f"`sampler` {sampler_!r} plans all of its samples at once: it needs an int n_samples, "
                         f"not 'auto'")
    if not masks_given:
        sampler_ = sampler_.bind(fmap, n_samples)  # designs planned from the feature map (text's single protocol)
    kernel_ = kernel_.bind(fmap, n_samples)
    key = make_key(generator, dev)
    ids = torch.arange(batch, device=dev) if index is None else index.to(dev).long()
    ctx = FillContext(fmap.index, f_max + 1, signal_dims(tuple(inputs.shape), tuple(fmap.index.shape)), key, ids)
    base = resolve_baseline(opts["baseline"], inputs, ctx)
    _check_finite_fill(base, opts["baseline"])
    valid = fmap.valid

    def draw(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Masks (c, F) of rows (input b, sample s)."""
        if masks is not None:
            return masks[b, s]
        return sampler_.masks(Rows(key, ids[b], s, fmap.n_features[b], f_max, b))

    fmt = (chunk_format or input_format(model, inputs)) if perturb_fn is None else None
    norm_stats = check_normalize(normalize, inputs.shape[1]) if normalize is not None else None
    norm = Normalize(*norm_stats).on(inputs) if norm_stats is not None else None  # on the device once per call
    perturbation = Perturbation(inputs, base, fmap.index, fmap.n_features, f_max, fmap.fixed, perturb_fn, fmt,
                                norm, _adapter, reusable=getattr(sampler_, "reusable", True))
    m_dev, m_dtype = chunk_placement(model, inputs, fmt.dtype if fmt is not None else None)
    sig = (tuple(inputs.shape[1:]), str(fmt.dtype if fmt and fmt.dtype else inputs.dtype),
           bool(fmt and fmt.channels_last), perturb_fn is None)
    plan = ChunkPlan(model, sig, m_dev, batch_size, max_memory)
    run = Run(model=model, fmap=fmap, draw=draw, perturbation=perturbation, kernel=kernel_, plan=plan,
              placement=(m_dev, m_dtype), n_cap=n_samples, target_spec=opts["target"], output=output, softmax=softmax,
              progress=progress, fit_dtype=surrogate_.dtype, keep=return_samples)
    everyone = range(batch)
    first = min(adaptive.start, n_samples) if adaptive else n_samples
    run.forward(RowOrder(everyone, 0, first, dev))
    if run.dists is not None:  # kernels normalised by all S distances of an input (e.g. max-normalised)
        run.scale = kernel_.normaliser(run.dists, torch.ones_like(run.dists, dtype=torch.bool))
        if run.scale is not None and adaptive is not None:
            raise ValueError(f"`kernel` {kernel_!r} normalises by all of an input's distances: it needs an int "
                             f"n_samples, not 'auto'")
    run.accumulate(everyone, 0, first)
    used = [first] * batch  # samples per input (host ints)
    if adaptive:  # rounds: double the samples of the inputs whose top-k is not stable yet
        active, s_cur = list(everyone), first
        alpha = getattr(surrogate_, "alpha", 0.0) if isinstance(surrogate_, Ridge) else 0.0
        while s_cur < n_samples:
            normal = run.acc.normal()
            fit = surrogate_.fit_normal(normal, valid, anchors=run.scores[:, :2])
            settled = adaptive.stable(normal, fit, valid, alpha).tolist()
            active = [a for a in active if not settled[a]]
            if not active:
                break
            s_next = min(2 * s_cur, n_samples)
            run.forward(RowOrder(active, s_cur, s_next, dev))
            run.accumulate(active, s_cur, s_next)
            for a in active:
                used[a] = s_next
            s_cur = s_next
    t_forward = time.perf_counter()
    targets, outputs = run.targets, run.scores
    drawn = torch.arange(n_samples, device=dev) < torch.tensor(used, device=dev).unsqueeze(1)  # (B, S)
    nonfinite = ((~torch.isfinite(outputs)) & drawn.unsqueeze(-1)).sum()  # read with the quality flags

    normal = run.acc.normal()
    fit = surrogate_.fit_normal(normal, valid, anchors=run.scores[:, :2])
    flags = assess(normal.ss_tot, normal.weight_sum, normal.weight_sq_sum, fit.score, fmap.n_features)
    n_bad, *counts = torch.cat((nonfinite.view(1), flags.counts())).tolist()  # the call's last host sync
    if n_bad:
        _raise_nonfinite_outputs(outputs.masked_fill(~drawn.unsqueeze(-1), 0.0))
    quality, unreliable = report(flags, counts)
    if unreliable:
        warnings.warn(f"unreliable explanation: {unreliable} (see torchlime.engine.quality)",
                      UnreliableExplanationWarning, stacklevel=2 if _input_name == "inputs" else 3)
    meta = dict(n_samples=n_samples if adaptive is None else repr(adaptive), sampler=repr(sampler_),
                kernel=repr(kernel_), surrogate=repr(surrogate_), baseline=describe_baseline(opts["baseline"]),
                perturbation="blend" if perturb_fn is None and _adapter is None else "custom",
                normalize=None if norm_stats is None else [norm_stats[0], norm_stats[1]],
                preset=preset, batch_size=plan.chosen, softmax=softmax, model_rows=sum(used),
                samples_used=used, peak_memory=plan.peak_memory(), quality=quality, unreliable=unreliable,
                seconds_forward=t_forward - t0, seconds_total=time.perf_counter() - t0)
    return Explanation(
        perturbation=perturbation, coef=fit.coef, intercept=fit.intercept, score=fit.score, local_pred=fit.local_pred,
        coef_std=fit.coef_std,
        target=targets, features=fmap.labels, n_features=fmap.n_features, input_shape=tuple(inputs.shape[1:]),
        samples=torch.cat(run.kept_masks, 1) if return_samples else None,
        outputs=outputs if return_samples else None,
        weights=torch.cat(run.kept_weights, 1) if return_samples else None, meta=meta,
    )


def _raise_nonfinite_outputs(outputs: torch.Tensor) -> None:
    """Raise ValueError naming how many samples of which inputs gave NaN/inf scores."""
    bad = ~torch.isfinite(outputs).all(-1)  # (B, S)
    if bool(bad.any()):
        per_input = bad.sum(1)
        which = per_input.nonzero().flatten().tolist()
        raise ValueError(f"the model returned non-finite outputs for {int(per_input.sum())} of "
                         f"{outputs.shape[0] * outputs.shape[1]} samples (inputs {which}); "
                         f"check the model and the baseline")
