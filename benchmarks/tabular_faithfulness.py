"""Are tabular explanations faithful? The LIME paper's gold-feature recall, on tabular data.

    python benchmarks/tabular_faithfulness.py                          # a few minutes on 2 CPU cores
    python benchmarks/tabular_faithfulness.py --quick --out /tmp/q     # smoke run: 6 inputs, N=500

The protocol of the LIME paper's faithfulness experiment (Ribeiro et al. 2016, section 5.2):
classifiers that use at most 10 features *by construction*, so the features each prediction
depends on are known, and the recall of those gold features among the explanation's top 10
(by |coefficient|), averaged over held-out inputs. The paper reports > 90 % for LIME on its
review texts; here the data are tabular, with at least 30 columns:

* scikit-learn's breast-cancer set (569 x 30) and ``make_classification`` (2000 x 50, 10
  informative columns, seed 0), split 70/30 (stratified, seed 0);
* a sparse logistic regression (L1, standardised inputs, the largest C of a grid with at most
  10 non-zero weights; gold: those columns) and a decision tree of depth <= 10 (gold: the
  distinct columns on the input's decision path, at most 10);
* explainers: ``explain_tabular(preset="lime")`` (quartile bins, N = 5000, Ridge(1) on all
  columns: top 10 by |coef|), the same with ``KLasso(10)`` (the paper's K-Lasso), lime's own
  ``LimeTabularExplainer`` (num_features=10, on the first ``--lime-inputs`` inputs), and
  random rankings (the empirical recall of a random top 10, and its expectation 10 / D).

The models are the scikit-learn classifiers wrapped as torch callables (float64 rows in,
probabilities out). Results: results/tabular_faithfulness.json (CPU; other devices add
``_<device>``, smoke runs ``_quick``); benchmarks/TABULAR.md reports them.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import time

import numpy as np
import torch

from torchlime import KLasso
from torchlime.tabular import explain_tabular, fit_stats

from benchmarks.common import common_args, device_arg, header, optional_module, size_defaults, smoke_threads, write
from benchmarks.faithfulness_lib import MAX_GOLD, decision_tree_fit, sparse_logreg_fit, summary

TOP_K = 10


class SklearnModel:
    """A scikit-learn classifier as a torch callable: (c, D) float rows -> (c, K) float64 probabilities."""

    def __init__(self, clf) -> None:
        self.clf = clf

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        proba = self.clf.predict_proba(x.detach().cpu().double().numpy())
        return torch.from_numpy(proba).to(x.device)


def datasets(seed: int) -> dict:
    """Name -> (X_train, X_test, y_train, y_test) as float64 / int numpy arrays."""
    from sklearn.datasets import load_breast_cancer, make_classification
    from sklearn.model_selection import train_test_split

    bc_x, bc_y = load_breast_cancer(return_X_y=True)
    mc_x, mc_y = make_classification(n_samples=2000, n_features=50, n_informative=10, n_redundant=0, random_state=seed)
    out = {}
    for name, (x, y) in (("breast_cancer", (bc_x, bc_y)), ("make_classification_50", (mc_x, mc_y))):
        out[name] = train_test_split(x, y, test_size=0.3, stratify=y, random_state=seed)
    return out


def sparse_logreg(x: np.ndarray, y: np.ndarray):
    """The L1 logistic regression with the largest C of a grid using <= 10 columns; (model, gold mask fn)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf, lr, used, c = sparse_logreg_fit(x, y, lambda est: make_pipeline(StandardScaler(), est))
    gold = np.zeros(x.shape[1], dtype=bool)
    gold[used] = True
    clf.gold_weights = sorted(np.abs(lr.coef_[0][used]).round(4).tolist(), reverse=True)  # standardised |w|
    return clf, (lambda rows: np.repeat(gold[None], len(rows), 0)), f"L1 logistic regression, C={c:.3g}"


def decision_tree(x: np.ndarray, y: np.ndarray, seed: int):
    """A decision tree of depth <= 10; gold: the distinct columns on each input's decision path."""
    clf, tested = decision_tree_fit(x, y, seed)
    return clf, tested, f"decision tree, depth {clf.get_depth()} (max_depth={MAX_GOLD})"


