"""Settings search of ``veracity.py``.

``tune`` explains the global and localised adversarial examples of separate
clips once per (sampler, content) pair with ``return_samples=True`` and refits
every (kernel, explained output) combination on the same samples, so each
candidate costs one batched pass. The objective is the mean of the global
flip rate over k = 1..10 and the localised recovery fraction.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from torchlime.stages.sampling import BernoulliSampler, ShapleySampler, UniformCountSampler
from torchlime.stages.surrogate import Ridge
from torchlime.stages.weighting import ExponentialKernel, UniformKernel

from benchmarks.veracity_lib import ATTACK, N_SAMPLES, adversarials, explain_many, flip_curve, localised_recovery, refit

CONTENTS = ("zero", "mean", "noise", "shuffle", "blur")  # "min" is within 0.004 of "zero" on log1p spectra
SAMPLERS = (BernoulliSampler(0.75), UniformCountSampler(), ShapleySampler())
KERNELS = (ExponentialKernel(width=0.25), ExponentialKernel(width=0.1), UniformKernel())
OUTPUTS = ("prob", "margin")


def tune(
    model: torch.nn.Module,
    specs: torch.Tensor,
    labels: torch.Tensor,
    seed: int = 0,
    n_samples: int = N_SAMPLES,
    log: Any = print,
) -> dict[str, Any]:
    """Two-stage search: every content with Bernoulli(1/2), then other samplers with the best content."""
    adv = adversarials(model, specs, labels, ATTACK, seed)
    n_g = len(adv["x"])
    x_all = torch.cat([adv["x"] + adv["delta"], adv["l_x"] + adv["l_delta"]])
    t_all = torch.cat([adv["target"], adv["l_target"]])
    log(f"tuning on {len(specs)} clips: {n_g} global and {len(adv['l_x'])} localised adversarial examples")
    records: list[dict[str, Any]] = []

    def evaluate(sampler: Any, content: str) -> None:
        t0 = time.perf_counter()
        cfg = dict(
            sampler=sampler,
            content=content,
            kernel=KERNELS[0],
            surrogate=Ridge(1.0),
            output="margin",
            n_samples=n_samples,
        )
        exp = explain_many(model, x_all, t_all, cfg, seed, return_samples=True)
        secs = time.perf_counter() - t0
        for kernel in KERNELS:
            for output in OUTPUTS:
                coef, score = refit(exp, kernel, Ridge(1.0), output)
                rate = flip_curve(
                    model, adv["x"], adv["delta"], adv["seg"], coef[:n_g].argsort(1, descending=True), adv["target"]
                )["rate"]
                rec = localised_recovery(coef[n_g:], score[n_g:], adv["region_ids"], adv["ks"])["mean_fraction"]
                objective = 0.5 * sum(rate[:10]) / 10 + 0.5 * (rec or 0.0)
                records.append(
                    dict(
                        sampler=repr(sampler),
                        content=content,
                        kernel=repr(kernel),
                        output=output,
                        flip_rate=rate,
                        flip_k3=rate[2],
                        recovery=rec,
                        objective=objective,
                        fidelity=float(score.mean()),
                        seconds_pass=secs,
                    )
                )
                log(
                    f"  {records[-1]['sampler']:<32} {content:<8} {records[-1]['kernel']:<60} {output:<6} "
                    f"k3 {rate[2]:.3f} rec {rec:.3f} obj {objective:.3f}"
                )

    for content in CONTENTS:
        evaluate(BernoulliSampler(0.5), content)
    best_content = max(records, key=lambda r: r["objective"])["content"]
    for sampler in SAMPLERS:
        evaluate(sampler, best_content)
    best = max(records, key=lambda r: r["objective"])
    lime = next(
        r
        for r in records
        if r["sampler"] == repr(BernoulliSampler(0.5))
        and r["content"] == "zero"
        and r["kernel"] == repr(KERNELS[0])
        and r["output"] == "prob"
    )
    return dict(
        n_clips=len(specs),
        n_global=n_g,
        n_localised=len(adv["l_x"]),
        attack=adv["stats"],
        objective="0.5 * mean flip rate over k=1..10 + 0.5 * localised recovery fraction",
        lime_default=lime,
        best=best,
        candidates=records,
    )
