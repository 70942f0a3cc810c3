"""Plain attributions (captum's, shap's, a Grad-CAM map) as the record the metrics read.

The metrics read an ``Explanation``: coefficients (B, T, F), a feature map, the targets and the
perturbation that hides features. ``from_attributions(model, inputs, attributions, features)``
makes one from a plain tensor, with one target per input, so every metric scores any attribution
method exactly as it scores LIME's (the metrics also take the tensor directly, with ``features=``
and ``target=``):

* **per element** (``features=None``): ``attributions`` shaped like ``inputs`` (B, *shape), or
  broadcastable to them ((B, 1, H, W) for (B, C, H, W) images, captum's and Grad-CAM's map summed
  over channels; (B, C, 1, 1); (1, ...), one map for every input; (B, H, W) is read as (B, 1, H, W)).
  Each element of the attribution is its own feature: the feature map is ``arange`` over the
  attribution's own shape, broadcast over the inputs like any feature map, so a (B, 1, H, W) map
  hides whole pixels (every channel together, as Quantus does) and a (B, C, H, W) one hides single
  values: a map and its ``expand`` to the inputs' shape are different features. F is then the
  number of elements (3072 for 3x32x32): the curves' ``steps=S`` hide round(j F / S) elements at
  step j, i.e. groups of F / S elements in rank order (Quantus's ``features_in_step = F / S``),
  which keeps B (S + 1) model rows for any F;
* **per feature**: ``attributions`` (B, F) (or (1, F), the same for every input) with an integer
  ``features`` map (B or 1, ...) broadcastable to ``inputs``: element e belongs to feature
  ``features[e]`` (ids 0..F-1; negative ids: no feature, never hidden), whose attribution is
  ``attributions[b, features[e]]``. Ids absent from an input's map are features it does not have.

A tensor that fits neither form is refused with a ``ValueError`` naming the argument, the shapes it
may have and the shape it has.

Features are hidden as a blend ``where(kept, inputs, baseline)`` (default fill 0), the model called
on the rows directly. ``target`` is the explained output column: an int, a long (B,) tensor, or
None for each input's top class (one forward pass). Rankings break ties by the lower feature index
(the flattened, row-major element order for per-element attributions).
"""

from __future__ import annotations

from typing import Optional, Union

import torch

from torchlime._util.checks import check_tensor, describe
from torchlime.engine.config import Config
from torchlime.engine.explanation import Explanation
from torchlime.metrics._replay import _rebuild
from torchlime.stages.features import relabel
from torchlime.stages.forward.model import Model, OutputSelector, eval_mode, select_output
from torchlime.stages.perturb.fills import BaselineSpec

AttributionTarget = Union[None, int, torch.Tensor]


class AttributionError(TypeError, ValueError):
    """A tensor given for an explanation that is not a plain attribution of the inputs either.

    Both a ``TypeError`` (it is not an ``Explanation``) and a ``ValueError`` (its shape does not fit).
    """


def from_attributions(
    model: Model,
    inputs: torch.Tensor,
    attributions: torch.Tensor,
    features: Optional[torch.Tensor] = None,
    *,
    target: AttributionTarget = None,
    baseline: BaselineSpec = 0.0,
    output: OutputSelector = None,
) -> Explanation:
    """The ``Explanation`` of a plain attribution tensor, which every metric scores (module docstring).

    Args:
        model: the model the attributions explain (called once when ``target`` is None; its input
            format, e.g. channels-last for a CNN on the CPU, is recorded for the metrics' rows).
        inputs: (B, ...) the explained inputs.
        attributions: per element (B, *shape) or broadcastable to ``inputs`` (e.g. (B, 1, H, W), or
            (1, *shape) for every input), or per feature (B or 1, F) with ``features``.
        features: (B or 1, ...) integer feature map broadcastable to ``inputs`` (ids 0..F-1, negative:
            no feature) for per-feature ``attributions``; None: per element.
        target: the explained output column: an int, a long (B,) tensor, or None (each input's top
            class under ``model``).
        baseline: the fill of hidden features (a number, a tensor broadcastable to ``inputs``, a
            callable or a fill name, as ``torchlime.explain``'s ``baseline``); the metrics'
            ``baseline=`` replaces it.
        output: selector of tuple / dict model outputs, for ``target=None`` (as in ``torchlime.explain``).

    Returns:
        An ``Explanation`` with ``coef`` (B, 1, F), ``target`` (B, 1), the feature map, ``n_features``
        and the perturbation record; ``score``, ``intercept`` and ``local_pred`` are NaN (there is no
        surrogate); ``config.baseline`` records the fill, which the metrics blend with.

    Raises:
        TypeError / ValueError: naming ``attributions``, ``features``, ``target`` or ``inputs``.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x = torch.rand(3, 8)
        >>> exp = from_attributions(model, x, x * model[1].weight[0].detach())  # gradient x input, class 0
        >>> exp.coef.shape, exp.n_features.tolist()
        (torch.Size([3, 1, 8]), [8, 8, 8])
    """
    return record(model, inputs, attributions, features, target, baseline, output, "attributions")


