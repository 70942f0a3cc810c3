"""Explanation quality of every method on every modality, at equal model-call budgets.

For each modality with a planted ground truth embedded in the package (images, spectrograms,
tokens, and a planted sparse linear model over image segments whose exact coefficients are
known), every method explains the true class of the same held-out inputs with the same
number of model rows per input (``--budget``, 512), three times (seeds 0, 1, 2), and is scored
with ``torchlime.metrics`` on its own recorded perturbation:

* deletion and insertion AUC (one feature per step, the explained logit),
* label flip when the top 3 features are hidden,
* gold recall at k = |gold| and at k = 3, ROC-AUC of the coefficients against the gold features,
* stability: the mean pairwise Jaccard index of the top 5 across the three seeds,
* weighted R² of the surrogate, and the share of explanations ``torchlime.engine.quality`` flags.

Methods (every one with the modality's fill): ``lime`` (lime's defaults: Bernoulli(1/2) masks,
or lime's uniform-count masks for text; exponential kernel on the cosine distance, width 0.25;
Ridge(1)), the efficient designs (``stratified``, ``antithetic``, ``sobol``), the surrogates
``lasso`` (Lasso(0.01)) and ``klasso`` (K-Lasso, k = 10), the ``uniform`` kernel, ``auto``
(``n_samples="auto"``: its mean samples used are reported instead of the budget) and
``kernel_shap`` (``preset="kernel_shap"``) when that preset exists. Per-input values are the
mean over the three seeds; the JSON holds the mean, standard deviation and quartiles over the
inputs. Results: ``results/quality.json``; report: ``benchmarks/QUALITY.md``
(``python benchmarks/quality_report.py``).

    python benchmarks/quality.py                      # the study (about 15 min on 2 CPU cores)
    python benchmarks/quality.py --quick --out /tmp/q # smoke run: 4 inputs, N = 64, 2 seeds
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import math
import os
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

import torchlime  # noqa: E402
from torchlime import metrics  # noqa: E402
from torchlime.engine.explanation import Explanation  # noqa: E402
from torchlime.engine.presets import PRESETS  # noqa: E402
from torchlime.engine.quality import UnreliableExplanationWarning  # noqa: E402
from torchlime.methods.adaptive import Adaptive  # noqa: E402

#: the adaptive rule its "auto" method ran (n_samples="auto" before its "lime" rule)
TOP_K = Adaptive(start=256, rule="top_k")
from torchlime.methods.baylime import BayesianRidge  # noqa: E402
from torchlime.methods.designs import AntitheticSampler, SobolSampler, StratifiedSampler  # noqa: E402
from torchlime.methods.smile import SmileKernel  # noqa: E402
from torchlime.stages.sampling import BernoulliSampler, Sampler  # noqa: E402
from torchlime.stages.surrogate import KLasso, Lasso, Ridge  # noqa: E402
from torchlime.stages.weighting import ExponentialKernel, UniformKernel  # noqa: E402

from benchmarks.common import common_args, header, load_average, size_defaults, write  # noqa: E402

HELD_OUT_SEED = 2026  # never used to train the embedded models (images 0/1, audio 1/2, text 0/1)
METHODS = (
    "lime",
    "stratified",
    "antithetic",
    "sobol",
    "lasso",
    "klasso",
    "bayes",
    "uniform",
    "smile",
    "auto",
    "kernel_shap",
)
MODALITIES = ("planted", "image", "audio", "text")
N_SEGMENTS = 40  # SLIC segments asked for (images and the planted model)
PLANTED_K = 4  # planted segments per image
IMAGE_GOLD_SHARE = 0.5  # a segment is gold when more than half of its pixels are evidence
AUDIO_GOLD_SHARE = 0.1  # a grid cell is gold when it holds at least 10 % of the evidence's bins
TOP_K_FLIP, TOP_K_STABLE, TOP_K_RECALL = 3, 5, 3
LASSO_ALPHA, KLASSO_K = 0.01, 10
TEXT_BATCH = 1024  # rows per text model call (the measured chunk is small on a busy CPU; no effect on results)
METRICS = (
    "deletion_auc",
    "insertion_auc",
    "label_flip_top3",
    "gold_recall_at_gold",
    "gold_recall_top3",
    "roc_auc",
    "jaccard_top5",
    "r2",
    "flagged",
    "coef_error",
    "samples_used",
)


# ----------------------------------------------------------------------------- tasks


@dataclass
class Task:
    """One modality: the model, the inputs, how to explain them, and their gold features."""

    name: str
    model: Callable[..., Any]
    inputs: torch.Tensor
    explain: Callable[..., Explanation]  # explain(**method keywords) -> Explanation
    gold: Callable[[Explanation], torch.Tensor]  # bool (B, F) in the explanation's feature ids
    lime_sampler: Sampler
    lime_kernel: Any
    info: dict[str, Any]
    truth: Optional[Callable[[Explanation], torch.Tensor]] = None  # exact coefficients (B, F), planted only
    extra: dict[str, Any] = field(default_factory=dict)


def feature_share(exp: Explanation, mask: torch.Tensor, of: str) -> torch.Tensor:
    """Float (B, F): for every feature of ``exp`` the share of its elements inside ``mask``
    (``of="feature"``) or the share of ``mask``'s elements that fall in it (``of="mask"``).
    ``mask`` is bool, broadcastable with the feature map ``exp.features``; elements of no
    feature (id < 0) are ignored.
    """
    labels = exp.features
    b, f = exp.coef.shape[0], exp.coef.shape[-1]
    shape = torch.broadcast_shapes(labels.shape, mask.shape)
    lab = labels.expand(shape).reshape(b, -1)
    hit = mask.expand(shape).reshape(b, -1).double()
    idx = torch.where(lab < 0, f, lab)
    inside = torch.zeros(b, f + 1, dtype=torch.float64).scatter_add_(1, idx, hit)[:, :f]
    if of == "mask":
        return (inside / (hit * (lab >= 0)).sum(1, keepdim=True).clamp_min(1)).float()
    count = torch.zeros(b, f + 1, dtype=torch.float64).scatter_add_(1, idx, torch.ones_like(hit))[:, :f]
    return (inside / count.clamp_min(1)).float()


def _select(ok: torch.Tensor, n: int, what: str) -> torch.Tensor:
    idx = ok.nonzero().flatten()
    if idx.numel() < n:
        raise SystemExit(f"{what}: only {idx.numel()} usable inputs in the pool, {n} asked for")
    return idx[:n]


def _relabel(segments: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Segments (B, H, W) relabelled 0..F_b-1 per image, and F_b (B,)."""
    out, counts = torch.empty_like(segments), []
    for b in range(segments.shape[0]):
        ids, inv = segments[b].unique(return_inverse=True)
        out[b], _ = inv, counts.append(ids.numel())
    return out, torch.tensor(counts)