def recall(top: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per input: |gold ∩ top| / |gold| for top (n, k) column indices and gold (n, D) masks."""
    hit = np.take_along_axis(gold, top, 1).sum(1)
    return hit / gold.sum(1)


def lime_top(lime_tabular, x_train, rows, clf, n_samples: int, seed: int) -> np.ndarray:
    """Lime's own top-10 columns (num_features=10, its default feature selection)."""
    explainer = lime_tabular.LimeTabularExplainer(x_train, discretize_continuous=True, random_state=seed)
    tops = []
    for row in rows:
        exp = explainer.explain_instance(row, clf.predict_proba, num_features=TOP_K, num_samples=n_samples)
        ranked = sorted(exp.local_exp[1], key=lambda fw: -abs(fw[1]))
        tops.append([f for f, _ in ranked[:TOP_K]])
    return np.array(tops)


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; quick: 1)")
    parser.add_argument("--n-test", type=int, default=None, help="held-out inputs per dataset; default 150, quick 6")
    parser.add_argument("--n-samples", type=int, default=None, help="samples per input; default 5000, quick 500")
    parser.add_argument("--lime-inputs", type=int, default=None, help="inputs lime explains; default 40, quick 2")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=5000,
        help="rows per model call (scikit-learn's per-call overhead favours large chunks)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    size_defaults(args, dict(n_test=(6, 150), n_samples=(500, 5000), lime_inputs=(2, 40)))
    device = device_arg(args.device)
    smoke_threads(args, device)
    lime_tabular, lime_missing = optional_module("lime.lime_tabular")
    rng = np.random.default_rng(args.seed)
    results = []
    t_start = time.perf_counter()
    for name, (x_tr, x_te, y_tr, y_te) in datasets(args.seed).items():
        d = x_tr.shape[1]
        rows = x_te[: args.n_test]
        stats = fit_stats(torch.from_numpy(x_tr).to(device))
        for fitted in (sparse_logreg(x_tr, y_tr), decision_tree(x_tr, y_tr, args.seed)):
            clf, gold_of, description = fitted
            gold = gold_of(rows)
            model = SklearnModel(clf)
            x = torch.from_numpy(rows).to(device)
            row = dict(
                dataset=name,
                n_features=d,
                n_train=len(x_tr),
                model=description.split(",")[0],
                description=description,
                accuracy=float(clf.score(x_te, y_te)),
                gold_mean=float(gold.sum(1).mean()),
                gold_max=int(gold.sum(1).max()),
                gold_weights=getattr(clf, "gold_weights", None),
            )
            tops = {}
            for method, extra in (("torchlime_ridge", {}), ("torchlime_klasso", dict(surrogate=KLasso(k=TOP_K)))):
                t0 = time.perf_counter()
                exp = explain_tabular(
                    model,
                    x,
                    training_data=stats,
                    preset="lime",
                    n_samples=args.n_samples,
                    generator=args.seed,
                    batch_size=args.batch_size,
                    **extra,
                )
                top = exp.top_features(TOP_K, by="abs")[0][:, 0].cpu().numpy()
                row[method] = dict(
                    summary(recall(top, gold)),
                    seconds=time.perf_counter() - t0,
                    r2_median=float(exp.score[:, 0].median()),
                )
                tops[method] = top
            random_top = np.stack([rng.permutation(d)[:TOP_K] for _ in range(len(rows))])
            row["random"] = summary(recall(random_top, gold))
            row["random_expected"] = TOP_K / d
            if lime_tabular is not None and args.lime_inputs > 0:
                t0 = time.perf_counter()
                m = min(args.lime_inputs, len(rows))
                top = lime_top(lime_tabular, x_tr, rows[:m], clf, args.n_samples, args.seed)
                row["lime"] = dict(summary(recall(top, gold[:m])), seconds=time.perf_counter() - t0)
                # torchlime on the same inputs (each input's samples depend on its index only)
                row["torchlime_ridge_same_inputs"] = summary(recall(tops["torchlime_ridge"][:m], gold[:m]))
            results.append(row)
            print(
                f"{name:24s} {row['model']:28s} gold {row['gold_mean']:4.1f}  ridge "
                f"{row['torchlime_ridge']['mean']:.3f}  klasso {row['torchlime_klasso']['mean']:.3f}  "
                f"lime {row.get('lime', {}).get('mean', float('nan')):.3f}  random {row['random']['mean']:.3f}"
            )
    payload = dict(
        header(device),
        benchmark="tabular_faithfulness",
        quick=args.quick,
        top_k=TOP_K,
        max_gold=MAX_GOLD,
        n_samples=args.n_samples,
        n_test=args.n_test,
        lime_inputs=args.lime_inputs,
        batch_size=args.batch_size,
        seed=args.seed,
        threads=torch.get_num_threads(),
        lime=None if lime_tabular is None else "lime.lime_tabular",
        lime_missing=lime_missing,
        seconds_total=time.perf_counter() - t_start,
        results=results,
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    stem = "tabular_faithfulness" + ("" if device.type == "cpu" else f"_{device.type}")
    print("wrote", write(stem + ("_quick" if args.quick else "") + ".json", payload, args.out))


if __name__ == "__main__":
    main()
