"""Step 2 of an explanation: everything the forward passes need, built once per call on the device.

The feature map is relabelled (the call's first host synchronisation, with the input checks),
explicit masks are checked against it, the sampler and kernel are bound to it, the call's random
key and the fill are made, and the perturbation (the fused blend, or the front door's own), the
chunk plan and the ``Run`` that scores and accumulates the rows are set up.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Optional

import torch

from torchlime._util.checks import check_finite, check_normalize, check_tensor, describe
from torchlime.engine.rows import Run
from torchlime.engine.settings import Settings
from torchlime.engine.sizes import check_sizes
from torchlime.stages.features import FeatureMap, prepare_features
from torchlime.stages.fixed_cost import columns, derived
from torchlime.stages.forward.chunking import ChunkPlan
from torchlime.stages.forward.model import chunk_placement, input_format, model_placement
from torchlime.stages.forward.targets import list_rows
from torchlime.stages.perturb.blend import Normalize
from torchlime.stages.perturb.fills import Fill, FillContext, resolve_baseline, signal_dims
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.sampling import Rows, Sampler, make_key
from torchlime.targets.base import Target
from torchlime.typing import TargetSpec


@dataclass(frozen=True)
class Plan:
    """One call, ready to run (``plan``).

    Attributes:
        settings: the resolved arguments.
        fmap: the relabelled feature map.
        sampler: the sampler bound to the call (or the given one, with explicit masks).
        perturbation: how rows become model inputs (kept with the explanation for the metrics).
        chunks: the chunk-size plan.
        run: the forward passes and the accumulated fit.
        normalize: the per-channel statistics of ``normalize=`` as lists (for ``meta``), or None.
        started: ``time.perf_counter()`` when the device work began.
    """

    settings: Settings
    fmap: FeatureMap
    sampler: Sampler
    perturbation: Perturbation
    chunks: ChunkPlan
    run: Run
    normalize: Optional[tuple[list[float], list[float]]]
    started: float


def _check_finite_fill(base: torch.Tensor, spec: object) -> None:
    """A fill must be finite: numbers checked on the host, tensors and callables on the device.

    Named fills of finite inputs are finite.
    """
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        if not math.isfinite(spec):
            raise ValueError(f"`baseline` must be finite, got {spec}")
    elif isinstance(spec, torch.Tensor) or (callable(spec) and not isinstance(spec, Fill)):
        check_finite(base, "baseline")


def _check_mean_fill(spec: object, fmap: FeatureMap, name: str) -> None:
    """``baseline="mean"`` over features of one element each is the input itself: refuse it.

    Every sample would equal the input, the outputs would not vary and every coefficient would be 0.
    """
    if isinstance(spec, str) and spec == "mean" and fmap.singletons:
        shape = tuple(fmap.labels.shape[1:])
        raise ValueError(
            f'`baseline="mean"` (each feature\'s own mean) is the input itself here: every feature of `{name}` '
            f"is a single element of its feature map (shape {shape}, {fmap.f_max} features), so no sample would "
            'differ from the input; pass another `baseline` ("zero", "signal_mean", "blur" or a tensor; `Series` '
            "fills a channel with its mean over time when `baseline` is unset) or features that group several "
            "elements"
        )


def _check_masks(masks: object, batch: int, n_samples: int, f_max: int, device: torch.device) -> torch.Tensor:
    """Explicit masks: bool (B, S, F) for the call's feature map, moved to the inputs' device."""
    checked = check_tensor(masks, "masks")
    if checked.dtype != torch.bool or checked.shape != (batch, n_samples, f_max):
        raise ValueError(f"`masks` must be bool with shape ({batch}, {n_samples}, {f_max}), got {describe(masks)}")
    return checked.to(device)


def _known_targets(target: TargetSpec, batch: int) -> int:
    """T as far as it is known before the model runs: the width of a list's rows or of a (B, T) tensor, else 1."""
    if isinstance(target, (list, tuple)):
        rows = list_rows(target, batch)  # a flat list of B ints is one class per input: T = 1
        return max(len(rows[0]), 1) if rows else 1
    if isinstance(target, torch.Tensor) and target.ndim == 2:
        return int(target.shape[1])
    return 1  # an int, None, "all", "topK" or a structured Target: T >= 1 until the model's output is read


