"""lime against torchlime's lime layer on the LIME paper's faithfulness protocol: recall, R² and speed.

    python benchmarks/lime_recall.py                          # about 7 minutes on 2 shared CPU cores
    python benchmarks/lime_recall.py --quick --out /tmp/q     # smoke run: 3 inputs, N=500

The protocol of the LIME paper's section 5.2 ("Are explanations faithful to the model?", Ribeiro
et al. 2016): classifiers that use at most 10 features by construction, each test input explained
with K = 10 features; recall = the fraction of the model's used features the explanation lists,
averaged over the inputs. The paper's data (books and DVDs reviews) need downloads; here scikit-
learn's bundled data sets (no download), split 70/30 (stratified, seed 0):

* digits, 3 against 8 (357 x 64 pixels); breast cancer (569 x 30); wine, class 0 against the
  others (178 x 13);
* an L1 logistic regression (standardised inputs, liblinear, the largest C of a grid that uses at
  most 10 columns; gold: its non-zero columns) and a decision tree (the most leaves, up to 64,
  whose splits use at most 10 columns; gold: the columns it splits on);
* lime's ``LimeTabularExplainer`` and ``torchlime.compat.lime.LimeTabularExplainer`` with the same
  settings (training data, ``random_state``, ``num_samples``, ``num_features=10``, label 1), for
  ``discretize_continuous`` False and True and ``feature_selection`` "auto" (highest weights at
  K = 10), "lasso_path" (the paper's K-Lasso) and "forward_selection" (lime fits D x K ridge models
  per explanation, seconds each on 30 or 64 columns: on wine only, on ``--fs-inputs`` inputs).

Per setting: mean recall and mean surrogate R² (lime's ``score``) of both, their difference with
the standard error of the paired difference (the two draw different samples: a difference of about
twice it is noise), whether it is within 0.03, and the milliseconds per
explanation of both (median; lime and the layer alternate input by input in the same process).
The run uses ``--threads`` (default 1) torch and BLAS threads for both, and records the load average.
Result: results/lime_recall_cpu.json (smoke runs: ``lime_recall_quick.json``).
"""

from __future__ import annotations

import os
import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))


def _threads_from_argv(default: int = 1) -> int:
    """``--threads N`` read before numpy is imported (BLAS reads its thread count at import)."""
    argv = _sys.argv
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return default


for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(_threads_from_argv()))

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import common_args, header, optional_module, size_defaults, write  # noqa: E402
from benchmarks.faithfulness_lib import MAX_GOLD, sparse_logreg_fit  # noqa: E402

K = 10
TOLERANCE = 0.03
SELECTIONS = ("auto", "lasso_path", "forward_selection")
FORWARD_SETS = ("wine_0_vs_rest",)  # forward selection: lime's D x K ridge fits take seconds on 30 or 64 columns


def datasets(seed: int) -> dict:
    """Name -> (X_train, X_test, y_train, y_test), binary labels, float64 rows."""
    from sklearn.datasets import load_breast_cancer, load_digits, load_wine
    from sklearn.model_selection import train_test_split

    dx, dy = load_digits(return_X_y=True)
    keep = (dy == 3) | (dy == 8)
    wx, wy = load_wine(return_X_y=True)
    bx, by = load_breast_cancer(return_X_y=True)
    sets = {"digits_3_vs_8": (dx[keep], (dy[keep] == 8)), "breast_cancer": (bx, by), "wine_0_vs_rest": (wx, wy == 0)}
    out = {}
    for name, (x, y) in sets.items():
        out[name] = train_test_split(x.astype(np.float64), y.astype(int), test_size=0.3, stratify=y, random_state=seed)
    return out


def l1_logreg(x: np.ndarray, y: np.ndarray):
    """The sparse logistic regression and its used columns."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    est, lr, used, c = sparse_logreg_fit(x, y, lambda clf: make_pipeline(StandardScaler(), clf))
    return est, sorted(int(f) for f in used), f"L1 logistic regression (standardised inputs), C={c:.3g}"


def tree(x: np.ndarray, y: np.ndarray, seed: int):
    """The decision tree with the most leaves (<= 64) whose splits use at most 10 columns."""
    from sklearn.tree import DecisionTreeClassifier

    best = None
    for leaves in range(2, 65):
        clf = DecisionTreeClassifier(max_leaf_nodes=leaves, random_state=seed).fit(x, y)
        used = sorted({int(f) for f in clf.tree_.feature if f >= 0})
        if len(used) <= MAX_GOLD:
            best = (clf, used, f"decision tree, {leaves} leaves at most")
    return best


def explain(explainer, row: np.ndarray, clf, n_samples: int) -> tuple[set, float, float]:
    """(features listed for label 1, R², seconds) of one explanation."""
    t0 = time.perf_counter()
    exp = explainer.explain_instance(row, clf.predict_proba, labels=(1,), num_features=K, num_samples=n_samples)
    seconds = time.perf_counter() - t0
    return {int(f) for f, _ in exp.as_map()[1]}, float(exp.score), seconds


def paired(a: list, b: list) -> dict:
    """Means of both, their difference (b - a), its standard error and whether it is within the tolerance."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diff = b_ - a_
    sem = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else 0.0
    d = float(diff.mean())
    return dict(
        lime=float(a_.mean()),
        compat=float(b_.mean()),
        diff=d,
        diff_sem=sem,
        within=bool(abs(d) <= TOLERANCE),
        within_two_sem=bool(abs(d) <= 2 * sem),
    )


