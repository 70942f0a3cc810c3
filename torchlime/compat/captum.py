"""captum's ``Lime`` and ``KernelShap`` on torchlime's engine: switching is one import line.

``from torchlime.compat.captum import Lime, KernelShap`` takes captum's constructors and
``attribute(...)`` arguments and returns captum's shapes. The masks are drawn as captum draws them (from
torch's global CPU generator, in captum's order, fit draws included), so a call after
``torch.manual_seed(s)`` sees captum's samples; the forward passes run batched and chunked through
torchlime (torchlime's chunk rule, or at most ``perturbations_per_eval`` rows per call where it is given),
and the surrogate is torchlime's batched fit of captum's objective. With no more samples than features
(no ``feature_mask``: one feature per element) the fits run in sample space (``_captum_fit``), so no
(F, F) array is formed and 3x224x224 inputs are explained at captum's defaults. captum's ``SkLearnLasso`` /
``SkLearnRidge`` / ``SkLearnLinearRegression`` (and the SGD variants, solved exactly) and its
``get_exp_kernel_similarity_function`` kernels are taken; other surrogates, kernels and perturbation
functions are refused with the torchlime equivalent.

The arguments are checked before ``forward_func`` runs, and every error names captum's argument
(``inputs``, ``target``, ``n_samples``, ``perturbations_per_eval``, ``baselines``, ``feature_mask``). Where
captum asserts (``target=None`` for a model with several outputs per example), ``TargetError`` is both
a ``ValueError`` and captum's ``AssertionError``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch

from torchlime._util.checks import describe
from torchlime.compat._captum_args import (
    ERRORS,
    CaptumFill,
    CaptumTarget,
    TargetError,
    check_inputs,
    check_target,
    feature_masks,
    fills,
    probe,
    refused_dtype,
)
from torchlime.compat._captum_fit import feature_ids, fitters
from torchlime.compat._vocabulary import check_count, check_regressor_settings, speaking
from torchlime.engine.explainer import explain
from torchlime.engine.sizes import check_sizes
from torchlime.stages.surrogate import Lasso, Ridge, Surrogate
from torchlime.stages.weighting import ExponentialKernel, Kernel
from torchlime.typing import UNSET, Unset

__all__ = ["Lime", "KernelShap", "TargetError"]

TensorOrTuple = Union[torch.Tensor, tuple[torch.Tensor, ...]]
_INF_WEIGHT = 1e6  # captum's KernelShap weight of the all-on and all-off coalitions


def _surrogate(model: object) -> Surrogate:
    """Torchlime's surrogate for captum's ``interpretable_model`` (None: captum's ``SkLearnLasso(alpha=0.01)``)."""
    if model is None:
        return Lasso(alpha=0.01)
    name = type(model).__name__
    settings = getattr(model, "construct_kwargs", {})
    if name.startswith(("SkLearn", "SGD")):
        check_regressor_settings(settings, name, "interpretable_model")
    alpha = float(settings.get("alpha", 1.0))
    if name in ("SkLearnLasso", "SGDLasso"):
        return Lasso(alpha=alpha)
    if name in ("SkLearnRidge", "SGDRidge"):
        return Ridge(alpha=alpha)
    if name in ("SkLearnLinearRegression", "SGDLinearRegression"):
        return Ridge(alpha=0.0)
    if isinstance(model, Surrogate):
        return model
    raise TypeError(
        f"`interpretable_model` {name} has no batched equivalent here; pass captum's SkLearnLasso / SkLearnRidge / "
        f"SkLearnLinearRegression, or a torchlime surrogate (torchlime.Ridge, torchlime.Lasso), got {describe(model)}"
    )


def _kernel(similarity_func: Any) -> ExponentialKernel:
    """Torchlime's input-space kernel for captum's ``similarity_func`` (None: cosine, width 1).

    A torchlime ``ExponentialKernel`` is taken as it is; a function is read through its closure (captum's
    ``get_exp_kernel_similarity_function``); anything else is refused by name.
    """
    if similarity_func is None:
        return ExponentialKernel(width=1.0, distance="cosine", space="input")
    if isinstance(similarity_func, ExponentialKernel):
        return similarity_func
    closure = getattr(similarity_func, "__closure__", None) or ()
    cells = dict(zip(getattr(getattr(similarity_func, "__code__", None), "co_freevars", ()), closure))
    if set(cells) == {"distance_mode", "kernel_width"}:  # captum's get_exp_kernel_similarity_function
        mode, width = cells["distance_mode"].cell_contents, float(cells["kernel_width"].cell_contents)
        if mode not in ("cosine", "euclidean"):
            raise ValueError(f"`similarity_func` distance_mode must be 'cosine' or 'euclidean', got {mode!r}")
        return ExponentialKernel(width=width, distance=mode, space="input")
    raise TypeError(
        "`similarity_func` must be captum's get_exp_kernel_similarity_function(...) or a torchlime "
        f"ExponentialKernel(width=..., distance=..., space='input'), got {describe(similarity_func)}"
    )


class _Attribution:
    """What ``Lime`` and ``KernelShap`` share: input formats, masks, the engine call, output shapes."""

    name = "Lime"

    def __init__(self, forward_func: Callable[..., object]) -> None:
        if not callable(forward_func):
            raise TypeError(f"`forward_func` must be callable, got {describe(forward_func)}")
        self.forward_func = forward_func

    def has_convergence_delta(self) -> bool:
        """False: no convergence delta (as captum)."""
        return False

    def attribute_future(self) -> None:
        """Not implemented (as captum)."""
        raise NotImplementedError("attribute_future is not implemented for " + self.name)

    @classmethod
    def get_name(cls) -> str:
        """Captum's display name ("Lime", "Kernel Shap")."""
        return cls.name

    def _draw(self, n: int, m: int) -> torch.Tensor:
        raise NotImplementedError

    def _weights(self, z: torch.Tensor, engine_weights: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    kernel: Kernel
    surrogate: Surrogate
    keeps_first: bool  # does captum's first sample equal the unperturbed input (the engine's row 0)
    #: the engine's quality warnings in captum's words (None: the flag concerns the engine's own kernel only)
    advice: dict[str, Optional[str]] = {
        "saturated": "forward_func's outputs barely vary over the samples (a saturated probability? attribute "
        "the logits)",
        "poor_fit": "a linear surrogate explains under 10% of forward_func's output variation (weighted R² < 0.1)",
        "few_samples": "fewer effective samples than features: raise n_samples, or similarity_func's kernel_width",
    }

    def attribute(  # noqa: PLR0913
        self,
        inputs: TensorOrTuple,
        baselines: object = None,
        target: object = None,
        additional_forward_args: object = None,
        feature_mask: Optional[TensorOrTuple] = None,
        n_samples: int = 25,
        perturbations_per_eval: Union[int, Unset] = UNSET,
        return_input_shape: bool = True,
        show_progress: bool = False,
    ) -> TensorOrTuple:
        """Captum's ``attribute``: coefficients per feature, in the inputs' shape or as (bsz, M).

        Every argument is checked before ``forward_func`` runs. Floating inputs take the model's
        floating dtype (torchlime's rule: a float64 batch explains a float32 model, where captum fails
        in the model); integer and bool inputs reach ``forward_func`` as they are, as in captum (token
        ids for an embedding, bool masks), and a model that refuses them gets a ``TypeError`` naming
        ``inputs``. As captum, a batch (or any call with ``target=None``) first runs the unperturbed
        inputs once, to learn whether the model returns one value per example, per batch, or several
        (which needs a ``target``). Unlike captum, every example of a batch is explained in one batched
        call, without captum's "multiple inputs" warning, and ``perturbations_per_eval`` left out (captum's
        default is 1) means torchlime's chunk rule; the chunks never change the numbers.

        Args:
            inputs: (bsz, ...) tensor or tuple of tensors (the first dims equal, bsz >= 1), finite.
            baselines: None (0, False for bool), a number, a tensor or a tuple of them per input.
            target: the output column(s): None (only for one output per example), an int >= 0, a list of
                bsz ints or a (bsz,) integer tensor (one column per example).
            additional_forward_args: passed to ``forward_func`` after the inputs, unperturbed.
            feature_mask: None (one feature per element, numbered across the tuple) or integer masks
                broadcastable to each input, (1 or bsz, ...); an id shared by tensors is one feature;
                at least 2 features per example.
            n_samples: samples per example (>= 2).
            perturbations_per_eval: at most this many rows per model call (>= 1); left out: torchlime's
                chunk rule (``batch_size=None`` of ``torchlime.explain``). A model that returns one value
                per batch gets one row (one perturbed batch) per call either way.
            return_input_shape: coefficients painted on the inputs (float32, the inputs' shapes) or
                (bsz, M) (CPU float32).
            show_progress: a progress bar on stderr.

        Returns:
            A tensor or tuple like ``inputs`` (``return_input_shape``), else (bsz, M); (1, ...) / (1, M)
            for a model that returns one value per batch.

        Raises:
            TypeError: ``inputs`` that are not tensors (or refused by the model for their dtype), a
                ``target``, ``feature_mask`` or ``baselines`` of the wrong type, a count that is not an int.
            ValueError: an empty batch, NaN/inf inputs or baselines, fewer than 2 features, a count
                below its minimum, a negative ``target`` or one out of the model's range, a model
                returning the wrong shape or NaN/inf.
            TargetError: ``target=None`` for a model with several outputs per example (a ``ValueError``
                and, as captum raises, an ``AssertionError``).

        Example:
            >>> net = torch.nn.Linear(3, 2)
            >>> Lime(net).attribute(torch.ones(2, 3), target=[0, 1], n_samples=50).shape
            torch.Size([2, 3])
        """
        tensors, is_tuple = check_inputs(inputs)
        bsz = tensors[0].shape[0]
        n_samples = check_count(n_samples, "n_samples", 2, "a surrogate needs at least 2 samples")
        ppe: Optional[int] = None  # None: the engine's chunk rule
        if perturbations_per_eval is not UNSET:
            ppe = check_count(perturbations_per_eval, "perturbations_per_eval", 1, "rows per forward_func call")
        checked = check_target(target, bsz)
        masks, m = feature_masks(feature_mask, tensors)
        baseline = fills(baselines, tensors)
        extra = () if additional_forward_args is None else additional_forward_args
        extra = extra if isinstance(extra, tuple) else (extra,)
        whole = probe(self.forward_func, tensors, extra, checked) if bsz > 1 or checked is None else False
        if whole and ppe not in (None, 1):
            raise ValueError(
                f"`perturbations_per_eval` must be 1 (or left out) when forward_func returns one value per batch, "
                f"got {ppe}"
            )
        examples = 1 if whole else bsz  # the draws (E, S, M): float32 and two bool copies, refused before made
        space = fitters(self.surrogate, n_samples, m)[1].sample_space  # S <= F: no (F, F) arrays
        check_sizes(
            examples, n_samples, m, device=torch.device("cpu"), sample_bytes=6, sample_space=space, keep_samples=True
        )
        z = torch.stack([self._draw_and_fit_draws(n_samples, m) for _ in range(examples)])  # (E, S, M) captum's
        with speaking(ERRORS, self.advice, per_input=True), refused_dtype(tensors):
            coef = self._fit(tensors, masks, baseline, extra, checked, z, whole, ppe, show_progress)
        if not return_input_shape:
            return coef.float().cpu()
        painted = tuple(_paint(coef, mk, t, whole) for mk, t in zip(masks, tensors))
        return painted if is_tuple else painted[0]

    def _draw_and_fit_draws(self, n: int, m: int) -> torch.Tensor:
        z = self._draw(n, m)
        # captum's fit of each example draws from the global generator too (a DataLoader seed, a Linear(M, 1)):
        # drawing them keeps the next example's samples (and any later call) on captum's stream
        torch.empty((), dtype=torch.int64).random_()
        torch.nn.Linear(m, 1)
        return z

    def _fit(  # noqa: PLR0913
        self,
        tensors: tuple[torch.Tensor, ...],
        masks: tuple[torch.Tensor, ...],
        fills: tuple[CaptumFill, ...],
        extra: tuple[object, ...],
        target: CaptumTarget,
        z: torch.Tensor,
        whole: bool,
        ppe: Optional[int],
        show_progress: bool,
    ) -> torch.Tensor:
        examples, n, m = z.shape
        dev = tensors[0].device
        model: Callable[..., object] = self.forward_func
        if whole:  # the whole batch is one example: one row = one perturbed batch
            bsz = tensors[0].shape[0]
            forward, add, k = self.forward_func, extra, len(tensors)
            tensors = tuple(t.unsqueeze(0) for t in tensors)
            masks = tuple(mk.expand(bsz, *t.shape[2:]).unsqueeze(0) for mk, t in zip(masks, tensors))

            def model(*rows: torch.Tensor) -> torch.Tensor:
                out = forward(*(r[0] for r in rows[:k]), *add)
                return torch.as_tensor(out, dtype=torch.float32).reshape(1, 1)

            extra = ()
        ids = feature_ids(masks, examples, m, dev)  # (E, M) bool: which of captum's ids each example has
        cols = ids.long().cumsum(1) - 1  # captum id -> the engine's relabelled column
        counts = ids.sum(1)
        if int(counts.min()) < 2:
            few = (counts < 2).nonzero().flatten().tolist()
            raise ValueError(
                f"`feature_mask` must give every example at least 2 features to attribute, examples {few} have fewer"
            )
        f_max = int(counts.max())
        engine_fit, fitter = fitters(self.surrogate, n, f_max)  # sample space when n <= f_max (_captum_fit)
        first = torch.ones(examples, 1, m, dtype=torch.bool)
        rows = z.bool() if self.keeps_first else torch.cat((first, z.bool()), 1)
        engine_masks = torch.zeros(examples, rows.shape[1], f_max, dtype=torch.bool)
        e_idx, m_idx = ids.cpu().nonzero(as_tuple=True)
        engine_masks[e_idx, :, cols.cpu()[e_idx, m_idx]] = rows[e_idx, :, m_idx]
        from tqdm.auto import tqdm

        with tqdm(total=examples * n, desc=f"{self.name} attribution", disable=not show_progress) as bar:
            exp = explain(
                model,
                tensors,  # always the tuple path: it packs bool inputs and takes a fill per tensor
                masks,
                additional_forward_args=extra if extra else None,
                target=target,
                n_samples=rows.shape[1],
                baseline=fills,
                kernel=self.kernel,
                surrogate=engine_fit,
                masks=engine_masks.to(dev),
                batch_size=1 if whole else ppe,  # None: the engine's chunk rule
                return_samples=True,
            )
            bar.update(examples * n)
        assert exp.outputs is not None and exp.weights is not None  # return_samples=True
        lo = 0 if self.keeps_first else 1  # Lime: the engine's unperturbed row 0 is not one of captum's samples
        out, w = exp.outputs[:, lo:, 0], self._weights(z.to(dev), exp.weights[:, lo:])  # (E, S)
        valid = torch.ones(examples, m, dtype=torch.bool, device=dev)
        fit = fitter.fit(z.to(dev, torch.float32), out.unsqueeze(-1), w, valid)
        return fit.coef[:, 0, :]  # (E, M)


class Lime(_Attribution):
    """captum's ``Lime``: ``Lime(forward_func, interpretable_model=None, similarity_func=None, perturb_func=None)``.

    Args:
        forward_func: the model (any callable of the inputs and ``additional_forward_args``).
        interpretable_model: captum's SkLearnLasso / SkLearnRidge / SkLearnLinearRegression (or SGD
            variants), a torchlime surrogate, or None (captum's ``SkLearnLasso(alpha=0.01)``).
        similarity_func: captum's ``get_exp_kernel_similarity_function(mode, width)``, a torchlime
            input-space ``ExponentialKernel``, or None (cosine, width 1).
        perturb_func: None only (captum's Bernoulli(1/2) masks); torchlime's own samplers are the
            ``sampler=`` argument of ``torchlime.explain``.

    Attributes:
        interpretable_model: the ``interpretable_model`` given (None for the default), as captum keeps it;
            it is never fitted itself (the batched surrogate, ``surrogate``, is).
        similarity_func: the ``similarity_func`` given (None for the default; ``kernel`` is the kernel used).
        perturb_func: None.
    """

    name = "Lime"
    keeps_first = False

    def __init__(
        self,
        forward_func: Callable[..., object],
        interpretable_model: object = None,
        similarity_func: object = None,
        perturb_func: object = None,
    ) -> None:
        super().__init__(forward_func)
        if perturb_func is not None:
            raise TypeError(
                "`perturb_func` is not taken: the masks are captum's Bernoulli(1/2) draws; for other designs use "
                "torchlime.explain(..., sampler='stratified' | 'antithetic' | 'sobol' | a Sampler) or masks=..."
            )
        self.surrogate = _surrogate(interpretable_model)
        self.kernel = _kernel(similarity_func)
        self.interpretable_model, self.similarity_func, self.perturb_func = interpretable_model, similarity_func, None

    def _draw(self, n: int, m: int) -> torch.Tensor:
        return torch.bernoulli(torch.ones(n, m) * 0.5)  # captum's n draws of bernoulli(ones(1, M) * .5), at once

    def _weights(self, z: torch.Tensor, engine_weights: torch.Tensor) -> torch.Tensor:
        return engine_weights  # the input-space kernel, computed by the engine on every chunk


class KernelShap(_Attribution):
    """captum's ``KernelShap(forward_func)``: Shapley-kernel sampling, 1e6 weights on the end points, OLS.

    Args:
        forward_func: the model (any callable of the inputs and ``additional_forward_args``).
    """

    name = "Kernel Shap"
    keeps_first = True

    advice = dict(_Attribution.advice, poor_fit=None, few_samples=None)  # the engine's kernel is not KernelShap's

    def __init__(self, forward_func: Callable[..., object]) -> None:
        super().__init__(forward_func)
        self.surrogate = Ridge(alpha=0.0, dtype=torch.float64)
        self.kernel = ExponentialKernel(width=1.0, distance="hamming")  # unused: weights are set from the masks

    def _draw(self, n: int, m: int) -> torch.Tensor:
        if m < 2:
            raise ValueError(f"KernelShap needs at least 2 features, got {m}")
        k = torch.arange(m, dtype=torch.float64)
        probs = torch.tensor(m - 1) / (k * (m - k))
        probs[0] = 0.0
        sizes: Callable[[], torch.Tensor] = torch.distributions.Categorical(probs).sample  # untyped in torch
        rows = [torch.ones(1, m), torch.zeros(1, m)][:n]
        for _ in range(n - 2):  # captum's per-sample stream: a coalition size, then normals whose k largest win
            size = int(sizes())
            r = torch.randn(1, m)
            rows.append((r > torch.kthvalue(r, m - size).values.item()).float())
        return torch.cat(rows)

    def _weights(self, z: torch.Tensor, engine_weights: torch.Tensor) -> torch.Tensor:
        on = z.sum(-1)
        edge = (on == 0) | (on == z.shape[-1])
        return torch.where(edge, torch.full_like(on, _INF_WEIGHT), torch.ones_like(on)).double()


# ---------------------------------------------------------------------- captum's input formats
def _paint(coef: torch.Tensor, mask: torch.Tensor, tensor: torch.Tensor, whole: bool) -> torch.Tensor:
    """Coefficients (E, M) on one input's elements: float32, the input's shape ((1, ...) for whole batches)."""
    if whole:
        shape = (1, *tensor.shape[1:])
        return coef[0][mask.expand(tensor.shape)[:1]].reshape(shape).float() if tensor.numel() else torch.zeros(shape)
    if not tensor.numel():
        return torch.zeros(tensor.shape, dtype=torch.float32, device=tensor.device)
    full = mask.expand(tensor.shape).reshape(tensor.shape[0], -1)
    return coef.gather(1, full).reshape(tensor.shape).float()
