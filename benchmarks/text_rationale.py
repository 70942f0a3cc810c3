"""Token-level ROC-AUC of text explanations against the planted rationale.

    python benchmarks/text_rationale.py                              # a few minutes on 2 CPU cores
    python benchmarks/text_rationale.py --device cuda                # results/text_rationale_cuda.json
    python benchmarks/text_rationale.py --quick --out /tmp/quick     # smoke run: 8 sentences, N=200

For held-out synthetic sentences (``torchlime.demo.text_data``, seed 2) and the
committed CNN (``torchlime/demo/weights/text_cnn.pt``), every perturbation strategy
explains the model's predicted class with the same budget of classifier rows
per sentence: N + 1 (the engine's reference row included). The single-mask
objectives spend F·k + 1 of them scoring candidates, so they draw
N - F_max·k - 1 samples (sentences with fewer features than F_max use fewer
rows). Masked-LM rows are reported separately (they are the perturber's cost,
not the explained model's). Each sentence gets the ROC-AUC of its token
scores (the surrogate coefficients for the predicted class, signed, and their
absolute values) against the rationale mask, over the perturbable tokens; the
table reports the mean over sentences (LIME-LLM's metric, arXiv 2601.11746).
The masked LM for infill is ``BigramMLM`` fitted on the training corpus
(seed 0). Results: benchmarks/results/text_rationale.json (CPU; other devices add
``_<device>`` to the name, smoke runs ``_quick``).
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import time
from typing import Any, Callable

import torch

from torchlime.demo.text_data import CLS, MASK, PAD, SEP, VOCAB, make_text_dataset
from torchlime.demo.text_models import BigramMLM, load_text_model
from torchlime.text import explain_tokens
from torchlime.text.infill import Infiller
from torchlime.text.proximity import HybridKernel

from benchmarks.common import common_args, device_arg, header, size_defaults, smoke_threads, write


def roc_auc(scores: torch.Tensor, positive: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per-row ROC-AUC (Mann-Whitney, ties count 1/2) of scores (n, L) for positive (n, L) among valid.

    Rows without both classes get NaN.
    """
    s = scores.masked_fill(~valid, float("nan")).double()
    pos = positive & valid
    neg = ~positive & valid
    greater = (s.unsqueeze(2) > s.unsqueeze(1)).double()
    ties = (s.unsqueeze(2) == s.unsqueeze(1)).double()
    pair = (pos.unsqueeze(2) & neg.unsqueeze(1)).double()
    wins = ((greater + 0.5 * ties) * pair).sum((1, 2))
    n_pairs = pair.sum((1, 2))
    return torch.where(n_pairs > 0, wins / n_pairs.clamp_min(1), torch.full_like(wins, float("nan")))


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's; quick on CPU: 1)"
    )
    parser.add_argument("--n-sentences", type=int, default=None, help="default 100; quick: 8")
    parser.add_argument("--budgets", type=int, nargs="+", default=None, help="default 100 300; quick: 200")
    parser.add_argument("--top-k", type=int, default=3, help="candidates per feature for the objectives")
    args = parser.parse_args()
    size_defaults(args, dict(n_sentences=(8, 100), budgets=([200], [100, 300])))
    device = device_arg(args.device)
    smoke_threads(args, device)

    model, vocab = load_text_model(map_location=device)
    assert tuple(vocab) == VOCAB
    data = make_text_dataset(args.n_sentences, seed=2)
    corpus = make_text_dataset(6000, seed=0)
    mlm = BigramMLM.from_corpus(corpus.input_ids, corpus.attention_mask, len(VOCAB), MASK).to(device)
    ids, attn = data.input_ids.to(device), data.attention_mask.to(device)
    rationale = data.rationale.to(device)
    with torch.inference_mode():
        pred = model(ids, attn).argmax(1)
    accuracy = float((pred == data.labels.to(device)).float().mean())
    common = dict(
        attention_mask=attn, special_ids=[CLS, SEP], pad_id=PAD, mask_id=MASK, preset="lime_text", generator=0
    )
    n_feat = ((attn != 0) & (ids != CLS) & (ids != SEP)).sum(1)
    f_max = int(n_feat.max())
    hybrid = HybridKernel(mlm, alpha=0.5)
    methods: dict[str, Callable[[int], dict[str, Any]]] = {
        "replace [MASK]": lambda n: dict(mode="replace", n_samples=n),
        "delete": lambda n: dict(mode="delete", n_samples=n),
        "infill joint": lambda n: dict(mode="infill", n_samples=n, infill=Infiller(mlm, synonym_threshold=None)),
        "infill joint + hybrid kernel": lambda n: dict(
            mode="infill", n_samples=n, infill=Infiller(mlm, synonym_threshold=None), kernel=hybrid
        ),
        "infill single": lambda n: dict(
            mode="infill", n_samples=n, infill=Infiller(mlm, protocol="single", synonym_threshold=None)
        ),
        "infill single + hybrid kernel": lambda n: dict(
            mode="infill", n_samples=n, kernel=hybrid, infill=Infiller(mlm, protocol="single", synonym_threshold=None)
        ),
        "infill single neutral": lambda n: dict(
            mode="infill",
            n_samples=n - f_max * args.top_k - 1,
            infill=Infiller(mlm, protocol="single", objective="neutral", k=args.top_k, synonym_threshold=None),
        ),
        "infill single boundary": lambda n: dict(
            mode="infill",
            n_samples=n - f_max * args.top_k - 1,
            infill=Infiller(mlm, protocol="single", objective="boundary", k=args.top_k, synonym_threshold=None),
        ),
    }
    valid = (attn != 0) & (ids != CLS) & (ids != SEP)
    results = []
    for budget in args.budgets:
        for name, make in methods.items():
            kw = make(budget)
            if kw["n_samples"] < 2 * f_max:
                print(f"{name:32s} N={budget}: skipped (F_max·k leaves too few samples)")
                continue
            t0 = time.perf_counter()
            exp = explain_tokens(model, ids, **common, **kw)
            seconds = time.perf_counter() - t0
            token_coef = exp.heatmap(0)  # (n, L): each token's feature coefficient
            auc = roc_auc(token_coef, rationale, valid)
            auc_abs = roc_auc(token_coef.abs(), rationale, valid)
            rows = exp.meta["model_rows"] / len(data)
            row = dict(
                method=name,
                budget=budget,
                n_samples=kw["n_samples"],
                model_rows_per_sentence=rows,
                mlm_rows_per_sentence=exp.meta.get("mlm_rows", 0) / len(data),
                auc_mean=float(auc.nanmean()),
                auc_std=float(auc[~auc.isnan()].std()),
                auc_abs_mean=float(auc_abs.nanmean()),
                r2_mean=float(exp.score.mean()),
                seconds=seconds,
            )
            results.append(row)
            print(
                f"{name:32s} N={budget:5d} rows/sentence {rows:7.1f}  AUC {row['auc_mean']:.3f} "
                f"± {row['auc_std']:.3f}  |coef| AUC {row['auc_abs_mean']:.3f}  R² {row['r2_mean']:.3f}  "
                f"{seconds:6.1f}s"
            )
    payload = dict(
        header(ids.device),
        benchmark="text_rationale",
        n_sentences=len(data),
        model="TextCNN (torchlime/demo/weights/text_cnn.pt)",
        model_accuracy=accuracy,
        mean_features=float(n_feat.float().mean()),
        max_features=f_max,
        rationale_fraction=float(rationale.sum() / valid.sum()),
        mlm="BigramMLM fitted on make_text_dataset(6000, seed=0)",
        preset="lime_text",
        objective_top_k=args.top_k,
        quick=args.quick,
        results=results,
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    name = "text_rationale" + ("" if device.type == "cpu" else f"_{device.type}") + ("_quick" if args.quick else "")
    print("wrote", write(f"{name}.json", payload, args.out))


if __name__ == "__main__":
    main()
