"""Quantus's metric objects on torchlime's batched metrics: ``PixelFlipping``, ``MaxSensitivity``, ``MPRT``.

``PixelFlipping(features_in_step=64, perturb_baseline="black")`` takes Quantus 0.6's constructor
arguments; ``metric(model=, x_batch=, y_batch=, a_batch=, device=, explain_func=)`` takes NumPy
arrays and returns what Quantus returns (a list per input, ``[aggregate]`` with ``return_aggregate``, a
dict per layer for ``MPRT``); quantus itself is not needed. The work is torchlime's: every step of every
input in one chunked pass (``metrics.deletion``), the perturbed explanations in calls of ``batch_size``
rows (``metrics.max_sensitivity``), the layers re-initialised on a copy (``metrics.randomisation_check``).
The numbers are Quantus's where both define a metric alike (tested with quantus as the oracle). They
differ: in ties (broken by the lower flat index; Quantus: NumPy's unstable ``argsort``); in
``PixelFlipping``'s "mean" and "uniform" fills (the input's own mean, one draw per input; Quantus: the
mean of the partly flipped input, one draw per step); in ``MaxSensitivity`` with ``normalise=True``
(each map by its own max |a|; Quantus: a batch by its max) or ``‖a(x)‖ = 0`` (counted as 1); in
``MPRT``'s ``return_average_correlation`` (over the randomised layers; Quantus 0.6.0 also averages in
its "original" entry). Channel-last inputs, custom ``perturb_func`` / norms / ``similarity_func`` of
``MaxSensitivity`` and ``return_nan_when_prediction_changes`` are refused by name.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Union, cast

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.metrics.curves import Curves, deletion
from torchlime.metrics.randomisation import randomisation_check, similarity_fn
from torchlime.metrics.sensitivity import max_sensitivity

__all__ = ["PixelFlipping", "MaxSensitivity", "ModelParameterRandomisation", "MPRT"]

Scores = Union[list[Any], dict[str, list[float]]]
Fn = Optional[Callable[..., Any]]
Kw = Optional[dict[str, Any]]
_NAMED = {"correlation_spearman": "spearman", "correlation_pearson": "pearson", "ssim": "ssim"}
_FILLS = ("black", "white", "mean", "uniform")


class _Call(NamedTuple):
    """One call's model, its prediction function, inputs, labels, attributions and explain function."""

    model: torch.nn.Module
    net: Callable[..., Any]
    x: torch.Tensor
    y: torch.Tensor
    a: Optional[np.ndarray]
    explain: Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
    softmax: Optional[bool]
    batch_size: int


