"""``explain_tabular``: lime's tabular explainer as training statistics and hooks, then the engine, once.

The front door fits (or takes) the training statistics, finds every input's level per column,
and passes the engine a feature map of one feature per column, ``TabularSampler`` (does a
column stay in the instance's level), ``TabularPerturbation`` (the values given the masks)
and lime's kernel; the engine samples, runs the model, weighs and fits, batched over the B
inputs and T targets on the inputs' device.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Optional, Sequence, Union

import torch

from torchlime._checks import check_choice, check_finite, check_positive_float, check_tensor, describe
from torchlime.engine.explainer import execute
from torchlime.engine.explanation import Explanation
from torchlime.engine.presets import UNSET, check_preset
from torchlime.engine.request import Request
from torchlime.stages.forward.model import Model
from torchlime.stages.weighting import ExponentialKernel
from torchlime.tabular._discretize import DISCRETIZERS
from torchlime.tabular._numpy import NumpyRows, as_rows, takes_numpy
from torchlime.tabular._proximity import ScaledEuclideanKernel, default_width
from torchlime.tabular._sample import TabularPerturbation, TabularSampler, keep_probability
from torchlime.tabular._stats import TabularStats, as_float64, fit_stats

_RESERVED = ("features", "perturb_fn", "baseline")
#: presets with tabular settings: the others would only swap the surrogate (the sampler, kernel
#: and values stay lime's tabular ones), so e.g. "kernel_shap" would not give Shapley values
_PRESETS = (None, "lime")


def _check_preset(preset: Any) -> None:
    check_preset(preset)
    if preset not in _PRESETS:
        raise ValueError(
            f"`preset` must be None or 'lime' for tabular data (explain_tabular draws lime's tabular "
            f"samples and kernel; other presets would only change the surrogate), got {preset!r}"
        )


def _check_x(x: Any) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"`X` must be a torch.Tensor or a numpy array of numbers (B, D), got {describe(x)}")
    if not x.is_floating_point():
        raise TypeError(
            f"`X` must be a floating tensor (float32 or float64), got dtype {x.dtype}; convert with X.float()"
        )
    if x.ndim != 2 or x.shape[0] == 0:
        hint = "; for one row, add the batch dimension: X.unsqueeze(0) (numpy: X.reshape(1, -1))" if x.ndim == 1 else ""
        raise ValueError(f"`X` must have shape (B, D) with B >= 1 rows to explain, got shape {tuple(x.shape)}{hint}")
    if x.shape[1] < 2:
        raise ValueError(f"`X` must have at least 2 columns (features) to explain, got shape {tuple(x.shape)}")
    check_finite(x, "X")


def _check_names(names: Any, d: int) -> Optional[list[str]]:
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"`feature_names` must be a sequence of {d} names, got {describe(names)}")
    names = [str(n) for n in names]
    if len(names) != d:
        raise ValueError(f"`feature_names` must hold {d} names (one per column of X), got {len(names)}")
    return names


def _seed(generator: Union[None, int, torch.Generator]) -> int:
    """The call's int seed: the engine's masks and the values both derive from it."""
    if generator is None:
        return 0
    if isinstance(generator, torch.Generator):
        return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(f"`generator` must be None, an int seed or a torch.Generator, got {describe(generator)}")
    return generator


def _warn_unseen(levels: torch.Tensor, stats: TabularStats, names: Optional[list[str]]) -> None:
    """One warning naming the categorical columns (and rows) of X whose value training never had."""
    unseen = (levels < 0) & stats.categorical  # (B, D)
    if not bool(unseen.any()):
        return
    cols = unseen.any(0).nonzero().flatten().tolist()
    rows = unseen.any(1).nonzero().flatten().tolist()
    named = f" ({[names[c] for c in cols]})" if names is not None else ""
    warnings.warn(
        f"`X` has values never seen in `training_data` in categorical column(s) {cols}{named} "
        f"(rows {rows}): lime never draws such a value, so every perturbed sample replaces it with a "
        f"training category and the feature is 1 only in sample 0",
        UserWarning,
        stacklevel=3,
    )


def _stats(training_data: Any, x: torch.Tensor, categorical: Any, discretizer: str, labels: Any) -> TabularStats:
    """Fitted statistics on X's device, checked against X."""
    d = x.shape[1]
    if isinstance(training_data, TabularStats):
        if categorical is not None or labels is not None or discretizer != training_data.discretizer:
            raise ValueError(
                f"`training_data` is a TabularStats ({training_data!r}): it carries its own "
                f"categorical features, discretizer and labels; pass discretizer="
                f"{training_data.discretizer!r} and no categorical_features / training_labels"
            )
        if training_data.n_columns != d:
            raise ValueError(f"`training_data` must describe {d} columns like `X`, got {training_data.n_columns}")
        return training_data.to(x.device)
    data = as_float64(training_data, "training_data", x.device)
    if data.ndim != 2 or data.shape[1] != d or data.shape[0] == 0:
        raise ValueError(
            f"`training_data` must have shape (N, {d}) (N >= 1 rows, the {d} columns of `X`), "
            f"got shape {tuple(data.shape)}"
        )
    return fit_stats(data, categorical, discretizer, labels)