def run_setting(lime_tabular, compat, x_tr, rows, clf, gold, disc: bool, selection: str, args) -> dict:
    """Both explainers on the same rows, alternating which runs first."""
    kw = dict(discretize_continuous=disc, feature_selection=selection, random_state=args.seed)
    pair = (lime_tabular.LimeTabularExplainer(x_tr, **kw), compat.LimeTabularExplainer(x_tr, **kw))
    for ex in pair:  # warm up (first-call costs) on a training row
        explain(ex, x_tr[0], clf, args.n_samples)
    got: dict = {"lime": ([], [], []), "compat": ([], [], [])}
    for i, row in enumerate(rows):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for j in order:
            feats, r2, sec = explain(pair[j], row, clf, args.n_samples)
            rec, scores, times = got["lime" if j == 0 else "compat"]
            rec.append(len(feats & set(gold)) / len(gold))
            scores.append(r2)
            times.append(sec)
    ms = {k: 1000 * float(np.median(v[2])) for k, v in got.items()}
    return dict(
        discretize_continuous=disc,
        feature_selection=selection,
        n_inputs=len(rows),
        recall=paired(got["lime"][0], got["compat"][0]),
        r2=paired(got["lime"][1], got["compat"][1]),
        ms_per_explanation=dict(
            lime=ms["lime"],
            compat=ms["compat"],
            lime_mean=1000 * float(np.mean(got["lime"][2])),
            compat_mean=1000 * float(np.mean(got["compat"][2])),
            speedup=ms["lime"] / ms["compat"],
        ),
    )


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch and BLAS threads of both (default 1)")
    parser.add_argument("--n-test", type=int, default=None, help="test inputs per data set; 0 (default): all, quick 3")
    parser.add_argument(
        "--fs-inputs", type=int, default=None, help="inputs of forward selection; 0 (default): all, quick 2"
    )
    parser.add_argument("--n-samples", type=int, default=None, help="samples per explanation; default 5000, quick 500")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    size_defaults(args, dict(n_test=(3, 0), fs_inputs=(2, 0), n_samples=(500, 5000)))
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")  # sklearn's deprecations, lime's "probabilities do not sum to 1"
    lime_tabular, missing = optional_module("lime.lime_tabular")
    if lime_tabular is None:
        raise SystemExit(f"this benchmark compares against lime, which is missing: {missing}")
    from importlib.metadata import version

    from torchlime.compat import lime as compat

    np.random.seed(args.seed)  # liblinear shuffles with numpy's global generator: the same models every run
    load_start = list(os.getloadavg())
    t_start = time.perf_counter()
    models, settings = [], []
    for name, (x_tr, x_te, y_tr, y_te) in datasets(args.seed).items():
        for clf, gold, description in (l1_logreg(x_tr, y_tr), tree(x_tr, y_tr, args.seed)):
            model = description.split(",")[0].split(" (")[0]
            models.append(
                dict(
                    dataset=name,
                    shape=list(x_tr.shape),
                    model=model,
                    description=description,
                    gold=gold,
                    n_gold=len(gold),
                    test_accuracy=float(clf.score(x_te, y_te)),
                )
            )
            for disc in (False, True):
                for selection in SELECTIONS:
                    if selection == "forward_selection" and name not in FORWARD_SETS:
                        continue
                    n = (args.fs_inputs if selection == "forward_selection" else args.n_test) or len(x_te)
                    row = run_setting(lime_tabular, compat, x_tr, x_te[:n], clf, gold, disc, selection, args)
                    settings.append(dict(dataset=name, model=model, **row))
                    r, s, t = row["recall"], row["r2"], row["ms_per_explanation"]
                    print(
                        f"{name:15s} {model[:22]:22s} disc={disc!s:5s} {selection:17s} "
                        f"recall {r['lime']:.3f}/{r['compat']:.3f} R² {s['lime']:.3f}/{s['compat']:.3f} "
                        f"ms {t['lime']:.1f}/{t['compat']:.1f}",
                        flush=True,
                    )
    outside = [
        f"{s['dataset']} / {s['model']} / discretize={s['discretize_continuous']} / {s['feature_selection']}: "
        + ", ".join(k for k in ("recall", "r2") if not s[k]["within"])
        for s in settings
        if not (s["recall"]["within"] and s["r2"]["within"])
    ]
    payload = dict(
        **header(torch.device("cpu")),
        benchmark="lime_recall",
        quick=args.quick,
        protocol="LIME paper sec. 5.2: models using <= 10 features, K = 10, recall of the used features",
        data_note="the paper's books/DVDs reviews need downloads; scikit-learn's bundled digits, breast cancer, wine",
        lime_version=version("lime"),
        threads=args.threads,
        n_samples=args.n_samples,
        num_features=K,
        n_test=args.n_test,
        fs_inputs=args.fs_inputs,
        seed=args.seed,
        tolerance=TOLERANCE,
        loadavg_start=load_start,
        loadavg_end=list(os.getloadavg()),
        seconds_total=time.perf_counter() - t_start,
        models=models,
        settings=settings,
        summary=dict(
            settings=len(settings),
            within_tolerance=len(settings) - len(outside),
            outside_tolerance=outside,
            outside_tolerance_but_within_two_sem=sum(
                not (s[k]["within"]) and s[k]["within_two_sem"] for s in settings for k in ("recall", "r2")
            ),
            compat_faster=sum(s["ms_per_explanation"]["speedup"] > 1 for s in settings),
        ),
    )
    path = write("lime_recall_quick.json" if args.quick else "lime_recall_cpu.json", payload, args.out)
    print(f"wrote {path} ({payload['seconds_total']:.0f} s)")


if __name__ == "__main__":
    main()