class _Metric:
    """The call every metric shares (Quantus's ``Metric.__call__``)."""

    def __init__(
        self, abs: bool, normalise: bool, normalise_func: Fn, normalise_func_kwargs: Kw, return_aggregate: bool,
        aggregate_func: Fn, display_progressbar: bool, kwargs: dict[str, Any],
    ) -> None:  # fmt: skip
        if kwargs:  # Quantus raises on unknown keywords too
            raise TypeError(f"{type(self).__name__} got unexpected keyword arguments {sorted(kwargs)}")
        self.abs, self.normalise, self.return_aggregate = abs, normalise, return_aggregate
        self.normalise_func, self.normalise_func_kwargs = normalise_func, dict(normalise_func_kwargs or {})
        self.aggregate_func: Callable[..., Any] = aggregate_func if aggregate_func is not None else np.mean
        self.display_progressbar = display_progressbar
        self.evaluation_scores: Scores = []
        self.all_evaluation_scores: list[Any] = []

    def __call__(  # noqa: PLR0913
        self, model: torch.nn.Module, x_batch: np.ndarray, y_batch: np.ndarray, a_batch: Optional[np.ndarray] = None,
        s_batch: Optional[np.ndarray] = None, channel_first: Optional[bool] = None,
        explain_func: Fn = None, explain_func_kwargs: Kw = None, model_predict_kwargs: Kw = None,
        softmax: Optional[bool] = None, device: Optional[str] = None, batch_size: int = 64, **kwargs: Any,
    ) -> Scores:  # fmt: skip
        """Evaluate the attributions of ``x_batch`` (Quantus's call; NumPy in, lists of floats out).

        Args:
            model: the torch model (called on channel-first float32 tensors on ``device``).
            x_batch: (B, C, ...) channel-first inputs.
            y_batch: (B,) the explained classes.
            a_batch: (B, ...) attributions (broadcastable to ``x_batch``, or missing its channel dim);
                None: ``explain_func`` makes them.
            s_batch: unused (Quantus's segmentation masks).
            channel_first: None (inferred as Quantus infers it) or True; channel-last is refused.
            explain_func: ``explain_func(model=, inputs=, targets=, **explain_func_kwargs)`` -> attributions.
            explain_func_kwargs: keywords of ``explain_func`` (``device`` added when given, as Quantus does).
            model_predict_kwargs: keywords of the model's calls.
            softmax: score softmax probabilities (None: the metric's Quantus default).
            device: "cpu", "cuda", ... where the tensors go (None: the model's).
            batch_size: rows per model / ``explain_func`` call.
            kwargs: refused (Quantus raises on unknown keywords too).

        Returns:
            Quantus's structure: a list per input, ``[aggregate]``, or a dict per layer.
        """
        if kwargs:
            raise TypeError(f"{type(self).__name__}() call got unexpected keyword arguments {sorted(kwargs)}")
        x = np.asarray(x_batch)
        if x.ndim < 2 or _channel_last(x, channel_first):
            raise ValueError(f"`x_batch` must be channel-first (B, C, ...), got shape {x.shape}")
        params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
        dev = torch.device(device if device is not None else params[0].device if params else "cpu")
        xt = torch.as_tensor(x, dtype=torch.float32, device=dev)  # Quantus's torch wrapper calls in float32
        yt = torch.as_tensor(np.asarray(y_batch), device=dev).long().reshape(-1)
        if yt.shape[0] != xt.shape[0]:
            raise ValueError(f"`y_batch` must hold {xt.shape[0]} labels, got shape {np.shape(y_batch)}")
        if a_batch is None and explain_func is None:
            raise ValueError("`explain_func` must be given when `a_batch` is None: the attributions are made by it")
        fkw = {**({} if device is None else {"device": device}), **(explain_func_kwargs or {})}
        step = int(batch_size)

        def explain(m: torch.nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
            if explain_func is None:
                raise ValueError(f"`explain_func` must be given: {type(self).__name__} explains inputs again")
            parts = []
            for start in range(0, inputs.shape[0], step):  # explain_func calls of batch_size rows
                xs, ys = inputs[start : start + step], targets[start : start + step]
                made = explain_func(model=m, inputs=xs.cpu().numpy(), targets=ys.cpu().numpy(), **fkw)
                parts.append(self._prepare(_numpy(made), xs.shape))
            return torch.as_tensor(np.concatenate(parts), device=inputs.device)

        given = None if a_batch is None else self._prepare(_numpy(a_batch), x.shape)
        net = model if not model_predict_kwargs else (lambda t: model(t, **model_predict_kwargs))
        scores = self._evaluate(_Call(model, net, xt, yt, given, explain, softmax, step))
        if self.return_aggregate:
            scores = [self.aggregate_func(scores)]
        self.evaluation_scores = scores
        self.all_evaluation_scores.append(scores)
        return scores

    def _prepare(self, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Attributions expanded to the inputs' dims, normalised (over the whole array) and made absolute."""
        a = _expand(a, shape)
        if self.normalise:
            a = self._normalised(a)
        return np.abs(a) if self.abs else a

    def _normalised(self, a: np.ndarray) -> np.ndarray:
        if self.normalise_func is not None:
            return np.asarray(self.normalise_func(a, **self.normalise_func_kwargs))
        top = np.abs(a).max() if a.size else 0.0
        return a if top == 0 else a / top

    def _evaluate(self, c: _Call) -> Scores:
        raise NotImplementedError


class PixelFlipping(_Metric):
    """Quantus's ``PixelFlipping`` (Bach et al. 2015) on ``metrics.deletion``: per input, the curve of scores.

    Step j = 1..E / k hides the j·k elements of largest attribution (E per input, k = ``features_in_step``);
    the curve is the probability (``softmax=True``) of ``y_batch`` after each step, without the unperturbed point.

    Args:
        features_in_step: k, elements hidden per step (must divide the elements per input).
        abs: rank |a| instead of a.
        normalise: divide the attributions by their max |a| (order-preserving here).
        normalise_func: a NumPy normalisation instead of that.
        normalise_func_kwargs: its keywords.
        perturb_func: only None (baseline replacement) is taken.
        perturb_baseline: "black" (each input's min), "white" (max), "mean", "uniform" or a number.
        perturb_func_kwargs: ``uniform_low`` / ``uniform_high`` of "uniform" (default 0 and 1).
        return_aggregate: return ``[aggregate_func(scores)]``.
        aggregate_func: the aggregate (default ``np.mean``).
        return_auc_per_sample: one trapezoid area (unit spacing) per curve instead of the curve.
        default_plot_func: unused.
        disable_warnings: unused.
        display_progressbar: a tqdm bar over the rows scored.
        kwargs: refused.
    """

    def __init__(  # noqa: PLR0913
        self, features_in_step: int = 1, abs: bool = False, normalise: bool = True, normalise_func: Fn = None,
        normalise_func_kwargs: Kw = None, perturb_func: Fn = None, perturb_baseline: Union[str, float] = "black",
        perturb_func_kwargs: Kw = None, return_aggregate: bool = False, aggregate_func: Fn = None,
        return_auc_per_sample: bool = False, default_plot_func: Fn = None, disable_warnings: bool = False,
        display_progressbar: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(abs, normalise, normalise_func, normalise_func_kwargs, return_aggregate, aggregate_func,
                         display_progressbar, kwargs)  # fmt: skip
        _refuse(perturb_func, "perturb_func", "baseline replacement (perturb_baseline)")
        if isinstance(features_in_step, bool) or not isinstance(features_in_step, int) or features_in_step < 1:
            raise ValueError(f"`features_in_step` must be an int >= 1, got {describe(features_in_step)}")
        if isinstance(perturb_baseline, bool) or perturb_baseline not in _FILLS and isinstance(perturb_baseline, str):
            raise ValueError(f"`perturb_baseline` must be a number or one of {list(_FILLS)}, got {perturb_baseline!r}")
        self.features_in_step, self.perturb_baseline = features_in_step, perturb_baseline
        self.perturb_func_kwargs = dict(perturb_func_kwargs or {})
        self.return_auc_per_sample = return_auc_per_sample

    def _evaluate(self, c: _Call) -> Scores:
        x, size = c.x, c.x[0].numel()
        att = c.explain(c.model, x, c.y) if c.a is None else torch.as_tensor(c.a, device=x.device)
        att = torch.broadcast_to(att, x.shape)  # Quantus ranks every element, channels included
        if size % self.features_in_step:
            raise ValueError(f"`features_in_step` ({self.features_in_step}) must divide the {size} elements per input")
        curves = cast(Curves, deletion(
            c.net, x, att, target=c.y, baseline=self._fill(x), steps=size // self.features_in_step,
            batch_size=c.batch_size, softmax=True if c.softmax is None else c.softmax, return_curves=True,
            progress=self.display_progressbar,
        )).curves[:, 0, 1:]  # fmt: skip
        if self.return_auc_per_sample:
            return ((curves[:, 1:] + curves[:, :-1]).double().sum(1) / 2).tolist()
        return curves.tolist()

    def _fill(self, x: torch.Tensor) -> Union[float, torch.Tensor]:
        """Quantus's ``perturb_baseline`` as a torchlime fill: a number or a (B, 1, ...) tensor."""
        spec, dims = self.perturb_baseline, tuple(range(1, x.ndim))
        if not isinstance(spec, str):
            return float(spec)
        if spec == "uniform":
            kw = self.perturb_func_kwargs
            draw = np.random.uniform(kw.get("uniform_low", 0.0), kw.get("uniform_high", 1.0), size=x.shape[0])
            return torch.as_tensor(draw, dtype=x.dtype, device=x.device).view(-1, *([1] * (x.ndim - 1)))
        if spec == "mean":
            return x.mean(dims, keepdim=True)
        return x.amin(dims, keepdim=True) if spec == "black" else x.amax(dims, keepdim=True)


class MaxSensitivity(_Metric):
    """Quantus's ``MaxSensitivity`` (Yeh et al. 2019) on ``metrics.max_sensitivity``: one value per input.

    ``max_k ‖a(x + δ_k) - a(x)‖ / ‖a(x)‖`` (Frobenius norms) over ``nr_samples`` uniform perturbations δ_k;
    ``explain_func`` explains the perturbed inputs.

    Args:
        similarity_func: only None (Quantus's ``difference``) is taken.
        norm_numerator: None or Quantus's ``fro_norm`` / ``l2_norm``.
        norm_denominator: None or Quantus's ``fro_norm`` / ``l2_norm``.
        nr_samples: perturbations per input.
        abs: compare |a|.
        normalise: divide each attribution map by its max |a|.
        normalise_func: a NumPy normalisation instead of that.
        normalise_func_kwargs: its keywords.
        perturb_func: only None (uniform noise) is taken.
        lower_bound: δ ~ U(-lower_bound, lower_bound), or U(lower_bound, upper_bound).
        upper_bound: see ``lower_bound``.
        perturb_func_kwargs: unused.
        return_aggregate: return ``[aggregate_func(scores)]``.
        aggregate_func: the aggregate (default ``np.mean``).
        default_plot_func: unused.
        disable_warnings: unused.
        display_progressbar: a tqdm bar over the inputs explained.
        return_nan_when_prediction_changes: only False is taken.
        kwargs: refused.
    """

    def __init__(  # noqa: PLR0913
        self, similarity_func: Fn = None, norm_numerator: Fn = None, norm_denominator: Fn = None,
        nr_samples: int = 200, abs: bool = False, normalise: bool = False, normalise_func: Fn = None,
        normalise_func_kwargs: Kw = None, perturb_func: Fn = None, lower_bound: float = 0.2,
        upper_bound: Optional[float] = None, perturb_func_kwargs: Kw = None, return_aggregate: bool = False,
        aggregate_func: Fn = None, default_plot_func: Fn = None, disable_warnings: bool = False,
        display_progressbar: bool = False, return_nan_when_prediction_changes: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(abs, normalise, normalise_func, normalise_func_kwargs, return_aggregate, aggregate_func,
                         display_progressbar, kwargs)  # fmt: skip
        _refuse(perturb_func, "perturb_func", "uniform noise (lower_bound, upper_bound)")
        _refuse(similarity_func, "similarity_func", "the difference", ("difference",))
        for name, norm in (("norm_numerator", norm_numerator), ("norm_denominator", norm_denominator)):
            _refuse(norm, name, "the Frobenius norm", ("fro_norm", "l2_norm"))
        if return_nan_when_prediction_changes:
            raise ValueError("`return_nan_when_prediction_changes=True` is not supported here; use quantus for it")
        if upper_bound is not None and upper_bound <= lower_bound:
            raise ValueError(f"`upper_bound` must be > `lower_bound` ({lower_bound}), got {upper_bound}")
        self.nr_samples, self.lower_bound, self.upper_bound = int(nr_samples), float(lower_bound), upper_bound

    def _normalised(self, a: np.ndarray) -> np.ndarray:
        if self.normalise_func is not None:
            return np.asarray(self.normalise_func(a, **self.normalise_func_kwargs))
        top = np.abs(a.reshape(a.shape[0], -1)).max(1).reshape(-1, *([1] * (a.ndim - 1)))
        return a / np.where(top == 0, 1.0, top)  # each map by its own max

    def _evaluate(self, c: _Call) -> Scores:
        x, b, n, size, step = c.x, c.x.shape[0], self.nr_samples, c.x[0].numel(), c.batch_size
        lb, ub = self.lower_bound, self.upper_bound
        low, high = (-lb, lb) if ub is None else (lb, ub)
        noise = np.empty((b, n, size))
        for start in range(0, b, step):  # Quantus's draws: per batch of inputs, then per sample
            for k in range(n):
                noise[start : start + step, k] = np.random.uniform(low, high, size=(min(step, b - start), size))
        delta = torch.as_tensor(noise, device=x.device).view(b, n, *x.shape[1:])
        ref = None if c.a is None else torch.as_tensor(c.a, device=x.device)
        out = max_sensitivity(
            c.model, x, c.explain, attributions=ref, target=c.y, perturbations=delta, inputs_per_step=step,
            progress=self.display_progressbar,
        )  # fmt: skip
        return [float(v) for v in out.tolist()]


class MPRT(_Metric):
    """Quantus's ``MPRT`` / ``ModelParameterRandomisation`` (Adebayo et al. 2018) on ``metrics.randomisation_check``.

    Returns ``{"original": [...], layer: [...], ...}``: per layer (in the order re-initialised) each input's
    similarity of attributions under the trained and the randomised model; ``"original"``: ``a_batch`` against
    a new explanation by the trained model.

    Args:
        similarity_func: None (Spearman), Quantus's ``correlation_spearman``, ``correlation_pearson`` or
            ``ssim`` (on the flattened maps, as Quantus), or a NumPy ``f(a, b, batched=True) -> (B,)``.
        layer_order: "top_down" (cascading from the output), "bottom_up" or "independent".
        seed: layers are re-initialised after seeding ``seed + 1``.
        return_sample_correlation: deprecated name of ``return_average_correlation``.
        return_average_correlation: per input, the mean over the randomised layers.
        return_last_correlation: per input, the last layer's similarity.
        skip_layers: keep only the last layer (and ``"original"``).
        abs: compare |a| (default True).
        normalise: divide each batch of attributions by its max |a| (default True).
        normalise_func: a NumPy normalisation instead of that.
        normalise_func_kwargs: its keywords.
        return_aggregate: ``[aggregate_func(scores)]`` (with an average or last correlation).
        aggregate_func: the aggregate (default ``np.mean``).
        default_plot_func: unused.
        disable_warnings: unused.
        display_progressbar: unused.
        kwargs: refused.
    """

    def __init__(  # noqa: PLR0913
        self, similarity_func: Fn = None, layer_order: str = "top_down", seed: int = 42,
        return_sample_correlation: Optional[bool] = None, return_average_correlation: bool = False,
        return_last_correlation: bool = False, skip_layers: bool = False, abs: bool = True, normalise: bool = True,
        normalise_func: Fn = None, normalise_func_kwargs: Kw = None, return_aggregate: bool = False,
        aggregate_func: Fn = None, default_plot_func: Fn = None, disable_warnings: bool = False,
        display_progressbar: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(abs, normalise, normalise_func, normalise_func_kwargs, return_aggregate, aggregate_func,
                         display_progressbar, kwargs)  # fmt: skip
        if similarity_func is not None and not callable(similarity_func):
            raise TypeError(f"`similarity_func` must be None or a callable, got {describe(similarity_func)}")
        average = return_average_correlation if return_sample_correlation is None else return_sample_correlation
        if layer_order not in ("top_down", "bottom_up", "independent"):
            raise ValueError(f"`layer_order` must be 'top_down', 'bottom_up' or 'independent', got {layer_order!r}")
        if average and (return_last_correlation or skip_layers):
            raise ValueError("`return_average_correlation` needs every layer: not with last correlation / skip_layers")
        if return_aggregate and not (average or return_last_correlation):
            raise ValueError("`return_aggregate` needs `return_average_correlation` or `return_last_correlation`")
        self.similarity_func, self.layer_order, self.seed = similarity_func, layer_order, seed
        self.return_average_correlation, self.return_last_correlation = average, return_last_correlation
        self.skip_layers = skip_layers

    def _evaluate(self, c: _Call) -> Scores:
        sim, x, y, explain = self._similarity(), c.x, c.y, c.explain
        given = explain(c.model, x, y) if c.a is None else torch.as_tensor(c.a, device=x.device)
        flat = given.reshape(x.shape[0], -1)  # Quantus compares the flattened maps
        again = similarity_fn(sim)[0](flat, explain(c.model, x, y).reshape(flat.shape))
        scores: dict[str, list[float]] = {"original": again.tolist()}
        result = randomisation_check(
            c.model, x, lambda m, v: explain(m, v, y).reshape(flat.shape), attributions=flat, similarity=sim,
            layers="independent" if self.layer_order == "independent" else "cascading",
            from_output=self.layer_order == "top_down", seed=self.seed,
        )  # fmt: skip
        rows = result.similarity.tolist()
        kept = list(zip(result.layers, rows))[-1:] if self.skip_layers else zip(result.layers, rows)
        scores.update({name: row for name, row in kept})
        if self.return_average_correlation:
            return result.similarity.mean(0).tolist()
        if self.return_last_correlation:
            return cast("list[float]", rows[-1])
        return scores

    def _similarity(self) -> Union[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
        f, name = self.similarity_func, getattr(self.similarity_func, "__name__", "correlation_spearman")
        if name in _NAMED or f is None:
            return _NAMED[name]
        return lambda a, r: torch.as_tensor(np.asarray(f(a.cpu().numpy(), r.cpu().numpy(), batched=True), dtype=float))


ModelParameterRandomisation = MPRT


def _refuse(value: object, name: str, what: str, names: tuple[str, ...] = ()) -> None:
    """Raise unless ``value`` is None or a Quantus function named in ``names``."""
    if value is not None and getattr(value, "__name__", None) not in names:
        raise ValueError(f"`{name}` must be None ({what}) here, got {describe(value)}; use quantus for others")


def _numpy(value: object) -> np.ndarray:
    """A NumPy array of an array (or anything ``np.asarray`` takes) or a tensor."""
    return np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)


def _expand(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Attributions with the inputs' number of dims: a missing channel dim (first or last) inserted."""
    if a.ndim == len(shape) - 1 and a.shape[0] == shape[0]:
        if tuple(a.shape[1:]) == tuple(shape[2:]):
            a = a[:, None]
        elif tuple(a.shape[1:]) == tuple(shape[1:-1]):
            a = a[..., None]
    if a.ndim != len(shape) or a.shape[0] != shape[0] or any(s not in (1, t) for s, t in zip(a.shape[1:], shape[1:])):
        raise ValueError(
            f"`a_batch` must be broadcastable to `x_batch` {shape} (its channel dim may be missing), got {a.shape}"
        )
    return a


def _channel_last(x: np.ndarray, given: Optional[bool]) -> bool:
    """``not given``, or for None Quantus's rule: channel-last when the last dim is the smallest (3-D, 4-D)."""
    if given is not None:
        return not given
    return (x.ndim == 3 and x.shape[-2] > x.shape[-1]) or (x.ndim == 4 and x.shape[-1] < min(x.shape[1:3]))