def image_task(n: int, pool: int) -> Task:
    """The embedded DemoNet on held-out synthetic images, SLIC segments, gold = evidence segments."""
    from torchlime.demo.image_data import make_images
    from torchlime.demo.image_models import load_demo_model
    from torchlime.image import explain_image
    from torchlime.image.segments import slic

    images, labels, evidence = make_images(pool, seed=HELD_OUT_SEED)
    segments, n_feat = _relabel(slic(images, n_segments=N_SEGMENTS).reshape(pool, *images.shape[-2:]).long())
    model = load_demo_model()
    with torch.inference_mode():
        pred = model(images).argmax(1)
    share = torch.zeros(pool, int(n_feat.max()))
    for b in range(pool):
        cnt = torch.bincount(segments[b].flatten(), minlength=share.shape[1]).float()
        ev = torch.bincount(segments[b].flatten(), weights=evidence[b].flatten().float(), minlength=share.shape[1])
        share[b] = ev / cnt.clamp_min(1)
    n_gold = (share > IMAGE_GOLD_SHARE).sum(1)
    correct = pred == labels
    ok = correct & (n_gold >= 1) & (n_gold < n_feat)
    idx = _select(ok, n, "image")
    x, y, ev, seg = images[idx], labels[idx], evidence[idx], segments[idx]

    def explain(**kw: Any) -> Explanation:
        return explain_image(model, x, segments=seg, baseline="mean", target=y, softmax=False, **kw)

    def gold(exp: Explanation) -> torch.Tensor:
        return (feature_share(exp, ev.unsqueeze(1), "feature") > IMAGE_GOLD_SHARE) & exp.valid

    info = dict(
        model="torchlime.demo.image_models.load_demo_model() (DemoNet, 4 classes)",
        data=f"torchlime.demo.image_data.make_images({pool}, seed={HELD_OUT_SEED}), 64x64",
        feature_map=f"SLIC, torchlime.image.segments.slic(images, n_segments={N_SEGMENTS})",
        fill="mean (each segment's mean colour: lime's hide_color=None)",
        target="the true class, logits (softmax=False)",
        gold_rule=f"segments with more than {IMAGE_GOLD_SHARE:.0%} of their pixels in the evidence mask",
        pool=pool,
        pool_correct=int(correct.sum()),
        pool_without_gold=int((n_gold == 0).sum()),
        selection="the first n images of the pool that the model classifies correctly and that have "
        "at least one gold segment",
    )
    return Task("image", model, x, explain, gold, BernoulliSampler(0.5), ExponentialKernel(width=0.25), info)


