"""What a shap user gets by switching one import: ``shap.KernelExplainer`` vs ``torchlime.compat.shap``.

Two scenarios, each system timed in the same run, in interleaved repetitions (medians reported):

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

On a small shared CPU ``--threads 1`` is steadier (idle threads spinning on a loaded machine can make a small
batched linear-algebra call take milliseconds). The load average is recorded before and after.

    python benchmarks/bench_shap_kernel.py --threads 1             # results/shap_kernel_cpu.json
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
    parser.add_argument("--background", type=int, default=None, help="background rows in mlp50 (default 100)")
    parser.add_argument("--features", type=int, default=None, help="features of mlp50 (default 50, quick 12)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = size_defaults(parser.parse_args(), dict(reps=(1, 3), rows=(2, 10), background=(10, 100), features=(12, 50)))
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    shap, shap_missing = optional_module("shap")
    warnings.filterwarnings("ignore", category=FutureWarning)  # scikit-learn's SVC(probability=True) notice
    scenarios: dict[str, dict] = {}
    for name, (systems, setup) in {
        "front_page": front_page(shap),
        "mlp50": mlp50(shap, args, device),
    }.items():
        print(f"{name}: {setup}", flush=True)
        times, values = run(systems, args.reps, device)
        med = {k: statistics.median(v) for k, v in times.items()}
        result = dict(setup=setup, systems={k: dict(seconds=summary(v)) for k, v in times.items()})
        if "shap" in med:
            result["shap_over"] = {k: med["shap"] / v for k, v in med.items() if k != "shap"}
            ref = values["shap"]
            result["agreement_with_shap"] = {
                k: dict(max_abs_diff=float(np.abs(v - ref).max()), max_abs_value=float(np.abs(ref).max()))
                for k, v in values.items()
                if k != "shap"
            }
        scenarios[name] = result
        print(f"  medians: { {k: round(v, 3) for k, v in med.items()} }", flush=True)
    if shap is not None:  # the draws' own noise: shap against itself under two seeds
        systems, _ = mlp50(shap, args, device)
        np.random.seed(1)
        other = np.asarray(systems["shap"]())
        np.random.seed(2)
        again = np.asarray(systems["shap"]())
        scenarios["mlp50"]["shap_seed_1_vs_seed_2_max_abs_diff"] = float(np.abs(other - again).max())
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