def plain(
    model: Model,
    inputs: object,
    explanation: object,
    features: Optional[torch.Tensor],
    target: AttributionTarget,
    baseline: Optional[BaselineSpec],
    output: OutputSelector = None,
) -> tuple[object, Optional[BaselineSpec]]:
    """A metric's ``(explanation, baseline)``: a tensor becomes its record (with the fill), else both unchanged.

    Raises:
        TypeError: ``features`` / ``target`` given with an ``Explanation`` (it carries its own).
    """
    if isinstance(explanation, torch.Tensor):
        fill = 0.0 if baseline is None else baseline
        return record(model, inputs, explanation, features, target, fill, output, "explanation"), None
    for name, value in (("features", features), ("target", target)):
        if value is not None:
            raise TypeError(
                f"`{name}` is for a plain attribution tensor: an Explanation carries its own feature map "
                f"and targets, got `{name}` {describe(value)} with {describe(explanation)}"
            )
    return explanation, baseline


def record(
    model: Model,
    inputs: object,
    attributions: object,
    features: Optional[torch.Tensor],
    target: AttributionTarget,
    baseline: BaselineSpec,
    output: OutputSelector,
    name: str,
) -> Explanation:
    """``from_attributions`` with ``name`` for the attributions in the messages (the blend is ``_rebuild``'s)."""
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    x = check_tensor(inputs, "inputs")
    if x.ndim < 2 or not x.is_floating_point():
        raise ValueError(f"`inputs` must be real floating and batched (B, ...), got {describe(x)}")
    a = check_tensor(attributions, name)
    b = x.shape[0]
    if a.is_complex() or not a.is_floating_point() or a.ndim < 2 or a.shape[0] not in (1, b):
        raise _shape_error(name, a, x, features)
    a = a.detach().to(x.device).expand(b, *a.shape[1:])  # (1, ...): one attribution for every input (a view)
    if features is None:
        if a.ndim == x.ndim - 1 and x.ndim >= 3 and a.shape[1:] == x.shape[2:]:
            a = a.unsqueeze(1)  # (B, H, W) of (B, C, H, W) inputs: one attribution per pixel
        if a.ndim != x.ndim or any(s not in (1, i) for s, i in zip(a.shape[1:], x.shape[1:])):
            raise _shape_error(name, a, x, features)
        fmap = torch.arange(a[0].numel(), device=x.device).view(1, *a.shape[1:])
        coef = a.reshape(b, -1)
        n_features = torch.full((b,), coef.shape[1], dtype=torch.long, device=x.device)
        bad = bool((~torch.isfinite(coef)).any())
    else:
        fmap, coef, n_features, bad = _per_feature(a, x, features, name)
    if bad:
        raise ValueError(f"`{name}` must be finite, got NaN or infinite values")
    tgt = _targets(model, x, target, output)
    nan = torch.full((b, 1), torch.nan, device=x.device)
    exp = Explanation(
        coef.unsqueeze(1),
        nan,
        nan.clone(),
        nan.clone(),
        tgt.view(b, 1),
        fmap,
        n_features,
        tuple(x.shape[1:]),
        config=Config(baseline=baseline),  # what the metrics rebuild a blend with (``_replay.recorded_fill``)
    )
    exp.perturbation = _rebuild(model, x, exp, baseline)
    return exp


