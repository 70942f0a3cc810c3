"""Perturbing an explanation's inputs again, and scoring the rows through the model in chunks.

``perturbed(model, inputs, explanation, baseline)`` gives the ``Perturbation`` the metrics
use and the model the engine ran:

* the explanation's own record (``explanation.perturbation``): the same fill, fused
  normalisation, token deletion or masked-token replacement, inverse STFT; ``baseline=``
  swaps the fill (``Perturbation.with_baseline``; text perturbations ignore it);
* or, for an explanation without one (loaded from a file, moved with ``to``), a blend of
  ``inputs`` with the ``baseline=`` fill over ``explanation.features``, built as the engine
  builds it (``prepare_features``, ``resolve_baseline``; random fills use seed 0). The default
  fill is the one ``meta["baseline"]`` names (a number or a fill name); a tensor or callable
  fill is not saved with an explanation, so 0 is used then, with a warning.

``score_masks`` runs the rows of masks (B, M, F) through the model, M rows per input, in the
chunks of ``chunking.ChunkPlan`` (``forward.run_rows``), keeping only what ``take`` selects of
every chunk's scores: no host synchronisation per chunk. With ``progress=True`` a tqdm bar on
stderr counts the rows scored (the engine's ``forward.passes.progress_bar``, labelled with the
metric's name); the values do not depend on it.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Callable, NamedTuple, Optional, Union, cast

import torch

from torchlime._util.checks import check_finite, check_tensor, describe
from torchlime.engine.explanation import Explanation
from torchlime.metrics._common import Scoring, check_explanation
from torchlime.stages.features import prepare_features
from torchlime.stages.forward.chunking import ChunkPlan
from torchlime.stages.forward.model import (
    Model,
    OutputSelector,
    chunk_placement,
    eval_mode,
    input_format,
    select_output,
)
from torchlime.stages.forward.passes import progress_bar, run_rows
from torchlime.stages.perturb.blend import Chunk, Normalize
from torchlime.stages.perturb.fills import (
    NAMES,
    BaselineSpec,
    Blur,
    FillContext,
    describe_baseline,
    resolve_baseline,
    signal_dims,
)
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.sampling import make_key
from torchlime.targets.base import Bound
from torchlime.typing import UNSET

MasksOf = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (input b (c,), row s (c,)) -> bool (c, F)
Take = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (scores (c, K), b, s) -> (c, W)


class Perturbed(NamedTuple):
    """The perturbation of a metric's rows and the model that scores them (the engine's)."""

    perturbation: Perturbation
    model: Model
    scorer: Optional[Bound] = None


def own_softmax(softmax: Optional[bool], explanation: object) -> bool:
    """``softmax`` as given, or for None the explanation's own (``call.softmax``, else ``run.softmax``).

    False when the explanation records none.

    Example:
        >>> from types import SimpleNamespace
        >>> own_softmax(None, SimpleNamespace(call=None, run=SimpleNamespace(softmax=True))), own_softmax(False, None)
        (True, False)
    """
    if softmax is not None:
        return softmax
    for record in (getattr(explanation, "call", None), getattr(explanation, "run", None)):
        recorded = getattr(record, "softmax", None)
        if isinstance(recorded, bool):
            return recorded
    return False


def own_output(output: OutputSelector, explanation: object) -> OutputSelector:
    """``output`` as given, or for None the selector the explanation was made with (``Explanation.call``).

    Example:
        >>> from types import SimpleNamespace
        >>> own_output(None, SimpleNamespace(call=SimpleNamespace(output="logits"))), own_output(0, None)
        ('logits', 0)
    """
    if output is not None:
        return output
    call = getattr(explanation, "call", None)
    return cast(OutputSelector, getattr(call, "output", None))


def resolve_fill(spec: BaselineSpec, inputs: torch.Tensor, index: torch.Tensor, f_max: int) -> torch.Tensor:
    """The fill (B, *shape) of ``spec`` for ``inputs``, with the engine's context (random fills: seed 0).

    Raises:
        TypeError / ValueError: a bad specification, or a non-finite fill.
    """
    if isinstance(spec, float) and not math.isfinite(spec):
        raise ValueError(f"`baseline` must be finite, got {spec}")
    dev = inputs.device
    ctx = FillContext(
        index,
        f_max + 1,
        signal_dims(tuple(inputs.shape), tuple(index.shape)),
        make_key(None, dev),
        torch.arange(inputs.shape[0], device=dev),
    )
    base = resolve_baseline(spec, inputs, ctx)
    if isinstance(spec, torch.Tensor) or callable(spec):
        check_finite(base, "baseline")
    return base


def perturbed(model: Model, inputs: object, explanation: object, baseline: Optional[BaselineSpec]) -> Perturbed:
    """The perturbation of ``explanation`` (its record, or one built from ``inputs``) and the model it runs.

    Args:
        model: the user's model (as given to the explanation's front door).
        inputs: (B, ...) the explained inputs. When the explanation carries its perturbation
            (whose own inputs are used), inputs of the recorded shape must equal them.
        explanation: an ``Explanation`` of those inputs.
        baseline: None (the recorded fill: the perturbation's, else ``run.baseline``) or a fill
            specification.

    Raises:
        TypeError / ValueError: a model that is not callable, inputs of another batch size or
            other values than the explained ones, a feature map that does not fit the inputs,
            a perturbation that cannot be reused.
    """
    exp = check_explanation(explanation)
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    inputs = check_tensor(inputs, "inputs")
    b = exp.coef.shape[0]
    if inputs.ndim < 2 or inputs.shape[0] != b:
        raise ValueError(
            f"`inputs` must be the explanation's {b} inputs, batched (B, ...), got shape {tuple(inputs.shape)}"
        )
    p = exp.perturbation
    if p is not None:
        same = inputs is p.inputs or p.inputs.shape != inputs.shape  # other tensors: one synchronisation
        if not same and not torch.equal(inputs.to(p.inputs.device, p.inputs.dtype), p.inputs):
            raise ValueError(
                "`inputs` must be the inputs `explanation` explained, got other values (of the same "
                "shape): the metrics hide features of the explained inputs"
            )
        if not p.reusable:
            raise ValueError(
                "`explanation` was perturbed by a design tied to its own samples (text's single-mask "
                "infill protocol): its perturbation cannot hide other features"
            )
        if baseline is not None:
            p = p.with_baseline(resolve_fill(baseline, p.inputs, p.index, p.f_max))
        return Perturbed(p, p.adapt(model), exp.scorer)
    rebuilt = _rebuild(model, inputs, exp, recorded_fill(exp) if baseline is None else baseline)
    return Perturbed(rebuilt, model, exp.scorer)


def recorded_fill(exp: Explanation) -> BaselineSpec:
    """The fill ``exp.run.baseline`` names (a number, a fill name or a ``Blur``), else 0 with a warning.

    A tensor or callable fill is recorded only by its description, so it gives 0 with a warning. Without
    a run record, the fill of ``exp.config`` (an attribution's, ``metrics.attributions``) or of a file's
    stored entries; no record: 0.
    """
    rec = _recorded_baseline(exp)
    if rec is None:
        return 0.0
    if (isinstance(rec, (int, float)) and not isinstance(rec, bool)) or rec in NAMES:
        return cast(BaselineSpec, rec)
    blur = re.fullmatch(r"Blur\(sigma=(None|[-+0-9.eE]+)\)", rec) if isinstance(rec, str) else None
    if blur:  # a Blur fill is recorded by its repr (audio's "blur" is Blur(sigma=2.0))
        return Blur(sigma=None if blur.group(1) == "None" else float(blur.group(1)))
    warnings.warn(
        f"the explanation's fill ({rec}) was not saved with it: hiding features with 0 instead "
        f"(pass baseline= to choose)",
        UserWarning,
        stacklevel=4,
    )
    return 0.0


def _recorded_baseline(exp: Explanation) -> object:
    """The fill's description: the run's, else the config's, else a file's stored one, else 0."""
    if exp.run is not None:
        return exp.run.baseline
    if exp.config is not None and exp.config.baseline is not UNSET:
        return describe_baseline(exp.config.baseline)
    return exp.stored.get("baseline", 0.0)


def _own_perturbation(exp: Explanation) -> tuple[str, Optional[str]]:
    """How the explanation hid its features ("blend" or "custom") and, for text, the mode.

    From ``run.perturbation``; a file of an older version without it: its stored entries (text, with a
    "mode", and tabular rows were never blends).
    """
    mode = None if exp.info is None else exp.info.top_level().get("mode")  # a text record's mode
    mode = exp.stored.get("mode") if mode is None else mode
    if exp.run is not None:
        return exp.run.perturbation, None if mode is None else str(mode)
    older = "custom" if mode is not None or "tabular" in exp.stored else "blend"
    return str(exp.stored.get("perturbation", older)), None if mode is None else str(mode)


def _rebuild(model: Model, inputs: torch.Tensor, exp: Explanation, baseline: BaselineSpec) -> Perturbation:
    """A blend of ``inputs`` and ``baseline`` over ``exp.features``, as the engine builds it.

    Raises:
        ValueError: the explanation was perturbed by a front door's own perturbation (token
            deletion or replacement, crossfades), which no blend reproduces.
    """
    own, mode = _own_perturbation(exp)
    if own != "blend":
        how = f"text mode {mode!r}" if mode is not None else "its front door's own perturbation"
        raise ValueError(
            f"`explanation` hid its features by {how}, which is not saved with it and not kept by "
            f"`to` another device: score the explanation as the front door returned it"
        )
    f = exp.coef.shape[-1]
    feats = exp.features.to(inputs.device)
    fits = feats.ndim == inputs.ndim and all(s in (1, i) for s, i in zip(feats.shape[1:], inputs.shape[1:]))
    if not fits:
        raise ValueError(
            f"`explanation.features` {tuple(feats.shape)} must broadcast to `inputs` "
            f"{tuple(inputs.shape)}: an explanation without its perturbation (loaded from a file) "
            f"is perturbed again as a blend of `inputs` and `baseline` over its feature map"
        )
    fmap = prepare_features(inputs, feats)
    if fmap.f_max != f or not torch.equal(fmap.n_features, exp.n_features.to(inputs.device)):
        raise ValueError(
            f"`explanation.features` must number the features of `inputs` as the explanation "
            f"does ({exp.n_features.tolist()} features), got {fmap.n_features.tolist()}"
        )
    base = resolve_fill(baseline, inputs, fmap.index, f)
    stats = None if exp.run is None else exp.run.normalize  # the fused normalisation the explanation ran with
    norm = Normalize(*stats).on(inputs) if stats else None
    return Perturbation(
        inputs,
        base,
        fmap.index,
        fmap.n_features,
        f,
        fmap.fixed,
        None,
        input_format(model, inputs),
        norm,
        None,
        block_rows=fmap.block_rows,
    )


def signature_of(p: Perturbation) -> tuple[object, ...]:
    """The per-row signature the engine keys its measured chunk size with (so it is reused)."""
    fmt = p.fmt
    return (
        tuple(p.inputs.shape[1:]),
        str(fmt.dtype if fmt and fmt.dtype else p.inputs.dtype),
        bool(fmt and fmt.channels_last),
        p.perturb_fn is None,
    )


def score_rows(  # noqa: PLR0913
    model: Model,
    build: Callable[[int, int], object],
    take: Callable[[torch.Tensor, int, int], torch.Tensor],
    n_rows: int,
    width: int,
    *,
    reference: torch.Tensor,
    signature: tuple[object, ...],
    run: Scoring,
    chunk_dtype: Optional[torch.dtype] = None,
    scorer: Optional[Bound] = None,
    inputs_of: Optional[Callable[[int, int], torch.Tensor]] = None,
) -> torch.Tensor:
    """Float32 (n_rows, width): ``take(scores, start, stop)`` of every chunk of rows built by ``build``.

    ``scores`` are the model's float32 (c, K) outputs (softmax applied when asked) on
    ``reference``'s device; the model runs in eval mode under ``torch.inference_mode()``.
    ``chunk_dtype``: the floating dtype ``build`` writes the chunks in, when it chooses one
    (the perturbation's ``fmt.dtype``): the model gets them in it (see ``forward.chunk_placement``).
    With a structured target's ``scorer``, ``scores`` are its (c, T) scores of the rows, whose inputs
    ``inputs_of(start, stop)`` gives (long (c,)). ``run``: the metric's options (output selector, softmax,
    rows per call, a tqdm bar over the rows labelled with the metric's name).
    """
    output, dev = run.output, reference.device
    m_dev, m_dtype = chunk_placement(model, reference, chunk_dtype)
    out = torch.empty(n_rows, width, device=dev)
    done = 0

    def consume(raw: object, x: object, start: int, stop: int) -> None:
        nonlocal done
        if scorer is not None and inputs_of is not None:
            if output is not None:  # the part of the output the target reads, as the explanation selected it
                raw = output(raw) if callable(output) else cast("dict[Union[int, str], object]", raw)[output]
            out[start:stop] = take(scorer.score(raw, inputs_of(start, stop)).float().to(dev), start, stop)
        else:
            sc = select_output(raw, output, stop - start).float()
            out[start:stop] = take((sc.softmax(1) if run.softmax else sc).to(dev), start, stop)
        if stop > done:  # rows run again after an out-of-memory error count once
            bar.update(stop - done)
            done = stop

    plan = ChunkPlan(model, signature, m_dev, run.batch_size)
    with eval_mode(model), progress_bar(n_rows, run.progress, run.desc) as bar:
        run_rows(model, build, consume, n_rows, plan, m_dev, m_dtype)
    return out


def score_masks(
    setup: Perturbed,
    per_input: int,
    masks_of: MasksOf,
    take: Take,
    width: int,
    run: Scoring,
) -> torch.Tensor:
    """Float32 (B, M, width): row s of input b hides what ``masks_of(b, s)`` does not keep (M = ``per_input``).

    Rows run input-major (row r is input r // M, row r % M of it); features beyond an input's
    own count are kept, as in ``Perturbation.rows``. ``run``: the metric's options, as ``score_rows`` takes them.
    """
    p = setup.perturbation
    dev = p.inputs.device
    batch = p.inputs.shape[0]
    valid = torch.arange(p.f_max, device=dev) < p.n_features.to(dev).unsqueeze(1)

    def coords(start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.arange(start, stop, device=dev)
        return r // per_input, r % per_input

    def build(start: int, stop: int) -> object:
        b, s = coords(start, stop)
        z = masks_of(b, s) | ~valid[b]
        if p.fixed:
            z = torch.nn.functional.pad(z, (0, 1), value=True)
        first, last = start // per_input, (stop - 1) // per_input
        return p.build(Chunk(z, b, s, first, last if first == last else -1))

    def take_rows(scores: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        return take(scores, *coords(start, stop))

    out = score_rows(
        setup.model,
        build,
        take_rows,
        batch * per_input,
        width,
        reference=p.inputs,
        signature=signature_of(p),
        run=run,
        chunk_dtype=p.fmt.dtype if p.fmt is not None else None,
        scorer=setup.scorer,
        inputs_of=lambda start, stop: coords(start, stop)[0],
    )
    return out.view(batch, per_input, width)