def _check_sizes(s: Settings, fmap: FeatureMap) -> None:
    """The call's whole-kept arrays against the memory of its device (``sizes.check_sizes``), host ints only."""
    float64 = model_placement(s.model, s.inputs)[1] == torch.float64 and not isinstance(s.target, Target)
    check_sizes(
        s.inputs.shape[0],
        s.n_samples,
        fmap.f_max,
        _known_targets(s.target, s.inputs.shape[0]),
        device=s.inputs.device,
        keep_samples=s.call.return_samples,
        score_bytes=8 if float64 else 4,
        sample_space=s.surrogate.sample_space,
    )


def plan(s: Settings) -> Plan:
    """Build the call's feature map, masks, fill, perturbation, chunk plan and ``Run``.

    Args:
        s: the call's resolved arguments.

    Returns:
        The ``Plan`` of the call.

    Raises:
        ValueError: inputs with fewer than 2 features or non-finite values, masks of the wrong
            shape, a non-finite fill, ``baseline="mean"`` over single-element features.
        SizeError: a call whose outputs, fit (and kept samples) exceed the memory of its device
            (``sizes.check_sizes``), before anything of its size is allocated.
    """
    inputs, batch, dev = s.inputs, s.inputs.shape[0], s.inputs.device
    started = time.perf_counter()
    fmap = prepare_features(inputs, s.features, s.input_name)
    _check_sizes(s, fmap)  # F is known from here on (host ints): refuse what no memory could hold
    _check_mean_fill(s.baseline, fmap, s.input_name)
    given = s.call.masks
    masks = None if given is None else _check_masks(given, batch, s.n_samples, fmap.f_max, dev)
    sampler = s.sampler if masks is not None else s.sampler.bind(fmap, s.n_samples)  # designs planned from the map
    kernel = s.kernel.bind(fmap, s.n_samples)
    key = make_key(s.call.generator, dev)
    ids = columns(batch, dev) if s.call.index is None else s.call.index.to(dev).long()
    ctx = FillContext(fmap.index, fmap.f_max + 1, signal_dims(tuple(inputs.shape), tuple(fmap.index.shape)), key, ids)
    base = resolve_baseline(s.baseline, inputs, ctx)
    _check_finite_fill(base, s.baseline)

    def draw(b: torch.Tensor, smp: torch.Tensor) -> torch.Tensor:
        """Masks (c, F) of rows (input b, sample s)."""
        if masks is not None:
            return masks[b, smp]
        # the rows' ids and counts depend only on tensors later calls pass again (kept: stages.fixed_cost)
        of_rows = (
            derived("rows", lambda: ids[b], b, ids),
            derived("rows", lambda: fmap.n_features[b], b, fmap.n_features),
        )
        return sampler.masks(Rows(key, of_rows[0], smp, of_rows[1], fmap.f_max, b))

    perturb_fn, normalize = s.call.perturb_fn, s.call.normalize
    fmt = (s.call.chunk_format or input_format(s.model, inputs)) if perturb_fn is None else None
    stats = check_normalize(normalize, inputs.shape[1]) if normalize is not None else None
    norm = Normalize(*stats).on(inputs) if stats is not None else None  # on the device once per call
    perturbation = Perturbation(
        inputs,
        base,
        fmap.index,
        fmap.n_features,
        fmap.f_max,
        fmap.fixed,
        perturb_fn,
        fmt,
        norm,
        s.adapter,
        reusable=getattr(sampler, "reusable", True),
        block_rows=fmap.block_rows,
    )
    m_dev, m_dtype = chunk_placement(s.model, inputs, fmt.dtype if fmt is not None else None)
    signature = (
        tuple(inputs.shape[1:]),
        str(fmt.dtype if fmt and fmt.dtype else inputs.dtype),
        bool(fmt and fmt.channels_last),
        perturb_fn is None,
    )
    chunks = ChunkPlan(s.model, signature, m_dev, s.config.batch_size, s.config.max_memory)
    run = Run(
        s, fmap=fmap, draw=draw, perturbation=perturbation, kernel=kernel, plan=chunks, placement=(m_dev, m_dtype)
    )
    return Plan(s, fmap, sampler, perturbation, chunks, run, stats, started)