def flat_record(value: object, name: str) -> Explanation:
    """An ``Explanation`` as it is, or an attribution tensor (B, ...) as one target of its flattened elements.

    Raises:
        TypeError: anything else, naming ``name``.
    """
    if isinstance(value, Explanation):
        return value
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.ndim < 2:
        raise TypeError(
            f"`{name}` must be a torchlime.Explanation, got {describe(value)}; or a real floating attribution "
            "tensor (B, ...)"
        )
    b = value.shape[0]
    coef = value.detach().reshape(b, 1, -1)
    nan = torch.full((b, 1), torch.nan, device=coef.device)
    return Explanation(
        coef,
        nan,
        nan,
        nan,
        torch.zeros(b, 1, dtype=torch.long, device=coef.device),
        torch.arange(coef.shape[-1], device=coef.device).view(1, *value.shape[1:]),
        torch.full((b,), coef.shape[-1], dtype=torch.long, device=coef.device),
        tuple(value.shape[1:]),
    )


def _per_feature(
    a: torch.Tensor, x: torch.Tensor, features: object, name: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
    """Feature map, coefficients (B, F'), counts and whether any attribution is not finite (one sync)."""
    feats = check_tensor(features, "features")
    b = x.shape[0]
    integer = not (feats.is_floating_point() or feats.is_complex() or feats.dtype == torch.bool)
    fits = feats.ndim == x.ndim and feats.shape[0] in (1, b)
    if not integer or not fits or any(s not in (1, i) for s, i in zip(feats.shape[1:], x.shape[1:])):
        raise ValueError(
            f"`features` must be an integer feature map (B or 1, ...) broadcastable to `inputs` "
            f"{tuple(x.shape)}, with one dim per input dim, got {describe(feats)}"
        )
    if a.ndim != 2:
        raise _shape_error(name, a, x, feats)
    feats = feats.to(x.device)
    ids = feats.expand(b, *feats.shape[1:]).reshape(b, -1).long()
    labels, n_features = relabel(ids)
    top, f_max, bad = torch.stack((ids.max(), n_features.max(), (~torch.isfinite(a)).any().long())).tolist()
    if top >= a.shape[1]:
        raise ValueError(
            f"`features` ids must index the columns of `{name}` ({b}, {a.shape[1]}): 0..{a.shape[1] - 1}, got id {top}"
        )
    kept = labels >= 0
    coef = torch.zeros(b, f_max + 1, dtype=a.dtype, device=x.device)
    coef.scatter_(1, torch.where(kept, labels, f_max), a.gather(1, ids.clamp_min(0)))  # each feature its column
    fmap = labels.view(b, *feats.shape[1:]) if feats.shape[0] == b else labels[:1].view(1, *feats.shape[1:])
    return fmap, coef[:, :f_max], n_features, bool(bad)


def _targets(model: Model, x: torch.Tensor, target: AttributionTarget, output: OutputSelector) -> torch.Tensor:
    """Long (B,) explained columns: the given int / (B,) tensor, or each input's top class."""
    b = x.shape[0]
    if target is None:
        with eval_mode(model), torch.inference_mode():
            return select_output(model(x), output, b).argmax(1).to(x.device).clone()
    if isinstance(target, int) and not isinstance(target, bool) and target >= 0:
        return torch.full((b,), target, dtype=torch.long, device=x.device)
    if isinstance(target, torch.Tensor) and not (target.is_floating_point() or target.dtype == torch.bool):
        if target.numel() == b and target.ndim <= 2:
            return target.reshape(b).long().to(x.device)
    raise TypeError(
        f"`target` must be None (each input's top class), an int >= 0 or an integer tensor of {b} "
        f"columns (one per input), got {describe(target)}"
    )


def _shape_error(name: str, a: torch.Tensor, x: torch.Tensor, features: object) -> AttributionError:
    """The error for attributions that fit neither form."""
    shape = tuple(x.shape)
    pixel = f", e.g. {(shape[0], 1, *shape[2:])}" if len(shape) >= 3 else ""
    form = (
        f"per feature ({shape[0]} or 1, F) with `features`"
        if features is not None
        else f"per element, shaped like `inputs` {shape} or broadcastable to them{pixel} (each dim equal "
        f"or 1), or per feature ({shape[0]}, F) with an integer `features` map"
    )
    if name == "explanation":
        return AttributionError(
            f"`explanation` must be a torchlime.Explanation, got {describe(a)}, which is not a plain attribution "
            f"tensor of the inputs either: a real floating tensor {form}"
        )
    return AttributionError(f"`{name}` must be a real floating tensor {form}, got {describe(a)}")