class PlantedLinear(torch.nn.Module):
    """A sparse linear model over each image's own segments with known coefficients.

    Inputs carry a 4th channel holding the input's index (never perturbed: feature id -1), so one
    batched model holds a different weight map W_b (H, W) per input: ``f(x) = Σ W_b ⊙ Σ_c x_c``.
    W_b is ``w_bj / (|S_j| · m_bj)`` on the pixels of planted segment j (m_bj: its mean of Σ_c x),
    0 elsewhere, so with the zero fill hiding segment j lowers f by exactly w_bj: the model is
    exactly linear in the mask, with coefficients w_bj on the planted segments and 0 elsewhere.
    The second output is the constant f(x_b) / 2, so the label flips once f falls below half.
    """

    def __init__(self, weights: torch.Tensor, half: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weights", weights)
        self.register_buffer("threshold", half)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        code = x[:, 3, 0, 0].round().long()
        f = (x[:, :3].sum(1) * self.weights[code]).sum((1, 2))
        return torch.stack((f, self.threshold[code]), 1)


def planted_task(n: int, pool: int) -> Task:
    """PlantedLinear on the held-out images, their SLIC segments, gold = the planted segments."""
    from torchlime.demo.image_data import make_images
    from torchlime.image.segments import slic

    images, _, _ = make_images(pool, seed=HELD_OUT_SEED)
    images = images[:n]
    segments, n_feat = _relabel(slic(images, n_segments=N_SEGMENTS).reshape(n, *images.shape[-2:]).long())
    gen = torch.Generator().manual_seed(HELD_OUT_SEED)
    intensity = images.sum(1)  # (B, H, W)
    weights = torch.zeros_like(intensity)
    planted = torch.zeros_like(intensity, dtype=torch.bool)
    truth_w = []
    for b in range(n):
        chosen = torch.randperm(int(n_feat[b]), generator=gen)[:PLANTED_K]
        w = 1.0 + torch.rand(PLANTED_K, generator=gen)  # U[1, 2)
        truth_w.append(w)
        for j, wj in zip(chosen.tolist(), w.tolist()):
            pix = segments[b] == j
            mean = intensity[b][pix].mean().clamp_min(1e-3)
            weights[b][pix] = wj / (pix.sum() * mean)
            planted[b] |= pix
    code = torch.arange(n, dtype=images.dtype).view(n, 1, 1, 1).expand(n, 1, *images.shape[-2:])
    x = torch.cat((images, code), 1)
    f0 = (intensity * weights).sum((1, 2))
    model = PlantedLinear(weights, f0 / 2).eval()
    feats = torch.cat(
        (
            segments.unsqueeze(1).expand(n, 3, *segments.shape[-2:]),
            torch.full((n, 1, *segments.shape[-2:]), -1, dtype=torch.long),
        ),
        1,
    )
    contribution = torch.cat((images * weights.unsqueeze(1), torch.zeros_like(code)), 1)  # per element

    def explain(**kw: Any) -> Explanation:
        return torchlime.explain(model, x, feats, baseline=0.0, target=0, softmax=False, **kw)

    def gold(exp: Explanation) -> torch.Tensor:
        return (feature_share(exp, planted.unsqueeze(1), "feature") > 0.5) & exp.valid

    def truth(exp: Explanation) -> torch.Tensor:
        lab = exp.features.expand(x.shape).reshape(n, -1)
        f = exp.coef.shape[-1]
        out = torch.zeros(n, f + 1, dtype=torch.float64)
        out.scatter_add_(1, torch.where(lab < 0, f, lab), contribution.reshape(n, -1).double())
        return out[:, :f].float()

    info = dict(
        model="PlantedLinear (this script): exactly linear in the mask, 4 planted segments per image, "
        "coefficients U[1, 2), all others 0; second output f(x_b) / 2",
        data=f"the first {n} images of torchlime.demo.image_data.make_images({pool}, seed={HELD_OUT_SEED})",
        feature_map=f"SLIC, torchlime.image.segments.slic(images, n_segments={N_SEGMENTS})",
        fill="zero",
        target="output 0 (f), no softmax",
        gold_rule=f"the {PLANTED_K} planted segments (exact)",
        pool=n,
        selection="every image (no selection)",
    )
    return Task(
        "planted",
        model,
        x,
        explain,
        gold,
        BernoulliSampler(0.5),
        ExponentialKernel(width=0.25),
        info,
        truth=truth,
        extra=dict(planted_weights=[w.tolist() for w in truth_w]),
    )


def audio_task(n: int, pool: int) -> Task:
    """The embedded SpecNet on held-out voice clips, the 5 x 4 grid, gold = cells holding the evidence."""
    from torchlime.audio import explain_spectrogram
    from torchlime.demo import audio_data
    from torchlime.demo.audio_models import load_audio_model

    clips = audio_data.make_clips(pool, seed=HELD_OUT_SEED, positive_fraction=1.0)
    specs = audio_data.log_spectrogram(clips.waves)
    model = load_audio_model()
    with torch.inference_mode():
        pred = model(specs).argmax(1)
    from torchlime.audio.segments import spectrogram_segments

    grid = spectrogram_segments(specs).expand(pool, *specs.shape[-2:]).reshape(pool, -1)
    ev = clips.evidence.reshape(pool, -1).float()
    held = torch.zeros(pool, int(grid.max()) + 1).scatter_add_(1, grid, ev) / ev.sum(1, keepdim=True).clamp_min(1)
    n_gold = (held >= AUDIO_GOLD_SHARE).sum(1)
    correct = pred == clips.labels
    idx = _select(correct & (n_gold >= 1), n, "audio")
    x, evidence = specs[idx], clips.evidence[idx]

    def explain(**kw: Any) -> Explanation:
        return explain_spectrogram(
            model, x, baseline="zero", target=1, softmax=False, sample_rate=8000, n_fft=256, hop_length=128, **kw
        )

    def gold(exp: Explanation) -> torch.Tensor:
        return (feature_share(exp, evidence, "mask") >= AUDIO_GOLD_SHARE) & exp.valid

    info = dict(
        model="torchlime.demo.audio_models.load_audio_model() (SpecNet: no_voice / voice)",
        data=f"torchlime.demo.audio_data.make_clips({pool}, seed={HELD_OUT_SEED}, positive_fraction=1.0): "
        "voice clips, log1p |STFT| 129 x 63",
        feature_map="5 time x 4 frequency grid (explain_spectrogram's default), 20 cells",
        fill="zero (silence: lime's and audioLIME's default)",
        target="voice (class 1), logits",
        gold_rule=f"cells holding at least {AUDIO_GOLD_SHARE:.0%} of the evidence mask's bins (the harmonic "
        "tone's lines fill at most about half of any cell, so no cell is 'mostly' evidence)",
        pool=pool,
        pool_correct=int(correct.sum()),
        selection="the first n clips of the pool that the model classifies as voice",
    )
    return Task("audio", model, x, explain, gold, BernoulliSampler(0.5), ExponentialKernel(width=0.25), info)


def text_task(n: int, pool: int) -> Task:
    """The embedded TextCNN on held-out sentences, token features, gold = the planted rationale."""
    from torchlime.demo.text_data import CLS, MASK, SEP, make_text_dataset
    from torchlime.demo.text_models import load_text_model
    from torchlime.text import explain_tokens

    model, _ = load_text_model()
    data = make_text_dataset(pool, seed=HELD_OUT_SEED)
    with torch.inference_mode():
        pred = model(data.input_ids, data.attention_mask).argmax(1)
    correct = pred == data.labels
    idx = _select(correct, n, "text")
    ids, attn, y, rationale = data.input_ids[idx], data.attention_mask[idx], data.labels[idx], data.rationale[idx]

    def explain(**kw: Any) -> Explanation:
        return explain_tokens(
            model,
            ids,
            attention_mask=attn,
            special_ids=[CLS, SEP],
            mode="replace",
            mask_id=MASK,
            target=y,
            softmax=False,
            batch_size=TEXT_BATCH,
            **kw,
        )

    def gold(exp: Explanation) -> torch.Tensor:
        return metrics.feature_mask(exp, rationale)

    lime_text = PRESETS["lime_text"]["any"]
    info = dict(
        model="torchlime.demo.text_models.load_text_model() (TextCNN sentiment)",
        data=f"torchlime.demo.text_data.make_text_dataset({pool}, seed={HELD_OUT_SEED})",
        feature_map="tokens between [CLS] and [SEP] (one feature each)",
        fill="replace by [MASK] (mode='replace')",
        target="the true class, logits",
        batch_size=TEXT_BATCH,
        gold_rule="the rationale tokens (data.rationale: the planted sentiment phrases)",
        pool=pool,
        pool_correct=int(correct.sum()),
        selection="the first n sentences of the pool that the model classifies correctly",
    )
    return Task("text", model, ids, explain, gold, lime_text["sampler"], lime_text["kernel"], info)


TASKS = dict(planted=planted_task, image=image_task, audio=audio_task, text=text_task)


# ----------------------------------------------------------------------------- methods


def method_keywords(name: str, task: Task, budget: int, quick: bool) -> Optional[dict[str, Any]]:
    """The explain keywords of a method on a task (None: not available in this package)."""
    lime = dict(sampler=task.lime_sampler, kernel=task.lime_kernel, surrogate=Ridge(alpha=1.0), n_samples=budget)
    if name == "lime":
        return lime
    if name == "stratified":
        return dict(lime, sampler=StratifiedSampler(0.5))
    if name == "antithetic":
        return dict(lime, sampler=AntitheticSampler(task.lime_sampler))
    if name == "sobol":
        return dict(lime, sampler=SobolSampler(0.5))
    if name == "lasso":
        return dict(lime, surrogate=Lasso(alpha=LASSO_ALPHA))
    if name == "klasso":
        return dict(lime, surrogate=KLasso(k=KLASSO_K))
    if name == "bayes":
        return dict(lime, surrogate=BayesianRidge())
    if name == "uniform":
        return dict(lime, kernel=UniformKernel())
    if name == "smile":  # an input-space kernel: token ids are not numbers to compare (the front door refuses)
        return None if task.name == "text" else dict(lime, kernel=SmileKernel("wasserstein"))
    if name == "auto":
        return dict(lime, n_samples=Adaptive(start=16, cap=64, rule="top_k") if quick else TOP_K)
    if name == "kernel_shap":
        return dict(preset="kernel_shap", n_samples=budget) if "kernel_shap" in PRESETS else None
    raise ValueError(name)


# ----------------------------------------------------------------------------- metrics


def stats(values: torch.Tensor) -> dict[str, Any]:
    """Mean, standard deviation, quartiles and n of the finite values of a 1-D tensor."""
    v = values.double()
    v = v[torch.isfinite(v)]
    if v.numel() == 0:
        return dict(n=0, mean=None, std=None, q1=None, median=None, q3=None)
    q = torch.quantile(v, torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)).tolist()
    return dict(
        n=int(v.numel()),
        mean=float(v.mean()),
        std=float(v.std()) if v.numel() > 1 else 0.0,
        q1=q[0],
        median=q[1],
        q3=q[2],
    )


