"""Building blocks of ``veracity.py``: settings, the attack, batched explanations and flip tests."""

from __future__ import annotations

import time
from typing import Any, Optional

import torch
import torch.nn.functional as F

from torchlime.audio import explain_spectrogram
from torchlime.stages.features import cell_ids
from torchlime.stages.sampling import BernoulliSampler, valid_features
from torchlime.stages.surrogate import Ridge
from torchlime.stages.weighting import ExponentialKernel, mask_distance

N_SAMPLES = 8192
ATTACK = dict(eps=1.0, alpha=20.0, lr=0.04, steps=60)
LIME_DEFAULT = dict(
    sampler=BernoulliSampler(0.5),
    kernel=ExponentialKernel(width=0.25),
    surrogate=Ridge(1.0),
    content="zero",
    output="prob",
    n_samples=N_SAMPLES,
)
# chosen by `veracity.py --tune` on separate clips (results/veracity_tuning.json): hidden segments
# are blurred (not zeroed), a quarter of the segments hidden on average, a narrower kernel
TORCHLIME_BEST = dict(
    sampler=BernoulliSampler(0.75),
    kernel=ExponentialKernel(width=0.1),
    surrogate=Ridge(1.0),
    content="blur",
    output="prob",
    n_samples=N_SAMPLES,
)
SETTINGS = {"lime_default": LIME_DEFAULT, "torchlime_best": TORCHLIME_BEST}
#: the study's names of hidden content -> explain_spectrogram's fills ("mean": each clip's mean level)
FILLS = {"mean": "signal_mean"}


def segment_map(specs: torch.Tensor) -> torch.Tensor:
    """The study's 5 time x 4 frequency grid over (Fr, Tm): long (Fr, Tm), ids 0..19."""
    return cell_ids(specs.shape[-2:], (4, 5), device=specs.device)


def predict(model: torch.nn.Module, x: torch.Tensor, chunk: int = 256) -> torch.Tensor:
    """Argmax class of (n, Fr, Tm) spectrograms, chunked, under inference mode."""
    with torch.inference_mode():
        return (
            torch.cat([model(x[i : i + chunk]).argmax(1) for i in range(0, len(x), chunk)])
            if len(x)
            else torch.zeros(0, dtype=torch.long)
        )