def explain_tabular(
    model: Model,
    X: torch.Tensor,
    *,
    training_data: Any,
    categorical_features: Optional[Sequence[int]] = None,
    feature_names: Optional[Sequence[str]] = None,
    discretizer: str = "quartile",
    discretize_continuous: bool = True,
    sample_around_instance: bool = False,
    kernel_width: Optional[float] = None,
    training_labels: Any = None,
    perturbed: Optional[torch.Tensor] = None,
    preset: Optional[str] = None,
    generator: Union[None, int, torch.Generator] = None,
    kernel: Any = UNSET,
    sampler: Any = UNSET,
    **kwargs: Any,
) -> Explanation:
    """Explain B rows of tabular data with lime's tabular LIME, batched on X's device.

    Every column is one interpretable feature: ``z_f = 1`` when the sample's value stays in
    the instance's level (its quartile / decile / entropy bin, or its category). Samples are
    lime's: discretised (a level by training frequency, then a value inside the bin: a normal
    with the bin's mean and std truncated to its range) or, with ``discretize_continuous=False``,
    Gaussian (training mean or the instance, training std). Weights are
    ``exp(-d² / (2 width²))`` on the euclidean distance of the scaled rows, width ``0.75 √D``.

    Args:
        model: callable on (c, D) rows of X's dtype returning scores (c, K) (probabilities of a
            classifier, or a regressor's (c,) outputs). With a numpy ``X``, a model that is not
            an ``nn.Module`` (e.g. scikit-learn's ``predict_proba``, taken as it is) is called
            with numpy float32 rows, as lime calls ``classifier_fn``, and may return numpy
            scores; an ``nn.Module`` gets tensors.
        X: float (B, D) rows to explain: a tensor on any device, or a numpy array of numbers
            (taken as a float32 tensor on the CPU; the explanation is torch either way).
        training_data: (N, D) tensor or array, or a ``TabularStats`` (``fit_stats``) to reuse.
        categorical_features: column indices compared by equality, sampled by frequency (ints,
            numpy integers, a 1-D integer array or tensor).
        feature_names: D names, kept in ``meta["tabular"]`` for ``conditions``.
        discretizer: "quartile", "decile" or "entropy" (needs ``training_labels``).
        discretize_continuous: True: lime's discretised sampling; False: Gaussian sampling
            (the binary features are still "same bin as the instance").
        sample_around_instance: Gaussian sampling centred on the instance instead of the mean.
        kernel_width: width of the kernel (default ``0.75 √D``).
        training_labels: (N,) labels of the training rows, numbers or strings (entropy discretizer).
        perturbed: optional (B, S, D) sample rows (a tensor, or a numpy array like ``X``) to
            use instead of drawing them (sample 0 the input); masks are ``masks=`` if given,
            else "same level as the input".
        preset: None or "lime" (``LimeTabularExplainer``'s settings: N = 5000, Ridge(1), top
            class); other presets are refused (they have no tabular sampler, kernel and values).
        generator: int seed or ``torch.Generator`` (masks and values derive from it).
        kernel: replaces lime's kernel (a ``torchlime.explain`` kernel; not with ``kernel_width``).
        sampler: replaces the level sampler (a ``torchlime.explain`` sampler; values follow any masks).
        **kwargs: other ``torchlime.explain`` keywords (target, n_samples, surrogate, masks,
            batch_size, index, return_samples, ...).

    Returns:
        ``Explanation``: coef (B, T, D), one coefficient per column; ``meta["tabular"]`` holds
        the instances' levels and the bins, read by ``conditions``.

    Raises:
        TypeError / ValueError: bad X (not float, not (B, D), non-finite; before any model
            call), training data of the wrong shape or non-finite, categorical indices out of
            range, an unknown discretizer, a preset other than None / "lime", and everything
            ``torchlime.explain`` raises; each names the argument, what was expected and what came.

    Example:
        >>> t = torch.linspace(0, 1, 101)
        >>> train = torch.stack((t, t.flip(0), t ** 2, t.roll(50)), 1)  # (N, D) = (101, 4)
        >>> model = lambda x: torch.stack((4 * x[:, 0], -4 * x[:, 0]), 1).softmax(1)
        >>> exp = explain_tabular(model, train[[0, 100]], training_data=train, n_samples=500)
        >>> exp.coef.shape, exp.coef[:, 0].abs().argmax(1).tolist()  # the model reads column 0
        (torch.Size([2, 1, 4]), [0, 0])
    """
    bad = [k for k in kwargs if k in _RESERVED]
    if bad:
        raise TypeError(f"explain_tabular() does not take {bad}: one feature per column, values drawn as lime does")
    adapter = NumpyRows if takes_numpy(model, X) else None
    X = as_rows(X, "X")
    _check_x(X)
    _check_preset(preset)
    if not isinstance(training_data, TabularStats):  # fitted statistics carry their own discretizer's name
        check_choice(discretizer, "discretizer", DISCRETIZERS)
    for name, flag in (
        ("discretize_continuous", discretize_continuous),
        ("sample_around_instance", sample_around_instance),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"`{name}` must be True or False, got {describe(flag)}")
    if kernel_width is not None:
        check_positive_float(kernel_width, "kernel_width")
        if kernel is not UNSET:
            raise ValueError("pass `kernel_width` (lime's kernel) or `kernel`, not both")
    batch, d = X.shape
    names = _check_names(feature_names, d)
    stats = _stats(training_data, X, categorical_features, discretizer, training_labels)
    levels = stats.levels(X)
    _warn_unseen(levels, stats, names)
    centre = None
    if not discretize_continuous:
        centre = X.double() if sample_around_instance else stats.mean.unsqueeze(0)
    seed = _seed(generator)
    index = kwargs.get("index")
    ids = torch.arange(batch, device=X.device) if index is None else torch.as_tensor(index).to(X.device).long()
    if perturbed is not None:
        perturbed = as_rows(perturbed, "perturbed")
        kwargs = _given_rows(perturbed, X, stats, levels, kwargs)
    width = default_width(d) if kernel_width is None else float(kernel_width)
    own_kernel = kernel is UNSET
    if own_kernel:
        kernel = (
            ExponentialKernel(width=width, distance="euclidean")
            if centre is None
            else ScaledEuclideanKernel(width, stats.scale, stats.categorical)
        )
    if sampler is UNSET and kwargs.get("masks") is None:
        sampler = TabularSampler(keep_probability(stats, levels, centre))
    given = None if perturbed is None else perturbed.to(X.device)
    perturb = TabularPerturbation(stats, levels, centre, seed, ids, given)
    options = dict(
        kwargs, baseline=0.0, perturb_fn=perturb, kernel=kernel, sampler=sampler, generator=seed, preset=preset
    )
    exp = execute(
        Request(
            model,
            X,
            torch.arange(d, device=X.device).view(1, d),
            options,
            modality="tabular",
            input_name="X",
            adapter=adapter,
        )
    )
    meta = dict(exp.meta)
    cat_idx = stats.categorical.nonzero().flatten()
    meta["tabular"] = dict(
        sampling="discretized" if centre is None else ("gaussian_instance" if sample_around_instance else "gaussian"),
        discretizer=stats.discretizer,
        kernel_width=width if own_kernel else None,
        feature_names=names,
        levels=levels.tolist(),
        categorical=cat_idx.tolist(),
        instances=X[:, cat_idx].tolist(),  # the inputs' values of the categorical columns
        boundaries=[row[row.isfinite()].tolist() for row in stats.boundaries.cpu()],
        values=[row[~row.isnan()].tolist() for row in stats.values.cpu()],
    )
    return dataclasses.replace(exp, meta=meta)


def _given_rows(
    perturbed: Any, x: torch.Tensor, stats: TabularStats, levels: torch.Tensor, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Check explicit sample rows (B, S, D); add ``n_samples`` and the masks they imply."""
    check_tensor(perturbed, "perturbed")
    if perturbed.ndim != 3 or perturbed.shape[0] != x.shape[0] or perturbed.shape[2] != x.shape[1]:
        raise ValueError(
            f"`perturbed` must have shape ({x.shape[0]}, S, {x.shape[1]}) (S sample rows per row of "
            f"X), got shape {tuple(perturbed.shape)}"
        )
    check_finite(perturbed, "perturbed")
    out = dict(kwargs)
    out.setdefault("n_samples", perturbed.shape[1])
    if out.get("masks") is None:
        masks = stats.levels(perturbed.to(x.device)) == levels.unsqueeze(1)
        masks[:, 0] = True
        out["masks"] = masks
    return out
