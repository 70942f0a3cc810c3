"""``explain``: the modality-free engine that chains the six stages.

features → sample → perturb → forward → weight → fit, for B inputs and T
targets each, with one chunked pass of the B·S perturbed inputs through the model.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable, Optional, Union

import torch

from ._checks import check_integer, check_positive_int, check_tensor, describe
from .baselines import BaselineSpec, resolve_baseline
from .explanation import Explanation
from .features import relabel
from .forward import Model, default_batch_size, eval_mode, model_placement, run_chunks, select_output
from .perturb import perturb_chunk
from .presets import UNSET, apply_preset
from .sampling import Sampler, resolve_sampler, valid_features
from .surrogate import Surrogate, resolve_surrogate
from .weighting import Kernel, input_distance, mask_distance, resolve_kernel

TargetSpec = Union[None, int, str, torch.Tensor, list]


def check_inputs(inputs: Any, features: Any) -> None:
    """Validate ``inputs`` (B, ...) and ``features`` (B or 1, ... broadcastable)."""
    check_tensor(inputs, "inputs")
    check_tensor(features, "features")
    if inputs.ndim < 2:
        raise ValueError(f"`inputs` must be batched with shape (B, ...), got shape {tuple(inputs.shape)}")
    check_integer(features, "features")
    if features.device != inputs.device:
        raise ValueError(f"`features` must be on the same device as `inputs` ({inputs.device}), "
                         f"got {features.device}")
    ok = features.ndim == inputs.ndim and features.shape[0] in (1, inputs.shape[0])
    if ok:
        try:
            torch.broadcast_shapes(features.shape[1:], inputs.shape[1:])
            ok = all(f in (1, i) for f, i in zip(features.shape[1:], inputs.shape[1:]))
        except RuntimeError:
            ok = False
    if not ok:
        raise ValueError(f"`features` must have shape (B or 1, ...) broadcastable to `inputs` "
                         f"{tuple(inputs.shape)}, got {tuple(features.shape)}")


def resolve_target(target: TargetSpec, reference: torch.Tensor) -> torch.Tensor:
    """Turn a target specification into long (B, T) output columns.

    Args:
        target: None (top class), an int, ``"all"``, ``"topK"`` (e.g. "top5"), a list of
            ints shared by all inputs, or a long tensor (B,) or (B, T).
        reference: (B, K) model scores of the unperturbed inputs.
    """
    batch, k = reference.shape
    dev = reference.device
    if target is None:
        return reference.argmax(1, keepdim=True)
    if isinstance(target, str):
        if target == "all":
            return torch.arange(k, device=dev).expand(batch, k)
        m = re.fullmatch(r"top(\d+)", target)
        if not m or int(m.group(1)) < 1:
            raise ValueError(f"`target` string must be 'all' or 'topK' (e.g. 'top5'), got {target!r}")
        return reference.topk(min(int(m.group(1)), k), dim=1).indices
    if isinstance(target, bool):
        raise TypeError(f"`target` must be None, an int, a string, a list or a tensor, got {describe(target)}")
    if isinstance(target, int):
        t = torch.full((batch, 1), target, dtype=torch.long, device=dev)
    elif isinstance(target, (list, tuple)):
        t = torch.as_tensor(target, dtype=torch.long, device=dev).reshape(1, -1).expand(batch, -1)
    elif isinstance(target, torch.Tensor):
        check_integer(target, "target")
        t = target.to(dev).long()
        t = t.unsqueeze(1) if t.ndim == 1 else t
        if t.ndim != 2 or t.shape[0] != batch:
            raise ValueError(f"`target` tensor must have shape ({batch},) or ({batch}, T), got {tuple(target.shape)}")
    else:
        raise TypeError(f"`target` must be None, an int, a string, a list or a tensor, got {describe(target)}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= k):
        bad = t[(t < 0) | (t >= k)].unique().tolist()
        raise ValueError(f"`target` must be in [0, {k}) for a model with {k} outputs, got {bad}")
    return t


def resolve_generator(generator: Union[None, int, torch.Generator], device: torch.device) -> torch.Generator:
    """An explicit generator; None means seed 0 (explanations are reproducible by default)."""
    if isinstance(generator, torch.Generator):
        return generator
    if generator is None or (isinstance(generator, int) and not isinstance(generator, bool)):
        return torch.Generator(device=device).manual_seed(0 if generator is None else generator)
    raise TypeError(f"`generator` must be None, an int seed or a torch.Generator, got {describe(generator)}")


def explain(model: Model, inputs: torch.Tensor, features: torch.Tensor, *,
            target: TargetSpec = UNSET, n_samples: int = UNSET, baseline: BaselineSpec = UNSET,
            sampler: Union[Sampler, str] = UNSET, kernel: Union[Kernel, str, float] = UNSET,
            surrogate: Union[Surrogate, str] = UNSET, batch_size: Optional[int] = None,
            generator: Union[None, int, torch.Generator] = None, return_samples: bool = False,
            preset: Optional[str] = None, output: Any = None, softmax: bool = False,
            progress: bool = False, masks: Optional[torch.Tensor] = None,
            perturb_fn: Optional[Callable[..., Any]] = None, _preset_extra: Optional[dict] = None) -> Explanation:
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
        n_samples: S, perturbed samples per input (row 0 is the input itself).
        baseline: value of hidden features: number, tensor, "mean", "blur" or callable.
        sampler: ``Sampler`` or "bernoulli" / "uniform_count" / "shapley".
        kernel: ``Kernel``, a float width, or "lime" / "captum" / "uniform".
        surrogate: ``Surrogate`` or "ridge" / "lasso" / "klasso".
        batch_size: chunk of perturbed inputs per model call (default: see
            ``forward.default_batch_size``); halves itself on CUDA out-of-memory.
        generator: ``torch.Generator`` or int seed; None = seed 0.
        return_samples: keep masks (B, S, F), outputs (B, S, T), weights (B, S).
        preset: "lime", "lime_text" or "captum" fills keywords not given.
        output: selector for tuple/dict outputs (key, index or callable).
        softmax: apply softmax to the scores first (explain probabilities of logit models).
        progress: print a progress line.
        masks: optional explicit bool masks (B, S, F) instead of sampling.
        perturb_fn: replaces stage 3: ``perturb_fn(inputs, baseline, labels, masks,
            start, stop)`` returns the model input of rows start:stop (a tensor, or a
            tuple / dict of tensors for models with several arguments); default
            ``perturb.perturb_chunk``. Negative labels have been mapped to an extra,
            always-True mask column F.

    Returns:
        ``Explanation`` with coef (B, T, F), intercept, score, local_pred (B, T).

    Raises:
        TypeError / ValueError: bad arguments (names the argument, expected and got),
            non-finite model outputs, inputs with a single feature.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> x = torch.rand(2, 1, 4, 4)
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2  # 8 features: pairs of pixels in a row
        >>> exp = explain(model, x, feats, n_samples=64)
        >>> exp.coef.shape
        torch.Size([2, 1, 8])
    """
    opts = apply_preset(preset, dict(target=target, n_samples=n_samples, baseline=baseline,
                                     sampler=sampler, kernel=kernel, surrogate=surrogate), _preset_extra)
    n_samples = check_positive_int(opts["n_samples"], "n_samples", minimum=2)
    sampler_ = resolve_sampler(opts["sampler"])
    kernel_ = resolve_kernel(opts["kernel"])
    surrogate_ = resolve_surrogate(opts["surrogate"])
    check_inputs(inputs, features)
    if batch_size is not None:
        check_positive_int(batch_size, "batch_size")
    t0 = time.perf_counter()

    batch = inputs.shape[0]
    dev = inputs.device
    labels, n_feat = relabel(features.expand(batch, *features.shape[1:]))
    single = (n_feat < 2).nonzero().flatten().tolist()
    if single:
        raise ValueError(f"`features` must give every input at least 2 features to explain; "
                         f"inputs {single} have a single feature")
    f_max = int(n_feat.max())
    valid = valid_features(n_feat, f_max)
    # elements outside every feature (negative ids) index an extra, always-kept mask column
    fixed = bool((labels < 0).any())
    labels_k = torch.where(labels < 0, f_max, labels) if fixed else labels
    base = resolve_baseline(opts["baseline"], inputs, labels_k, f_max + 1)
    if inputs.ndim == 4 and not inputs.is_contiguous() and inputs.is_contiguous(memory_format=torch.channels_last):
        base = base.contiguous(memory_format=torch.channels_last)  # chunks keep the inputs' layout
    _check_finite_values(inputs, "inputs")
    _check_finite_values(base, "baseline")

    gen = resolve_generator(generator, dev)
    if masks is None:
        masks = sampler_(n_feat.to(gen.device), n_samples, f_max, gen).to(dev)
    else:
        check_tensor(masks, "masks")
        if masks.dtype != torch.bool or masks.shape != (batch, n_samples, f_max):
            raise ValueError(f"`masks` must be bool with shape ({batch}, {n_samples}, {f_max}), "
                             f"got {describe(masks)}")
        masks = masks.to(dev)
    masks_k = torch.nn.functional.pad(masks, (0, 1), value=True) if fixed else masks
    build_fn = perturb_fn or perturb_chunk

    m_dev, m_dtype = model_placement(model, inputs)
    n_rows = batch * n_samples
    with eval_mode(model):
        chunk = _chunk_size(model, batch_size, m_dev, n_rows, inputs,
                            lambda c: build_fn(inputs, base, labels_k, masks_k, 0, c))
        reference = _reference_scores(model, inputs, output, softmax, chunk, m_dev, m_dtype)
        targets = resolve_target(opts["target"], reference)
        n_t = targets.shape[1]
        scores = torch.empty(n_rows, n_t, dtype=torch.float32, device=dev)
        dists = torch.empty(n_rows, dtype=torch.float32, device=dev) if kernel_.space == "input" else None

        def build(start: int, stop: int) -> torch.Tensor:
            return build_fn(inputs, base, labels_k, masks_k, start, stop)

        def consume(out: Any, x: torch.Tensor, start: int, stop: int) -> None:
            s = select_output(out, output, stop - start)
            if softmax:
                s = s.float().softmax(1)
            rows = torch.arange(start, stop, device=dev) // n_samples
            tgt = targets[rows].to(s.device)
            scores[start:stop] = s.gather(1, tgt).to(device=dev, dtype=torch.float32)
            if dists is not None:
                dists[start:stop] = input_distance(x, inputs[rows], kernel_.distance)

        used = run_chunks(model, build, consume, n_rows, chunk, m_dev, m_dtype, progress)
    t_forward = time.perf_counter()

    outputs = scores.view(batch, n_samples, n_t)
    _check_finite(outputs)
    d = dists.view(batch, n_samples) if dists is not None else mask_distance(masks, valid, kernel_.distance)
    weights = kernel_.weigh(d)
    fit = surrogate_.fit(masks, outputs, weights, valid)
    meta = dict(n_samples=n_samples, sampler=repr(sampler_), kernel=repr(kernel_),
                surrogate=repr(surrogate_), preset=preset, batch_size=used, softmax=softmax,
                seconds_forward=t_forward - t0, seconds_total=time.perf_counter() - t0)
    return Explanation(
        coef=fit.coef, intercept=fit.intercept, score=fit.score, local_pred=fit.local_pred,
        target=targets, features=labels, n_features=n_feat, input_shape=tuple(inputs.shape[1:]),
        samples=masks if return_samples else None, outputs=outputs if return_samples else None,
        weights=weights if return_samples else None, meta=meta,
    )


