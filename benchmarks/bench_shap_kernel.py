"""What a shap user gets by switching one import: ``shap.KernelExplainer`` vs ``torchlime.compat.shap``.

Four scenarios (two on CUDA), each system timed in the same run, in interleaved repetitions (medians reported):

* ``front_page``: shap's own test scenario (its tests/explainers/test_kernel.py,
  ``test_front_page_model_agnostic``): an RBF SVM with probabilities on iris, the 135 training rows as
  background, the 15 test rows explained, ``link="logit"``, ``nsamples=100`` (every one of the 14
  coalitions is evaluated: both give the exact Shapley values, and must agree to rounding).
* ``mlp50``: a 50-feature MLP (Linear(50, 64), ReLU, Linear(64, 1), random weights), a 100-row background,
  10 rows explained at ``nsamples = 2 * 50 + 2048`` (coalitions drawn), ``l1_reg=False`` (every feature's
  value compared). Systems: shap with the MLP behind a numpy function (how shap calls a model), torchlime with
  the same numpy function, torchlime with the torch module itself (tensors on ``--device``), and a floor:
  the MLP alone on the same number of rows (rows explained x coalitions x background rows), built beforehand,
  in chunks of 25 600 rows. The coalitions are drawn (each system its own draws), so the agreement is reported
  beside shap's agreement with itself under another seed.
* ``logistic30`` and ``forest30`` (CPU runs): a shap user's usual model, scikit-learn's, on its breast-cancer set
  (30 features): ``LogisticRegression(max_iter=1000)`` and ``RandomForestClassifier(n_estimators=50)`` fitted on
  all of it, its first 100 rows as background, the next 20 explained, ``nsamples=2108``, ``l1_reg=False``; shap and
  torchlime call ``predict_proba`` itself. The floor: ``predict_proba`` alone on the same synthetic rows (rows
  explained x nsamples x background rows, every row of one torchlime call, recorded beforehand: a forest's time
  per row depends on the rows), in a few chunk sizes (``floor_<rows per call>``); the fastest is the floor.
  Goals: logistic30 3x shap's speed, forest30 within 1.2x of its floor (``goal`` in the JSON), for the default
  (fixed chunks); ``torchlime_measure`` is ``batch_size="measure"`` (chunk sizes timed during the call).

On a small shared CPU ``--threads 1`` is steadier (idle threads spinning on a loaded machine can make a small
batched linear-algebra call take milliseconds). The load average is recorded before and after.

    python benchmarks/bench_shap_kernel.py --threads 1             # results/shap_kernel_cpu.json (~6 min)
    python benchmarks/bench_shap_kernel.py --device cuda           # results/shap_kernel_cuda.json
    python benchmarks/bench_shap_kernel.py --quick --out /tmp/q    # smoke run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import datetime
import platform
import statistics
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from torchlime.cli.bench import device_name
from torchlime.compat.shap import KernelExplainer

from benchmarks.common import (
    common_args,
    device_arg,
    goal,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    write,
)

FLOOR_CHUNK = 25_600


def header(device: torch.device) -> dict:
    """``common.header``'s fields; the commit is read from the repository's files (no git process)."""
    commit = "unknown"
    git = Path(__file__).resolve().parents[1] / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            loose = git / ref
            if loose.exists():
                commit = loose.read_text().strip()
            else:
                packed = [line.split() for line in (git / "packed-refs").read_text().splitlines()]
                commit = next((p[0] for p in packed if len(p) == 2 and p[1] == ref), "unknown")
        else:
            commit = head
    except OSError:
        pass
    return dict(
        device=device_name(device),
        device_type=device.type,
        torch=torch.__version__,
        python=platform.python_version(),
        commit=commit,
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    )


def front_page(shap) -> tuple[dict[str, Callable[[], np.ndarray]], dict]:
    """shap's front-page scenario: iris SVM, logit link, nsamples=100."""
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split
    from sklearn.svm import SVC

    iris = load_iris()
    x_train, x_test, y_train, _ = train_test_split(iris.data, iris.target, test_size=0.1, random_state=0)
    svm = SVC(kernel="rbf", probability=True, random_state=0).fit(x_train, y_train)
    call = dict(nsamples=100, silent=True)
    systems: dict[str, Callable[[], np.ndarray]] = {}
    if shap is not None:
        systems["shap"] = lambda: shap.KernelExplainer(svm.predict_proba, x_train, link="logit").shap_values(
            x_test, **call
        )
    systems["torchlime"] = lambda: KernelExplainer(svm.predict_proba, x_train, link="logit", seed=0).shap_values(
        x_test, **call
    )
    setup = dict(model="SVC(rbf, probability=True) on iris", background_rows=len(x_train), rows=len(x_test))
    return systems, dict(setup, features=4, outputs=3, link="logit", nsamples=100, coalitions_evaluated=14)