def attack(
    model: torch.nn.Module,
    x: torch.Tensor,
    target: torch.Tensor,
    *,
    eps: float,
    alpha: float,
    lr: float,
    steps: int,
    region: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Iterative signed-gradient attack on spectrograms, batched over clips.

    Minimises ||delta||^2 + alpha * CE(f(x + delta), target) with steps of ``lr`` along the
    gradient's sign, delta in [-eps, eps], x + delta >= 0 and delta = 0 outside ``region``.

    Returns:
        ``(delta, success)``: (n, Fr, Tm) the final delta when it is adversarial, else the last
        adversarial one seen (0 if none); bool (n,) whether the attack succeeded.
    """
    allowed = torch.ones_like(x) if region is None else region.to(x.dtype)
    delta = torch.zeros_like(x, requires_grad=True)
    best = torch.zeros_like(x)
    found = torch.zeros(len(x), dtype=torch.bool)
    for _ in range(steps + 1):
        logits = model(x + delta)
        with torch.no_grad():
            hit = logits.argmax(1) == target
            best[hit] = delta[hit]
            found |= hit
        loss = delta.pow(2).flatten(1).sum(1) + alpha * F.cross_entropy(logits, target, reduction="none")
        (grad,) = torch.autograd.grad(loss.sum(), delta)
        with torch.no_grad():
            delta -= lr * grad.sign() * allowed
            delta.clamp_(-eps, eps)
            delta.copy_(torch.maximum(delta, -x))
    return best, found


def adversarials(
    model: torch.nn.Module, specs: torch.Tensor, labels: torch.Tensor, attack_kw: dict[str, Any], seed: int
) -> dict[str, Any]:
    """Global and localised adversarial examples of every clip (target: the other class).

    Localised attacks perturb k random grid segments only; every clip is attacked for k = 1, 3 and 5.

    Returns:
        dict with the grid ``seg`` (Fr, Tm); the successful global attacks ``x``, ``delta``,
        ``target``; the successful localised ones ``l_x``, ``l_delta``, ``l_target``, their
        ``region_ids`` (m, 20: the k perturbed segments first, -1 after) and ``ks`` (m,);
        and plain-data ``stats`` / ``local_stats``.
    """
    n = len(specs)
    seg = segment_map(specs)
    target = 1 - labels
    t0 = time.perf_counter()
    delta, ok = attack(model, specs, target, **attack_kw)
    xa, da = specs[ok], delta[ok]
    energy = lambda v: v.pow(2).flatten(1).sum(1)  # noqa: E731
    stats = dict(
        attack_kw,
        clips=n,
        success=int(ok.sum()),
        seconds=time.perf_counter() - t0,
        delta_l2_mean=float(da.flatten(1).norm(dim=1).mean()),
        delta_linf_mean=float(da.abs().flatten(1).amax(1).mean()),
        nonzero_fraction=float((da != 0).float().mean()),
        snr_db_mean=float((10 * torch.log10(energy(xa) / energy(da))).mean()),
    )
    gen = torch.Generator().manual_seed(seed)
    ks = torch.tensor([1, 3, 5]).repeat_interleave(n)  # every clip attacked once for each k
    chosen = torch.rand(3 * n, 20, generator=gen).argsort(1)
    region_ids = torch.where(torch.arange(20) < ks.view(-1, 1), chosen, -1)  # (3n, 20)
    region = (seg == region_ids.view(3 * n, 20, 1, 1)).any(1)  # (3n, Fr, Tm)
    t0 = time.perf_counter()
    specs3, target3 = specs.repeat(3, 1, 1), target.repeat(3)
    l_delta, l_ok = attack(model, specs3, target3, region=region, **attack_kw)
    local_stats = dict(
        success={k: int((l_ok & (ks == k)).sum()) for k in (1, 3, 5)},
        tried={k: int((ks == k).sum()) for k in (1, 3, 5)},
        seconds=time.perf_counter() - t0,
    )
    return dict(
        seg=seg,
        x=xa,
        delta=da,
        target=target[ok],
        l_x=specs3[l_ok],
        l_delta=l_delta[l_ok],
        l_target=target3[l_ok],
        region_ids=region_ids[l_ok],
        ks=ks[l_ok],
        stats=stats,
        local_stats=local_stats,
    )


def flip_curve(
    model: torch.nn.Module,
    x: torch.Tensor,
    delta: torch.Tensor,
    seg: torch.Tensor,
    ranking: Optional[torch.Tensor],
    target: torch.Tensor,
    keep: Optional[torch.Tensor] = None,
) -> dict[str, Any]:
    """Label flips when only some segments of delta are added to x.

    Args:
        x, delta: (n, Fr, Tm). seg: long (Fr, Tm) segment ids 0..19. target: (n,) adversarial class.
        ranking: long (n, 20) segments best first: adds the top k for k = 1..20.
        keep: instead of a ranking, bool (n, 20): add exactly these segments.

    Returns:
        ``{"rate": [flip rate for k = 1..20], "rate_by_target": {t: [...]}, "flipped": bool (n, 20)}``
        or, with ``keep``, ``{"k": flip rate, "flipped": bool (n,)}``.
    """
    n, n_seg = len(x), 20
    if keep is not None:
        mask = keep.gather(1, seg.flatten().expand(n, -1)).view_as(x)
        hit = predict(model, x + delta * mask) == target
        return dict(k=float(hit.float().mean()) if n else None, flipped=hit)
    rank_of = ranking.argsort(1)  # (n, 20): position of every segment in the ranking
    rank_map = rank_of.gather(1, seg.flatten().expand(n, -1)).view(n, 1, *x.shape[1:])
    ks = torch.arange(1, n_seg + 1).view(1, n_seg, 1, 1)
    inputs = x.unsqueeze(1) + delta.unsqueeze(1) * (rank_map < ks)  # (n, 20, Fr, Tm)
    pred = predict(model, inputs.flatten(0, 1)).view(n, n_seg)
    flipped = pred == target.view(-1, 1)
    by_target = {str(t): flipped[target == t].float().mean(0).tolist() for t in target.unique().tolist()}
    return dict(rate=flipped.float().mean(0).tolist() if n else [], rate_by_target=by_target, flipped=flipped)


def margin(out: torch.Tensor) -> torch.Tensor:
    """Output selector for two-class logits (c, 2): column t becomes the log-odds logit_t - logit_other."""
    return out - out.flip(1)


def explain_many(
    model: torch.nn.Module,
    x: torch.Tensor,
    target: torch.Tensor,
    cfg: dict[str, Any],
    seed: int,
    return_samples: bool = False,
) -> Any:
    """One batched LIME pass over the 20 grid segments of every clip in x (n, Fr, Tm), for ``target``.

    ``cfg["output"]``: "prob" explains the softmax probability of the target (lime), "margin" its
    log-odds. With ``return_samples`` the outputs are always the log-odds (see ``refit``).
    """
    kw = {k: cfg[k] for k in ("sampler", "kernel", "surrogate", "n_samples")}
    prob = cfg["output"] == "prob" and not return_samples
    fill = FILLS.get(cfg["content"], cfg["content"])
    return explain_spectrogram(
        model,
        x,
        baseline=fill,
        target=target,
        softmax=prob,
        output=None if prob else margin,
        generator=seed,
        return_samples=return_samples,
        **kw,
    )


def refit(exp: Any, kernel: Any, surrogate: Any, output: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Coefficients (B, 20) and weighted R^2 (B,) of another kernel / surrogate / output on the same samples."""
    valid = valid_features(exp.n_features, exp.coef.shape[-1])
    w = kernel.weigh(mask_distance(exp.samples, valid, kernel.distance))
    y = exp.outputs if output == "margin" else torch.sigmoid(exp.outputs)  # outputs: log-odds (B, S, 1)
    fit = surrogate.fit(exp.samples, y, w, valid)
    return fit.coef[:, 0], fit.score[:, 0]


def localised_recovery(
    coef: torch.Tensor, score: torch.Tensor, region_ids: torch.Tensor, ks: torch.Tensor
) -> dict[str, Any]:
    """How many of the k perturbed segments are among LIME's top k, per k in (1, 3, 5)."""
    out: dict[str, Any] = {}
    fractions = []
    for k in (1, 3, 5):
        sel = ks == k
        if not bool(sel.any()):
            continue
        top = coef[sel].argsort(1, descending=True)[:, :k]
        hit = (top.unsqueeze(2) == region_ids[sel][:, :k].unsqueeze(1)).any(2).sum(1)  # (m,)
        fractions.append(hit.float() / k)
        full = hit == k
        out[str(k)] = dict(
            n=int(sel.sum()),
            histogram=torch.bincount(hit, minlength=k + 1).tolist(),
            mean_recovered=float(hit.float().mean()),
            all_recovered=float(full.float().mean()),
            fidelity_correct=[round(float(v), 4) for v in score[sel][full]],
            fidelity_wrong=[round(float(v), 4) for v in score[sel][~full]],
        )
    out["mean_fraction"] = float(torch.cat(fractions).mean()) if fractions else None
    return out


def summarise(values: torch.Tensor) -> dict[str, Any]:
    """n, mean, quartiles and the raw values (rounded) of a 1-D tensor."""
    v = values.float()
    if not len(v):
        return dict(n=0)
    q = torch.quantile(v, torch.tensor([0.25, 0.5, 0.75])).tolist()
    return dict(n=len(v), mean=float(v.mean()), q25=q[0], median=q[1], q75=q[2], values=[round(float(a), 4) for a in v])