def flagged_inputs(exp: Explanation) -> tuple[torch.Tensor, dict[str, int]]:
    """Bool (B,): inputs with any ``torchlime.engine.quality`` flag, and how many inputs each flag concerns."""
    quality = exp.meta.get("quality") or {}
    out = torch.zeros(exp.coef.shape[0], dtype=torch.bool)
    counts = {}
    for name in ("saturated", "poor_fit", "few_samples"):
        where = sorted({int(w[0]) for w in quality.get(name, [])})
        counts[name] = len(where)
        out[where] = True
    return out, counts


def recall_at_gold(exp: Explanation, gold: torch.Tensor) -> torch.Tensor:
    """(B,) recall of the gold features in the top |gold_b| of each input (``metrics.gold_recall``)."""
    size = gold.sum(1)
    out = torch.full((gold.shape[0],), float("nan"))
    for k in size.unique().tolist():
        if k > 0:
            rows = size == k
            out[rows] = metrics.gold_recall(exp, gold, k=int(k))[rows, 0]
    return out


def score_one(task: Task, exp: Explanation) -> dict[str, torch.Tensor]:
    """Per-input (B,) metrics of one explanation."""
    gold = task.gold(exp)
    flagged, _ = flagged_inputs(exp)
    out = dict(
        deletion_auc=metrics.deletion(task.model, task.inputs, exp)[:, 0],
        insertion_auc=metrics.insertion(task.model, task.inputs, exp)[:, 0],
        label_flip_top3=metrics.label_flip(task.model, task.inputs, exp, k=TOP_K_FLIP)[:, 0].float(),
        gold_recall_at_gold=recall_at_gold(exp, gold),
        gold_recall_top3=metrics.gold_recall(exp, gold, k=TOP_K_RECALL)[:, 0],
        roc_auc=metrics.token_roc_auc(exp, gold)[:, 0],
        r2=exp.score[:, 0].float(),
        flagged=flagged.float(),
        samples_used=torch.tensor(exp.meta["samples_used"], dtype=torch.float32),
    )
    if task.truth is not None:
        true = task.truth(exp)
        err = (exp.coef[:, 0] - true).norm(dim=1) / true.norm(dim=1).clamp_min(1e-12)
        out["coef_error"] = err.float()
    return out