def mlp50(shap, args, device: torch.device) -> tuple[dict[str, Callable[[], object]], dict]:
    """The 50-feature MLP, a 100-row background, 10 rows at nsamples = 2 * 50 + 2048."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(args.features, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    net = net.eval().to(device)
    rs = np.random.RandomState(0)
    bg, x = rs.normal(size=(args.background, args.features)), rs.normal(size=(args.rows, args.features))
    nsamples = 2 * args.features + 2048

    def numpy_net(rows: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return net(torch.as_tensor(rows, dtype=torch.float32, device=device))[:, 0].double().cpu().numpy()

    def module_net(rows: torch.Tensor) -> torch.Tensor:
        return net(rows)[:, 0]

    bg_t = torch.as_tensor(bg, dtype=torch.float32, device=device)
    x_t = torch.as_tensor(x, dtype=torch.float32, device=device)
    call = dict(nsamples=nsamples, l1_reg=False, silent=True)
    rows = torch.randn(FLOOR_CHUNK, args.features, device=device)
    total = args.rows * nsamples * args.background

    def floor() -> None:
        with torch.inference_mode():
            for start in range(0, total, FLOOR_CHUNK):
                net(rows[: min(FLOOR_CHUNK, total - start)])

    systems: dict[str, Callable[[], object]] = {}
    if shap is not None:
        systems["shap"] = lambda: shap.KernelExplainer(numpy_net, bg).shap_values(x, **call)
    systems["torchlime_numpy_model"] = lambda: KernelExplainer(numpy_net, bg, seed=0).shap_values(x, **call)
    systems["torchlime_torch_module"] = lambda: KernelExplainer(module_net, bg_t, seed=0).shap_values(x_t, **call)
    systems["floor"] = floor
    setup = dict(
        model=f"MLP Linear({args.features}, 64)-ReLU-Linear(64, 1), random weights, float32",
        features=args.features,
        background_rows=args.background,
        rows=args.rows,
        nsamples=nsamples,
        l1_reg=False,
        model_rows_per_system=total,
        floor=f"the MLP alone on {total} prebuilt rows in chunks of {FLOOR_CHUNK}",
    )
    return systems, setup


def sklearn_model(shap, args, kind: str) -> tuple[dict[str, Callable[[], object]], dict]:
    """A scikit-learn model on the breast-cancer set: shap, torchlime, ``predict_proba`` alone in a few chunk sizes."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    x, y = load_breast_cancer(return_X_y=True)
    if kind == "logistic":
        model, name = LogisticRegression(max_iter=1000).fit(x, y), "LogisticRegression(max_iter=1000)"
    else:
        model = RandomForestClassifier(n_estimators=args.trees, random_state=0).fit(x, y)
        name = f"RandomForestClassifier(n_estimators={args.trees}, random_state=0)"
    bg, rows = x[: args.background], x[args.background : args.background + args.sk_rows]
    call = dict(nsamples=args.nsamples, l1_reg=False, silent=True)
    total = len(rows) * args.nsamples * len(bg)
    sizes = (6400, 12800, 25600, 51200) if kind == "logistic" else (12800, 25600, 51200, 102400)
    synthetic = np.empty((total, x.shape[1]))  # every row torchlime's call sends, recorded once (1 GB at full size)
    seen = [0, 0]  # calls, rows recorded

    def recording(batch: np.ndarray) -> np.ndarray:
        seen[0] += 1
        if seen[0] > 2:  # after the background's and the explained rows' own calls
            synthetic[seen[1] : seen[1] + len(batch)] = batch
            seen[1] += len(batch)
        return model.predict_proba(batch)

    KernelExplainer(recording, bg, seed=0).shap_values(rows, **call)
    assert seen[1] == total, (seen, total)

    def floor(size: int) -> Callable[[], None]:
        def go() -> None:
            for start in range(0, total, size):
                model.predict_proba(synthetic[start : start + size])

        return go

    last: dict[str, KernelExplainer] = {}

    def ours() -> np.ndarray:  # the default: fixed chunks, the same bits on every call
        return KernelExplainer(model.predict_proba, bg, seed=0).shap_values(rows, **call)

    def measured() -> np.ndarray:  # batch_size="measure": chunk sizes timed during the call
        last["explainer"] = KernelExplainer(model.predict_proba, bg, seed=0, batch_size="measure")
        return last["explainer"].shap_values(rows, **call)

    systems: dict[str, Callable[[], object]] = {}
    if shap is not None:
        systems["shap"] = lambda: shap.KernelExplainer(model.predict_proba, bg).shap_values(rows, **call)
    systems["torchlime"] = ours
    systems["torchlime_measure"] = measured
    systems.update({f"floor_{size}": floor(size) for size in sizes})
    setup = dict(
        model=f"{name} on scikit-learn's breast-cancer set, predict_proba",
        features=x.shape[1],
        background_rows=len(bg),
        rows=len(rows),
        nsamples=args.nsamples,
        l1_reg=False,
        model_rows_per_system=total,
        floor=f"predict_proba alone on the {total} synthetic rows of a torchlime call, recorded, in calls of "
        f"{', '.join(map(str, sizes))} rows",
        last_explainer=last,
    )
    return systems, setup


