"""The veracity protocol of Praher et al. (ISMIR 2021) on the embedded audio CNN.

Adversarial perturbations with known location test whether LIME explains what
the model actually reacts to:

1. Attack: an iterative signed-gradient attack on the model's spectrogram
   minimises ||delta||^2 + alpha * CE(f(x + delta), t), t = the other class,
   delta clipped to [-eps, eps] (and x + delta >= 0: log-magnitudes).
2. Explain the model's prediction t on x + delta with LIME over the 5 time x 4
   frequency grid (20 segments), N = 8192, one batched pass per setting.
3. Global attack: add to x only the k segments of delta that LIME ranks
   highest, or the k with the largest perturbation norm, or k random ones,
   k = 1..20: label-flip rate vs k (Figure 2), k = 3 (Table 1), and all
   positively weighted segments (Table 2).
4. Localised attack: delta restricted to k random segments (every clip is
   attacked for k = 1, 3 and 5): how many of them LIME puts in its top k
   (Figure 3).
5. Fidelity (weighted R^2) of correct vs wrong explanations (Figure 4).

Run with lime's defaults and with the best torchlime settings (``--tune``
chooses them on separate clips and writes ``veracity_tuning.json``).

    python benchmarks/veracity.py               # ~6 min on 2 CPU cores: results/veracity.json + PNGs
    python benchmarks/veracity_report.py        # the tables of VERACITY.md from the committed results
    python benchmarks/veracity.py --tune        # settings search on 24 other clips (~8 min on 2 CPU cores)
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import os
import time
from pathlib import Path
from typing import Any

import torch

from torchlime.demo import audio_data  # noqa: E402
from torchlime.demo.audio_models import load_audio_model  # noqa: E402

from benchmarks.common import RESULTS, header, write  # noqa: E402
from benchmarks.veracity_lib import (  # noqa: E402
    ATTACK,
    SETTINGS,
    adversarials,
    explain_many,
    flip_curve,
    localised_recovery,
    summarise,
)
from benchmarks.veracity_report import load, plots, tables  # noqa: E402
from benchmarks.veracity_tune import tune  # noqa: E402


def prepare(model: torch.nn.Module, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n correctly classified clips of seed ``seed``: spectrograms (n, Fr, Tm), labels (n,)."""
    clips = audio_data.make_clips(int(n * 1.15) + 8, seed=seed)
    specs = audio_data.log_spectrogram(clips.waves)
    with torch.inference_mode():
        ok = model(specs).argmax(1) == clips.labels
    keep = ok.nonzero().flatten()[:n]
    return specs[keep], clips.labels[keep]


def run(
    model: torch.nn.Module,
    specs: torch.Tensor,
    labels: torch.Tensor,
    settings: dict[str, dict],
    seed: int,
    log: Any = print,
) -> dict[str, Any]:
    """The whole protocol for the given clips and LIME settings; returns plain data."""
    adv = adversarials(model, specs, labels, ATTACK, seed)
    out: dict[str, Any] = dict(n_clips=len(specs), attack=adv["stats"], localised_attack=adv["local_stats"])
    log(
        f"global attack: {out['attack']['success']}/{len(specs)} adversarial; localised: "
        f"{out['localised_attack']['success']}"
    )
    seg, xa, da, ta = adv["seg"], adv["x"], adv["delta"], adv["target"]
    gen = torch.Generator().manual_seed(seed + 1)
    random_rank = torch.rand(len(xa), 20, generator=gen).argsort(1)
    norm_rank = (
        (da.pow(2).unsqueeze(1) * (seg == torch.arange(20).view(20, 1, 1))).sum((2, 3)).argsort(1, descending=True)
    )
    out["global"] = dict(
        norm=flip_curve(model, xa, da, seg, norm_rank, ta), random=flip_curve(model, xa, da, seg, random_rank, ta)
    )
    out["localised"], out["timing"] = {}, {}
    for name, cfg in settings.items():
        t0 = time.perf_counter()
        exp = explain_many(model, xa + da, ta, cfg, seed)
        secs = time.perf_counter() - t0
        coef, score = exp.coef[:, 0], exp.score[:, 0]
        curve = flip_curve(model, xa, da, seg, coef.argsort(1, descending=True), ta)
        positive = coef > 0
        flips_pos = flip_curve(model, xa, da, seg, None, ta, keep=positive)
        # where LIME puts the segment that carries most of the perturbation (1 = top), and its sign
        main_seg = norm_rank[:, :1]
        lime_rank = (coef.argsort(1, descending=True).argsort(1).gather(1, main_seg)[:, 0] + 1).float()
        main_negative = coef.gather(1, main_seg)[:, 0] < 0
        curve["largest_norm_segment"] = {
            str(t): dict(
                mean_lime_rank=float(lime_rank[ta == t].mean()),
                negative_weight=float(main_negative[ta == t].float().mean()),
            )
            for t in ta.unique().tolist()
        }
        curve.update(
            all_positive=flips_pos["k"],
            n_positive=float(positive.sum(1).float().mean()),
            all_positive_by_target={
                str(t): float(flips_pos["flipped"][ta == t].float().mean()) for t in ta.unique().tolist()
            },
            fidelity=summarise(score),
            fidelity_correct=summarise(score[curve["flipped"][:, 2]]),
            fidelity_wrong=summarise(score[~curve["flipped"][:, 2]]),
        )
        out["global"][name] = curve
        t1 = time.perf_counter()
        lexp = explain_many(model, adv["l_x"] + adv["l_delta"], adv["l_target"], cfg, seed)
        secs += time.perf_counter() - t1
        out["localised"][name] = localised_recovery(lexp.coef[:, 0], lexp.score[:, 0], adv["region_ids"], adv["ks"])
        n_exp = len(xa) + len(adv["l_x"])
        out["timing"][name] = dict(explanations=n_exp, seconds=secs, seconds_per_explanation=secs / max(n_exp, 1))
        log(
            f"{name}: top-3 flip rate {curve['rate'][2]:.3f}, localised recovery "
            f"{out['localised'][name]['mean_fraction']:.3f} ({secs:.0f} s)"
        )
    for v in out["global"].values():
        v.pop("flipped", None)
    return out