def run_method(task: Task, name: str, keywords: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """Explain with every seed, score each explanation, and summarise over the inputs."""
    t0 = time.perf_counter()
    exps, per_seed, flag_counts, unreliable_calls = [], [], [], 0
    for seed in seeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreliableExplanationWarning)
            exp = task.explain(generator=seed, **keywords)
        exps.append(exp)
        per_seed.append(score_one(task, exp))
        flag_counts.append(flagged_inputs(exp)[1])
        unreliable_calls += exp.meta.get("unreliable") is not None
    per_input = {k: torch.stack([s[k] for s in per_seed]).nanmean(0) for k in per_seed[0]}
    per_input["jaccard_top5"] = metrics.jaccard_topk(exps, k=TOP_K_STABLE)[:, 0]
    first = exps[0].meta
    return dict(
        n_features=stats(exps[0].n_features.float()),
        gold_features=stats(task.gold(exps[0]).sum(1).float()),
        settings=dict(
            sampler=repr(first.get("sampler")),
            kernel=repr(first.get("kernel")),
            surrogate=repr(first.get("surrogate")),
            baseline=repr(first.get("baseline")),
            preset=first.get("preset"),
            n_samples=repr(keywords.get("n_samples")),
        ),
        metrics={k: stats(v) for k, v in per_input.items()},
        per_input={k: [None if math.isnan(x) else round(x, 6) for x in v.tolist()] for k, v in per_input.items()},
        flag_counts={k: [c[k] for c in flag_counts] for k in flag_counts[0]},
        unreliable_calls=unreliable_calls,
        explanations=len(seeds) * task.inputs.shape[0],
        model_rows_per_input=sum(e.meta["model_rows"] for e in exps) / (len(seeds) * task.inputs.shape[0]),
        seconds=time.perf_counter() - t0,
    )