def run(systems: dict[str, Callable[[], object]], reps: int, device: torch.device) -> tuple[dict, dict]:
    """Warm-up once, then ``reps`` interleaved repetitions; returns ({name: seconds}, {name: values})."""
    values = {}
    for name, fn in systems.items():
        out = fn()
        if out is not None:
            values[name] = np.asarray(out)
    times: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(reps):
        for name, fn in systems.items():
            times[name].append(timed(fn, device))
        print(f"  rep {rep}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    return times, values


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, quick 1)")
    parser.add_argument("--rows", type=int, default=None, help="rows explained in mlp50 (default 10, quick 2)")
    parser.add_argument("--background", type=int, default=None, help="background rows (default 100, quick 10)")
    parser.add_argument("--features", type=int, default=None, help="features of mlp50 (default 50, quick 12)")
    parser.add_argument("--sk-rows", type=int, default=None, help="rows explained, sklearn models (20, quick 2)")
    parser.add_argument("--nsamples", type=int, default=None, help="nsamples, sklearn models (2108, quick 200)")
    parser.add_argument("--trees", type=int, default=None, help="trees of forest30 (default 50, quick 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    defaults = dict(reps=(1, 3), rows=(2, 10), background=(10, 100), features=(12, 50))
    defaults.update(sk_rows=(2, 20), nsamples=(200, 2108), trees=(5, 50))
    args = size_defaults(parser.parse_args(), defaults)
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    shap, shap_missing = optional_module("shap")
    warnings.filterwarnings("ignore", category=FutureWarning)  # scikit-learn's SVC(probability=True) notice
    warnings.filterwarnings("ignore", message="lbfgs failed to converge")  # the unscaled LogisticRegression
    scenarios: dict[str, dict] = {}
    cases = {"front_page": lambda: front_page(shap), "mlp50": lambda: mlp50(shap, args, device)}
    if device.type == "cpu":  # numpy models: the device does not take part
        cases["logistic30"] = lambda: sklearn_model(shap, args, "logistic")
        cases["forest30"] = lambda: sklearn_model(shap, args, "forest")
    for name, make in cases.items():
        systems, setup = make()
        last = setup.pop("last_explainer", None)
        print(f"{name}: {setup}", flush=True)
        times, values = run(systems, args.reps, device)
        med = {k: statistics.median(v) for k, v in times.items()}
        result = dict(setup=setup, systems={k: dict(seconds=summary(v)) for k, v in times.items()})
        floors = {k: v for k, v in med.items() if k.startswith("floor")}
        if floors:
            best = min(floors, key=floors.__getitem__)
            result["floor"] = dict(system=best, seconds=floors[best])
            result["over_floor"] = {k: v / floors[best] for k, v in med.items() if not k.startswith("floor")}
        if last:  # the chunk size torchlime_measure timed for the numpy model in its last call
            tuner = last["explainer"]._tuner
            result["torchlime_coalitions_per_call"] = None if tuner is None else tuner.best
        if "shap" in med:
            result["shap_over"] = {k: med["shap"] / v for k, v in med.items() if k != "shap"}
            ref = values["shap"]
            result["agreement_with_shap"] = {
                k: dict(max_abs_diff=float(np.abs(v - ref).max()), max_abs_value=float(np.abs(ref).max()))
                for k, v in values.items()
                if k != "shap"
            }
        if name != "front_page" and shap is not None:  # the draws' own noise: shap against itself under two seeds
            np.random.seed(1)
            other = np.asarray(systems["shap"]())
            np.random.seed(2)
            again = np.asarray(systems["shap"]())
            result["shap_seed_1_vs_seed_2_max_abs_diff"] = float(np.abs(other - again).max())
        if name == "logistic30" and "shap_over" in result:
            result["goal"] = goal(">= 3x faster than shap", result["shap_over"]["torchlime"], 3.0, ">=", args.quick)
        if name == "forest30":
            over = result["over_floor"]["torchlime"]
            result["goal"] = goal("within 1.2x of the model-only floor", over, 1.2, "<=", args.quick)
        scenarios[name] = result
        print(f"  medians: { {k: round(v, 3) for k, v in med.items()} }", flush=True)
    result = dict(
        header(device),
        threads=torch.get_num_threads() if device.type == "cpu" else None,
        load_average_1_5_15_at_start=load_before,
        load_average_1_5_15=load_average(),
        quick=args.quick,
        shap=getattr(shap, "__version__", None),
        shap_missing=shap_missing,
        reps=args.reps,
        scenarios=scenarios,
    )
    print(write(f"shap_kernel_{device.type}{'_quick' if args.quick else ''}.json", result, args.out))


if __name__ == "__main__":
    main()
