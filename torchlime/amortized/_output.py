"""An amortized explanation: the head's output as an ordinary ``Explanation`` with its own run record."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Optional

import torch

from torchlime._util.checks import check_positive_int, describe
from torchlime.amortized import _build, _train
from torchlime.amortized._state import Trained
from torchlime.amortized.records import OUT_OF_DISTRIBUTION, AmortizedRecord, AmortizedRun
from torchlime.engine.config import Call
from torchlime.engine.explanation import Explanation
from torchlime.engine.modality import FeatureMap, Modality
from torchlime.typing import Model, TargetSpec

#: the label run record's fields an amortized explanation repeats (how its labels hid features)
LABEL_FIELDS = ("sampler", "kernel", "surrogate", "baseline", "perturbation", "normalize", "preset", "softmax")


def label_settings(first: Optional[Explanation]) -> dict[str, Any]:
    """The label settings as plain data: the labels' run record's ``LABEL_FIELDS`` (a folder's: the defaults)."""
    if first is None or first.run is None:
        return {"source": "results", "baseline": 0.0, "perturbation": "blend", "normalize": None, "softmax": False}
    plain = first.run.as_plain()
    return {name: plain.get(name) for name in LABEL_FIELDS}


@dataclass(eq=False, repr=False)  # the summary of ``Explanation.__repr__``
class AmortizedExplanation(Explanation):
    """An ``Explanation`` made by an amortized explainer: every field and method of one, but ``refit``."""

    def refit(self, **settings: object) -> Explanation:
        """Refused: an amortized explanation comes from one forward of a network, with no samples to refit.

        Args:
            **settings: ``Explanation.refit``'s keywords (``kernel``, ``surrogate``, ``n_samples``).

        Raises:
            ValueError: always, saying so (explain the inputs with the engine, ``return_samples=True``, to refit).
        """
        raise ValueError(
            "`refit` needs the samples of a LIME fit; this explanation came from one forward of an amortized "
            "explainer's head and has none: explain the inputs with the engine (return_samples=True) to refit"
        )


def _targets(amort: Trained, x: torch.Tensor, target: TargetSpec) -> tuple[torch.Tensor, int]:
    """Long (B, T) output columns, and the model rows spent choosing them."""
    b, k = x.shape[0], amort.labelled.shape[0]
    if target is None:
        if amort.model is None:
            raise ValueError("`target` must be given: this explainer was loaded without its model (load(..., model=))")
        return _build.scores(amort.model, x, amort.call.output).argmax(-1, keepdim=True), b
    if isinstance(target, int) and not isinstance(target, bool):
        cols = torch.full((b, 1), target, dtype=torch.long, device=x.device)
    elif isinstance(target, torch.Tensor) and not target.dtype.is_floating_point and target.dim() in (1, 2):
        cols = target.to(x.device).long().reshape(target.shape[0], -1)
        if cols.shape[0] != b:
            raise ValueError(f"`target` must have one row per input ({b}), got shape {tuple(target.shape)}")
    else:
        raise TypeError(f"`target` must be None, an int or a long (B,) or (B, T) tensor, got {describe(target)}")
    if bool(((cols < 0) | (cols >= k)).any()):
        raise ValueError(f"`target` must hold output columns in [0, {k}), got {torch.unique(cols).tolist()}")
    return cols, 0


def explain(amort: Trained, x: torch.Tensor, target: TargetSpec, fallback: bool, n_fallback: int) -> Explanation:
    """``AmortizedExplainer.explain``: one forward of the head, the targets gathered, the records built."""
    start = time.perf_counter()
    if not isinstance(x, torch.Tensor) or tuple(x.shape[1:]) != amort.input_shape or x.dim() < 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else describe(x)
        raise ValueError(f"`x` must be a (B, {', '.join(map(str, amort.input_shape))}) tensor, got {got}")
    if not isinstance(fallback, bool):
        raise TypeError(f"`fallback` must be True or False, got {describe(fallback)}")
    check_positive_int(n_fallback, "fallback_samples", minimum=2)
    cols, rows = _targets(amort, x, target)
    untrained = sorted(set(cols[~amort.labelled.to(cols.device)[cols]].tolist()))
    if untrained:
        raise ValueError(
            f"`target` must name output columns the head was trained on; {untrained} had no label in training "
            "(fit with target='all' or with these columns)"
        )
    with torch.inference_mode():
        out, hidden = _train.outputs(amort.head, x)
    out = out.float()
    picked = out.gather(1, cols.unsqueeze(-1).expand(-1, -1, out.shape[-1]))  # (B, T, F + 1)
    coef, intercept = picked[..., :-1].clone(), picked[..., -1].clone()
    score = torch.full_like(intercept, float("nan"))
    local_pred = intercept + coef.sum(-1)
    distance = amort.distances(hidden)
    flagged = (distance > amort.distances.threshold).nonzero().flatten().tolist()
    seconds_forward = time.perf_counter() - start
    used = [0] * x.shape[0]
    info = _info(amort, x)
    if fallback and flagged:
        idx = torch.tensor(flagged, device=x.device)
        exp = amort.explainer.explain(
            need_model(amort),
            x[idx],
            amort.modality,
            target=cols[idx],
            n_samples=n_fallback,
            generator=amort.settings["seed"],
        )
        if exp.coef.shape[-1] != coef.shape[-1] or not bool((exp.n_features == coef.shape[-1]).all()):
            raise ValueError(
                f"`modality` must give the fallback the head's {coef.shape[-1]} features, got "
                f"{exp.n_features.tolist()} at N={n_fallback} (a segment count chosen from N, such as "
                "n_segments='auto'): give the modality an explicit count"
            )
        coef, intercept = coef.index_copy(0, idx, exp.coef.float()), intercept.index_copy(0, idx, exp.intercept.float())
        score = score.index_copy(0, idx, exp.score.float())
        local_pred = local_pred.index_copy(0, idx, exp.local_pred.float())
        rows += 0 if exp.run is None else exp.run.model_rows
        for i in flagged:
            used[i] = n_fallback
    run = _record(amort, flagged, distance, fallback, rows, used, seconds_forward, time.perf_counter() - start)
    b = x.shape[0]
    f = int(amort.features.max()) + 1
    return AmortizedExplanation(
        coef,
        intercept,
        score,
        local_pred,
        cols,
        amort.features.to(x.device).expand(b, *amort.features.shape[1:]),
        torch.full((b,), f, dtype=torch.long, device=x.device),
        amort.input_shape,
        info=info,
        run=run,
        config=amort.explainer,
        call=dataclasses.replace(amort.call, target=cols, n_samples=0),
    )


def need_model(amort: Trained) -> Model:
    """The explainer's model, or a refusal naming what needs it."""
    if amort.model is None:
        raise ValueError("`model` must be given to AmortizedExplainer.load for the fallback and the report; got None")
    return amort.model


def _info(amort: Trained, x: torch.Tensor) -> Any:
    """The modality's record of ``x`` (what ``prepare`` builds, no model call), or None for a feature map."""
    if not isinstance(amort.modality, Modality) or isinstance(amort.modality, FeatureMap) or amort.model is None:
        return None
    call = Call(n_samples=amort.label_samples, generator=amort.settings.get("seed", 0))
    return amort.modality.prepare(amort.model, x, amort.explainer, call).info


def _record(
    amort: Trained,
    flagged: list[int],
    distance: torch.Tensor,
    fallback: bool,
    rows: int,
    used: list[int],
    seconds_forward: float,
    seconds_total: float,
) -> AmortizedRun:
    """The explanation's run record: the labels' settings, the quality flag, the amortized record."""
    labels = amort.settings.get("labels", {})
    quality: dict[str, object] = {OUT_OF_DISTRIBUTION: [[i] for i in flagged]}
    unreliable = None
    if flagged and not fallback:
        unreliable = f"{OUT_OF_DISTRIBUTION} (see torchlime.amortized)"
    record = AmortizedRecord(
        head=type(amort.head).__name__,
        head_digest=str(amort.settings.get("head_digest", "")),
        labels=dict(labels),
        label_samples=amort.label_samples,
        trained_inputs=int(amort.settings.get("trained_inputs", 0)),
        distance=[float(d) for d in distance.tolist()],
        threshold=amort.distances.threshold,
        fallback=flagged if fallback else [],
    )
    return AmortizedRun(
        n_samples=0,
        sampler="none (amortized)",
        kernel=str(labels.get("kernel")),
        surrogate=f"amortized {type(amort.head).__name__}",
        baseline=labels.get("baseline", 0.0),
        perturbation=str(labels.get("perturbation", "blend")),
        normalize=labels.get("normalize"),
        preset=labels.get("preset"),
        batch_size=None,
        softmax=bool(labels.get("softmax", False)),
        model_rows=rows,
        samples_used=used,
        peak_memory=None,
        quality=quality,
        unreliable=unreliable,
        seconds_forward=seconds_forward,
        seconds_total=seconds_total,
        amortized=record,
    )