# ----------------------------------------------------------------------------- the study


def torchlime_source() -> str:
    """Which torchlime ran: its path inside this repository when it is this checkout's, else
    "installed" (never a path of the machine).
    """
    here = Path(torchlime.__file__).resolve()
    root = Path(__file__).resolve().parents[1]
    return str(here.relative_to(root)) if here.is_relative_to(root) else "installed"


def source_state(suffix: str = "") -> dict[str, Any]:
    """Whether the run's code differs from the recorded commit (torchlime/ and this study's scripts):
    the changed paths, and a hash of their diff against the commit (untracked files by name only).
    """
    import hashlib

    paths = ["torchlime", "benchmarks/quality.py", "benchmarks/quality_report.py", "benchmarks/common.py"]
    root = Path(__file__).resolve().parents[1]
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", *paths], capture_output=True, text=True, cwd=root
        ).stdout
        diff = subprocess.run(["git", "diff", "HEAD", "--", *paths], capture_output=True, cwd=root).stdout
    except OSError:
        return {f"uncommitted_changes{suffix}": None}
    changed = sorted(line[3:] for line in status.splitlines())
    return {
        f"uncommitted_changes{suffix}": changed,
        f"diff_sha256{suffix}": hashlib.sha256(diff).hexdigest() if changed else None,
    }


