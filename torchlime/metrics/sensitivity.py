"""Max-sensitivity (Yeh et al. 2019), as ``captum.metrics.sensitivity_max`` computes it.

For perturbations δ_bk (k = 1..n) of input b, with e(x) the explanation of x:

    sensitivity_b = max_k ‖e(x_b + δ_bk) - e(x_b)‖ / ‖e(x_b)‖      (‖e(x_b)‖ = 0 counts as 1)

the norm taken over the flattened explanation (``norm_ord="fro"``: the 2-norm, captum's
default). The inputs are explained once, then the B·n perturbed inputs in input-major order (row i
is perturbation i % n of input i // n, captum's ``repeat_interleave``), all at once
(``inputs_per_step=None``, captum's ``max_examples_per_batch=None``) or ``inputs_per_step`` inputs at a
time; with ``progress=True`` a tqdm bar on stderr counts the inputs explained (the engine's
``forward.passes.progress_bar``).

How to explain, in one of two forms: torchlime's, an ``explainer=`` with the ``modality=`` and the
``call=`` (as ``Explainer.explain`` takes them), or any attribution method as Quantus calls its
``explain_func``: ``explain_fn(model, x)`` (``explain_fn(model, x, target_rows)`` with ``target=``: long
(c,), the target of the input each row perturbs), returning an ``Explanation`` or a plain tensor (c, ...).
Given ``attributions`` (B, ...) stand for e(x_b) (then the B inputs are not explained again).
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional, Union

import torch

from torchlime._util.checks import check_positive_float, check_positive_int, check_tensor, describe
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.metrics._common import check_bool
from torchlime.metrics._noise import Noise, UniformNoise, perturbation_rows
from torchlime.metrics.attributions import AttributionTarget
from torchlime.stages.forward.passes import progress_bar
from torchlime.stages.sampling import make_key
from torchlime.typing import Model

#: an attribution method as Quantus calls it: ``explain_fn(model, x)`` or ``explain_fn(model, x, target_rows)``
ExplainFn = Callable[..., object]


def max_sensitivity(  # noqa: PLR0913
    model: Model,
    inputs: torch.Tensor,
    explain_fn: Optional[ExplainFn] = None,
    *,
    explainer: Optional[Explainer] = None,
    modality: ModalitySpec = None,
    call: Optional[Call] = None,
    attributions: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    perturbations: Union[Noise, torch.Tensor, None] = None,
    norm_ord: Union[str, float] = "fro",
    inputs_per_step: Optional[int] = None,
    progress: bool = False,
) -> torch.Tensor:
    """Largest relative change of an explanation under small input perturbations (module docstring).

    Args:
        model: the model explained.
        inputs: real (B, ...) inputs.
        explain_fn: any attribution method, ``explain_fn(model, x (c, ...)) ->`` an ``Explanation`` (its
            coefficients are compared per target: fix the targets and the feature map, e.g.
            ``target="all"`` and an explicit ``features``) or a tensor (c, ...) of attributions (captum's,
            a Grad-CAM map), Quantus's form (``explain_fn(model, x, target_rows)`` with ``target``); None:
            torchlime's explainer explains ``model`` with ``modality`` and ``call``.
        explainer: how torchlime explains (``torchlime.Explainer``; None: the defaults), without
            ``explain_fn``.
        modality: the input kind or a feature map, as ``Explainer.explain`` takes it, without ``explain_fn``.
        call: the call's settings (``torchlime.Call``: targets, samples, seed; None: the defaults), without
            ``explain_fn``.
        attributions: (B, ...) e(x_b), the attributions of ``inputs`` already made (None: explain them).
        target: an int or long (B,) tensor: each input's target, passed to ``explain_fn(model, x,
            target_rows)`` as the rows' targets (long (c,)); None: ``explain_fn(model, x)``.
        perturbations: the perturbations δ: the law they are drawn from (``UniformNoise(radius, n,
            generator)`` or ``GaussianNoise``; None: ``UniformNoise()``, captum's radius 0.02 and 10 per
            input, seed 0), or explicit ones (B, n, ...).
        norm_ord: "fro" (2-norm) or a number p (the p-norm), as captum's ``norm_ord``.
        inputs_per_step: perturbed inputs explained per call (None: all B·n at once; captum's
            ``max_examples_per_batch``). torchlime's masks depend on an input's position in its batch
            (unless ``index=`` is given), so a LIME explanation gives the same values for the same
            ``inputs_per_step`` only.
        progress: show a tqdm bar on stderr over the B + B·n inputs explained (the engine's progress
            bar); the values are the same either way.

    Returns:
        float (B, T) for explanations, (B,) for tensors.

    Raises:
        TypeError / ValueError: bad arguments (named), an ``explain_fn`` whose results do not
            match (type, shape) from call to call.

    Example:
        >>> f = lambda m, x: 2 * x  # an "explanation" proportional to the input
        >>> x = torch.ones(2, 4)
        >>> max_sensitivity(torch.nn.Identity(), x, f, perturbations=torch.full((2, 3, 4), 0.5)).tolist()
        [0.5, 0.5]
    """
    check_tensor(inputs, "inputs")
    run = _caller(explain_fn, inputs, model, explainer, modality, call, target)
    if not inputs.is_floating_point() or inputs.ndim < 2:
        raise ValueError(f"`inputs` must be real floating and batched (B, ...), got {describe(inputs)}")
    if inputs_per_step is not None:
        check_positive_int(inputs_per_step, "inputs_per_step")
    check_bool(progress, "progress")
    if norm_ord != "fro":
        check_positive_float(norm_ord, "norm_ord")
    b, shape, dev = inputs.shape[0], tuple(inputs.shape[1:]), inputs.device
    width = inputs[0].numel()
    n, source = perturbation_rows(perturbations, inputs, UniformNoise())
    draw: Callable[[torch.Tensor], torch.Tensor]  # rows i (perturbation i % n of input i // n) -> their δ
    if isinstance(source, torch.Tensor):
        draw = lambda rows: source[rows]
    else:
        law, key = source, make_key(source.generator, dev)
        draw = lambda rows: law.draw(key, rows // n, rows % n, width)
    ord_ = 2.0 if norm_ord == "fro" else float(norm_ord)
    step = b * n if inputs_per_step is None else inputs_per_step
    parts = []
    with progress_bar(b * (n + (attributions is None)), progress, "max_sensitivity") as bar:
        if attributions is None:
            reference = _attribution(run(inputs, torch.arange(b, device=dev)), b, None)
            bar.update(b)
        else:
            reference = _attribution(check_tensor(attributions, "attributions").to(dev), b, None, "attributions")
        norm0 = torch.linalg.vector_norm(reference, ord=ord_, dim=-1)
        norm0 = torch.where(norm0 == 0, torch.ones_like(norm0), norm0)
        for start in range(0, b * n, step):  # explanation calls, each on many inputs
            rows = torch.arange(start, min(start + step, b * n), device=dev)
            bb = rows // n
            delta = draw(rows).to(inputs.dtype).view(-1, *shape)
            e = _attribution(run(inputs[bb] + delta, bb), rows.shape[0], reference)
            parts.append(torch.linalg.vector_norm(e - reference[bb], ord=ord_, dim=-1) / norm0[bb])
            bar.update(rows.shape[0])
    return torch.cat(parts).view(b, n, *norm0.shape[1:]).amax(1)


def _caller(
    explain_fn: object,
    inputs: torch.Tensor,
    model: Model,
    explainer: Optional[Explainer],
    modality: ModalitySpec,
    call: Optional[Call],
    target: AttributionTarget,
) -> Callable[[torch.Tensor, torch.Tensor], object]:
    """``run(x rows, input of each row)``: the explanation of the rows, in the form the arguments ask for."""
    if not callable(model) or isinstance(model, torch.Tensor):
        raise TypeError(f"`model` must be the model explained (an nn.Module or a callable), got {describe(model)}")
    torchlime_form = explainer is not None or modality is not None or call is not None
    if explain_fn is None:
        if not torchlime_form:
            raise TypeError(
                "max_sensitivity needs how to explain: an attribution method explain_fn(model, x), or torchlime's "
                "explainer= / modality= / call= (e.g. explainer=torchlime.Explainer() for the defaults)"
            )
        if target is not None:
            raise TypeError("`target` is passed to a Quantus-style `explain_fn(model, x, target)`: give `explain_fn`")
        own = _explainer_fn(model, explainer, modality, call)
        return lambda x, rows: own(x)
    if not callable(explain_fn):
        what = (
            ": max_sensitivity explains perturbed inputs again, so it needs the function that made the "
            "attributions; pass the attributions themselves as attributions="
            if isinstance(explain_fn, torch.Tensor)
            else ""
        )
        raise TypeError(
            "`explain_fn` must be a callable explain_fn(model, x) returning an Explanation or a tensor, got "
            f"{describe(explain_fn)}{what}"
        )
    fn: Callable[..., object] = explain_fn
    arity = 2 if target is None else 3
    if torchlime_form or not _takes(fn, arity):
        raise TypeError(
            "pass `explain_fn` or `explainer` / `modality` / `call`, not both (`explain_fn` is called as "
            f"explain_fn(model, x{', target_rows' if target is not None else ''}): it must take {arity} arguments)"
        )
    if target is None:
        return lambda x, rows: fn(model, x)
    tgt = _target_rows(target, inputs)
    return lambda x, rows: fn(model, x, tgt[rows])


def _takes(fn: Callable[..., object], n: int) -> bool:
    """Whether ``fn`` can be called with ``n`` positional arguments (True when it cannot be inspected)."""
    try:
        inspect.signature(fn).bind(*([None] * n))
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def _target_rows(target: object, inputs: torch.Tensor) -> torch.Tensor:
    """Long (B,) targets of the inputs from an int or an integer tensor of B entries."""
    b = inputs.shape[0]
    if isinstance(target, int) and not isinstance(target, bool):
        return torch.full((b,), target, dtype=torch.long, device=inputs.device)
    if isinstance(target, torch.Tensor) and not (target.is_floating_point() or target.dtype == torch.bool):
        if target.numel() == b:
            return target.reshape(b).long().to(inputs.device)
    raise TypeError(
        f"`target` must be an int or an integer tensor of {b} entries (one per input), got {describe(target)}"
    )


def _explainer_fn(
    model: Model, explainer: Optional[Explainer], modality: ModalitySpec, call: Optional[Call]
) -> Callable[[torch.Tensor], Explanation]:
    """The explanation of rows by an explainer, a modality and a call over ``model``."""
    if explainer is not None and not isinstance(explainer, Explainer):
        raise TypeError(f"`explainer` must be None or a torchlime.Explainer, got {describe(explainer)}")
    how, what = explainer or Explainer(), call or Call()
    return lambda x: how.run(model, x, modality, what)


def _attribution(
    result: object, rows: int, reference: Optional[torch.Tensor], name: str = "explain_fn"
) -> torch.Tensor:
    """(rows, T, F) coefficients of an Explanation or (rows, E) flattened attributions, checked."""
    if isinstance(result, Explanation):
        out = result.coef
    elif isinstance(result, torch.Tensor):
        out = result.reshape(result.shape[0], -1) if result.ndim else result
    else:
        raise TypeError(f"`{name}` must return an Explanation or a tensor, got {describe(result)}")
    if out.ndim < 2 or out.shape[0] != rows:
        what = f"`{name}` must return" if name == "explain_fn" else f"`{name}` must hold"
        raise ValueError(f"{what} one explanation per input ({rows} rows), got {describe(out)}")
    if reference is not None and out.shape[1:] != reference.shape[1:]:
        raise ValueError(
            f"`explain_fn` must return explanations of one shape {tuple(reference.shape[1:])} for "
            f"every input (fix the targets and the feature map), got {tuple(out.shape[1:])}"
        )
    return out