def _chunk_size(model: Model, batch_size: Optional[int], device: torch.device, n_rows: int,
                inputs: torch.Tensor, make_chunk: Callable[[int], Any]) -> int:
    """The user's chunk size; else an ``accel.Accelerated`` model's own; else the largest that
    fits in free CUDA memory (probed once per model and shape, cached); else the CPU rule."""
    if batch_size is not None:
        return batch_size
    fixed = getattr(model, "chunk_size", None)
    if isinstance(fixed, int) and fixed > 0:
        return fixed
    if device.type == "cuda":
        from .chunking import auto_batch_size

        return auto_batch_size(model, make_chunk, device, max_size=min(n_rows, 4096),
                               identity=getattr(model, "cache_identity", None))
    return default_batch_size(inputs, n_rows)


def _reference_scores(model: Model, inputs: torch.Tensor, output: Any, softmax: bool, chunk: int,
                      device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Scores (B, K) of the unperturbed inputs: they pick default targets and check the output shape."""
    parts: list[torch.Tensor] = []

    def consume(out: Any, x: torch.Tensor, start: int, stop: int) -> None:
        s = select_output(out, output, stop - start)
        parts.append(s.float().softmax(1) if softmax else s.float())

    run_chunks(model, lambda a, b: inputs[a:b], consume, inputs.shape[0], chunk, device, dtype)
    return torch.cat(parts).to(inputs.device)


def _check_finite_values(t: torch.Tensor, name: str) -> None:
    """Raise ValueError if a floating or complex tensor holds NaN or inf (one check at set-up)."""
    if t.is_floating_point() or t.is_complex():
        bad = ~torch.isfinite(t)
        if bool(bad.any()):
            rows = bad.reshape(t.shape[0], -1).any(1).nonzero().flatten().tolist()
            raise ValueError(f"`{name}` must be finite, got {int(bad.sum())} NaN/inf values (inputs {rows})")


def _check_finite(outputs: torch.Tensor) -> None:
    """Raise ValueError naming how many samples of which inputs gave NaN/inf scores."""
    bad = ~torch.isfinite(outputs).all(-1)  # (B, S)
    if bool(bad.any()):
        per_input = bad.sum(1)
        which = per_input.nonzero().flatten().tolist()
        raise ValueError(f"the model returned non-finite outputs for {int(per_input.sum())} of "
                         f"{outputs.shape[0] * outputs.shape[1]} samples (inputs {which}); "
                         f"check the model and the baseline")