def main(argv: Optional[list[str]] = None) -> dict[str, Any]:
    parser = common_args(
        argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    )
    parser.add_argument("--n", type=int, default=None, help="inputs per modality (default 48; quick: 4)")
    parser.add_argument("--budget", type=int, default=None, help="model rows per input (default 512; quick: 64)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (default 1: faster than 2 on a shared 2-core machine)"
    )
    parser.add_argument("--modalities", nargs="+", default=list(MODALITIES), choices=MODALITIES)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    args = parser.parse_args(argv)
    if args.device != "cpu":
        raise SystemExit("quality.py runs on the CPU (--device cpu)")
    torch.set_num_threads(args.threads)
    size_defaults(args, dict(n=(4, 48), budget=(64, 512)))
    n, budget = args.n, args.budget
    seeds = [0, 1] if args.quick else [0, 1, 2]
    t_start, load_start = time.perf_counter(), load_average()
    payload: dict[str, Any] = dict(
        header(torch.device("cpu")),
        benchmark="quality",
        quick=args.quick,
        threads=args.threads,
        n_inputs=n,
        budget=budget,
        seeds=seeds,
        held_out_seed=HELD_OUT_SEED,
        torchlime_file=torchlime_source(),
        **source_state(),
        constants=dict(
            n_segments=N_SEGMENTS,
            planted_k=PLANTED_K,
            image_gold_share=IMAGE_GOLD_SHARE,
            audio_gold_share=AUDIO_GOLD_SHARE,
            top_k_flip=TOP_K_FLIP,
            top_k_stable=TOP_K_STABLE,
            top_k_recall=TOP_K_RECALL,
            lasso_alpha=LASSO_ALPHA,
            klasso_k=KLASSO_K,
            adaptive=repr(Adaptive(start=16, cap=64, rule="top_k") if args.quick else TOP_K),
        ),
        kernel_shap=dict(
            available="kernel_shap" in PRESETS,
            preset=repr(PRESETS.get("kernel_shap")) if "kernel_shap" in PRESETS else None,
            note=None if "kernel_shap" in PRESETS else "not yet in the package",
        ),
        modalities={},
    )
    for mod in args.modalities:
        t_mod = time.perf_counter()
        task = TASKS[mod](n, 4 * n if mod != "planted" else n)
        record: dict[str, Any] = dict(task.info, n_inputs=int(task.inputs.shape[0]), methods={}, **task.extra)
        print(f"[{time.perf_counter() - t_start:6.0f} s] {mod}: {task.inputs.shape[0]} inputs", flush=True)
        for name in args.methods:
            keywords = method_keywords(name, task, budget, args.quick)
            if keywords is None:
                print(f"  {name}: not available for {mod}, skipped", flush=True)
                continue
            rec = run_method(task, name, keywords, seeds)
            record.setdefault("n_features", rec.pop("n_features"))  # the same for every method
            record.setdefault("gold_features", rec.pop("gold_features"))
            record["methods"][name] = rec
            m = rec["metrics"]
            print(
                f"[{time.perf_counter() - t_start:6.0f} s]   {name:11s} rows/input {rec['model_rows_per_input']:7.0f}"
                f"  del {m['deletion_auc']['mean']:.3f}  ins {m['insertion_auc']['mean']:.3f}"
                f"  flip {m['label_flip_top3']['mean']:.2f}  rec {m['gold_recall_at_gold']['mean']:.2f}"
                f"  auc {m['roc_auc']['mean']:.3f}  jac {m['jaccard_top5']['mean']:.2f}"
                f"  R2 {m['r2']['mean']:.2f}  flagged {m['flagged']['mean']:.2f}",
                flush=True,
            )
        record["seconds"] = time.perf_counter() - t_mod
        payload["modalities"][mod] = record
    payload.update(**source_state("_end"))
    payload.update(
        seconds=time.perf_counter() - t_start,
        load_average_start=load_start,
        load_average_end=load_average(),
        cpu_count=os.cpu_count(),
    )
    name = "quality_quick.json" if args.quick else "quality.json"
    path = write(name, payload, args.out)
    print(f"wrote {path} ({payload['seconds']:.0f} s in all)")
    return payload


if __name__ == "__main__":
    main()