def source_state() -> dict[str, Any]:
    """Whether the run's code differs from the recorded commit (torchlime/ and the veracity scripts)."""
    import subprocess

    try:
        out = subprocess.run(
            [
                "git",
                "status",
                "--porcelain",
                "--",
                "torchlime",
                "benchmarks/veracity.py",
                "benchmarks/veracity_lib.py",
                "benchmarks/veracity_tune.py",
                "benchmarks/veracity_report.py",
            ],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        ).stdout
    except OSError:
        return dict(uncommitted_changes=None)
    return dict(uncommitted_changes=sorted(line[3:] for line in out.splitlines()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--clips", type=int, default=None, help="correctly classified clips to attack (default 96; 24 for --tune)"
    )
    parser.add_argument("--seed", type=int, default=2021, help="clip seed (tuning uses another)")
    parser.add_argument("--tune", action="store_true", help="search settings on other clips instead")
    parser.add_argument(
        "--n-samples", type=int, default=None, help="N per explanation (default 8192 as in the study; 2048 for --tune)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the JSON and the figures")
    parser.add_argument("--suffix", default="", help="appended to the result file names (smoke runs)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 6 clips, N = 128 (not a result)")
    args = parser.parse_args()
    if args.quick:
        args.clips, args.n_samples, args.suffix = args.clips or 6, args.n_samples or 128, args.suffix or "_quick"
    torch.manual_seed(0)
    model = load_audio_model()
    for p in model.parameters():
        p.requires_grad_(False)
    t0 = time.perf_counter()
    load_start = os.getloadavg()
    if args.tune:
        specs, labels = prepare(model, args.clips or 24, seed=args.seed + 1)
        result = tune(model, specs, labels, seed=0, n_samples=args.n_samples or 2048)
        payload = dict(
            header(torch.device("cpu")),
            benchmark="veracity_tuning",
            clip_seed=args.seed + 1,
            n_samples=args.n_samples or 2048,
            load_average_start=load_start,
            load_average_end=os.getloadavg(),
            seconds=time.perf_counter() - t0,
            **source_state(),
            **result,
        )
        print(f"wrote {write(f'veracity_tuning{args.suffix}.json', payload, args.out)}")
        return
    specs, labels = prepare(model, args.clips or 96, seed=args.seed)
    settings = {k: dict(v, n_samples=args.n_samples or 8192) for k, v in SETTINGS.items()}
    result = run(model, specs, labels, settings, seed=0)
    payload = dict(
        header(torch.device("cpu")),
        benchmark="veracity",
        clip_seed=args.seed,
        settings={k: {kk: repr(vv) for kk, vv in v.items()} for k, v in settings.items()},
        seconds=time.perf_counter() - t0,
        load_average_start=load_start,
        load_average_end=os.getloadavg(),
        **source_state(),
        **result,
    )
    path = write(f"veracity{args.suffix}.json", payload, args.out)
    plots(payload, args.out, args.suffix)
    print(tables(payload, load("veracity_tuning.json")))
    print(f"wrote {path} and the figures ({payload['seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
