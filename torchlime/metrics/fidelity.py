"""Infidelity (Yeh et al. 2019), as ``captum.metrics.infidelity`` computes it.

The attribution of target t is the explanation's coefficients painted on the inputs
(``explanation.heatmap(t)``, every element carrying its feature's coefficient, 0 outside every
feature). For perturbations I_bk (k = 1..n) of input b the model sees x_b - I_bk, and

    a_btk = Σ_e heatmap_bt[e] I_bk[e]          d_btk = f_t(x_b) - f_t(x_b - I_bk)

    infidelity_bt = 1/n Σ_k (a_btk - d_btk)²                                   (normalize=False)

    β_bt = Σ_k a_btk d_btk / Σ_k a_btk²  (1 / Σ a² replaced by 1 when Σ a² = 0)
    infidelity_bt = 1/n Σ_k (β_bt a_btk - d_btk)²                             (normalize=True)

which is captum 0.7+'s ``infidelity(forward_func, perturb_func, inputs, attributions,
target=t, n_perturb_samples=n, normalize=...)`` with a ``perturb_func`` returning the
perturbations I and the perturbed inputs x - I (tested on the same perturbations). The
normalised form makes the value invariant to a rescaling of the coefficients (captum's
``normalize=True``, the paper's official implementation).

A LIME coefficient is the effect of hiding a whole feature, and the heatmap repeats it on every
element of the feature: a_btk weighs each feature by the perturbation summed over its elements,
exactly as captum treats any attribution map it is given. A plain attribution tensor (per element,
or (B, F) with ``features=``; ``metrics.attributions``) is painted the same way: per element, the
attribution map itself (broadcast over the inputs), which is captum's ``infidelity`` of that map.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import torch
from typing_extensions import Unpack

from torchlime._util.argdocs import with_args
from torchlime._util.checks import check_tensor, describe
from torchlime.metrics._common import check_bool, check_explanation, invalid_to_nan, target_columns
from torchlime.metrics._noise import GaussianNoise, Noise, perturbation_rows
from torchlime.metrics._options import AS_IN_DELETION, ScoreOptions, scoring
from torchlime.metrics._replay import score_rows
from torchlime.metrics.attributions import AttributionTarget, plain
from torchlime.stages.forward.model import Model
from torchlime.stages.perturb.blend import Chunk, perturb_rows
from torchlime.stages.sampling import make_key


@with_args(AS_IN_DELETION)
def infidelity(  # noqa: D417 (the other arguments: AS_IN_DELETION)
    model: Model,
    inputs: torch.Tensor,
    explanation: object,
    *,
    features: Optional[torch.Tensor] = None,
    target: AttributionTarget = None,
    perturbations: Union[Noise, torch.Tensor, None] = None,
    normalize: bool = False,
    **options: Unpack[ScoreOptions],
) -> torch.Tensor:
    """Infidelity of the painted coefficients under input perturbations (formula in the module docstring).

    Args:
        model: the model, called on real inputs (B, ...) as given; an explanation made with
            ``normalize=`` applies its normalisation first, as it did.
        inputs: real (B, *shape) the explained inputs (``shape`` = ``explanation.input_shape``;
            token ids and time-frequency waveform explanations, whose coefficients are not painted
            on the model's inputs, are refused).
        explanation: their ``Explanation``, or a plain attribution tensor (per element, shaped like
            ``inputs`` or broadcastable to them, or (B, F) with ``features``), as in ``metrics.deletion``.
        perturbations: the perturbations I: the law they are drawn from (``GaussianNoise(scale, n,
            generator)`` or ``UniformNoise``; None: ``GaussianNoise()``, σ = 0.1, 16 per input, seed 0), or
            explicit ones (B, n, *shape).
        normalize: captum's ``normalize`` (the optimal rescaling β).

    Returns:
        float32 (B, T).

    Raises:
        TypeError / ValueError: bad arguments (named), inputs that do not fit the explanation.

    Example:
        >>> import torchlime
        >>> _ = torch.manual_seed(0)
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> x, feats = torch.rand(2, 8), torch.arange(8).view(1, 8)
        >>> exp = torchlime.explain(model, x, feats, n_samples=500)
        >>> infidelity(model, x, exp, perturbations=GaussianNoise(n=8)).shape
        torch.Size([2, 1])
    """
    explanation, _ = plain(model, inputs, explanation, features, target, None, options.get("output"))
    exp = check_explanation(explanation)
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    check_tensor(inputs, "inputs")
    check_bool(normalize, "normalize")
    run = scoring(options, exp, "infidelity")
    b, n_targets, f = exp.coef.shape
    if not inputs.is_floating_point() or tuple(inputs.shape) != (b, *exp.input_shape):
        raise ValueError(
            f"`inputs` must be real floating ({b}, {', '.join(map(str, exp.input_shape))}): the inputs "
            f"the coefficients are painted on, got {describe(inputs)}"
        )
    p = exp.perturbation
    if p is not None and p.adapter is not None:
        raise ValueError(
            "`explanation` explains a wrapped model (token ids, time-frequency cells): infidelity "
            "perturbs the model's own real inputs, which its coefficients are not painted on"
        )
    dev, shape = inputs.device, tuple(inputs.shape[1:])
    width = inputs[0].numel()
    n, source = perturbation_rows(perturbations, inputs, GaussianNoise())
    draw: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # (row r, input b, perturbation k)
    if isinstance(source, torch.Tensor):
        flat = source.reshape(b * n, width)
        draw = lambda r, bb, kk: flat[(r - b).clamp_min(0)]
    else:
        law, key = source, make_key(source.generator, dev)
        draw = lambda r, bb, kk: law.draw(key, bb, kk, width).to(inputs.dtype)
    coef, target = exp.coef.to(dev), target_columns(exp).to(dev)
    labels = exp.features.to(dev).expand(b, *shape).reshape(b, width)
    labels = torch.where(labels < 0, f, labels)  # elements outside every feature paint 0
    index = torch.zeros((1,) * inputs.ndim, dtype=torch.long, device=dev)

    def rows(start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows start:stop (B unperturbed rows first, then input-major): their input and I (c, E)."""
        r = torch.arange(start, stop, device=dev)
        pert = r >= b
        bb = torch.where(pert, (r - b).clamp_min(0) // n, r)
        kk = (r - b).clamp_min(0) % n
        return bb, draw(r, bb, kk) * pert.unsqueeze(1)

    def build(start: int, stop: int) -> torch.Tensor:
        bb, i = rows(start, stop)
        x = inputs.reshape(b, width)[bb] - i
        x = x.view(-1, *shape)
        if p is None or (p.fmt is None and p.normalize is None):
            return x
        c = x.shape[0]
        ones = torch.ones(c, 1, dtype=torch.bool, device=dev)
        return perturb_rows(
            x, x, index, Chunk(ones, torch.arange(c, device=dev), bb, 0, -1), fmt=p.fmt, normalize=p.normalize
        )

    def take(scores: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        bb, i = rows(start, stop)
        painted = torch.zeros(i.shape[0], f + 1, dtype=torch.float64, device=dev)
        painted.scatter_add_(1, labels[bb], i.double())  # Σ_e over each feature's elements
        a = (coef[bb].double() * painted[:, None, :f]).sum(-1)
        return torch.cat((scores.gather(1, target[bb]), a.float()), 1)

    sig = ("infidelity", shape, str(inputs.dtype))
    out = score_rows(
        model,
        build,
        take,
        b * (n + 1),
        2 * n_targets,
        reference=inputs,
        signature=sig,
        run=run,
        chunk_dtype=p.fmt.dtype if p is not None and p.fmt is not None else None,
        scorer=exp.scorer,
        inputs_of=lambda start, stop: rows(start, stop)[0],
    ).double()
    base, rest = out[:b, :n_targets], out[b:].view(b, n, 2 * n_targets)
    d = base.unsqueeze(1) - rest[..., :n_targets]  # (B, n, T)
    a = rest[..., n_targets:]
    if normalize:
        aa, ad, dd = (a * a).sum(1), (a * d).sum(1), (d * d).sum(1)
        beta = ad / torch.where(aa == 0, torch.ones_like(aa), aa)
        return invalid_to_nan(((beta * beta * aa - 2 * beta * ad + dd) / n).float(), exp)
    return invalid_to_nan(((a - d) ** 2).sum(1).div(n).float(), exp)
