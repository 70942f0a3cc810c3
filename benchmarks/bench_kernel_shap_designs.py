"""KernelSHAP's error against exact Shapley values at equal model evaluations: designs and peers side by side.

scikit-learn's ``GradientBoosting`` models on its bundled data sets: diabetes (regression, 10 features), wine
(a regressor of the cultivar 0, 1, 2: a classifier of one cultivar against the rest uses 1-3 features, and
half of its held-out rows have phi = 0), breast cancer (a classifier, 30) and digits (a classifier of even
against odd, its 61 non-constant pixels), fitted on all but a held-out split (random, ``random_state=0``).
The game of a held-out row x is v(S) = f(x with the features outside S at one baseline row b), b the
training rows' mean and f the model's raw output (``predict``, or ``decision_function``: the log-odds); its
exact Shapley values come from shap's ``TreeExplainer(model, b, feature_perturbation="interventional",
model_output="raw")`` (their sum is f(x) - f(b) to 1e-6; rows with phi = 0 are left out). Error = the
median over the held-out rows of ||phi_hat - phi||^2 / ||phi||^2, at m = 5n, 10n and 40n model
evaluations per row (n features), for:

* ``torchlime_default``: ``preset="kernel_shap"`` (Leverage SHAP's design: pairs z, 1 - z, sizes uniformly,
  no coalition twice, the Shapley kernel over the inclusion probability, the projected constrained fit);
* ``torchlime_paired``: the same with sizes in proportion to the Shapley kernel (``design="paired"``);
* ``torchlime_plain``: ``preset="kernel_shap_plain"`` (captum's design: sizes by the kernel, with replacement,
  unpaired);
* ``leverage_shap_reference``: Leverage SHAP written here from the paper (Musco & Witter, ICLR 2025) in plain
  NumPy, as it describes it: every coalition kept independently with probability min(1, c / C(n, |z|)) with
  its complement, c set so that m - 2 are expected, the kept ones weighed by the Shapley kernel over that
  probability, least squares on the projected design (the efficiency constraint projected out);
* ``captum``: captum's ``KernelShap`` (``n_samples = m``, its first two samples the input and the baseline);
* ``shap``: shap's ``KernelExplainer`` with b as its background, ``nsamples = m - 2`` (it evaluates f(x) and
  f(b) besides), ``l1_reg=False`` (every feature estimated; its default ``"num_features(10)"`` zeroes the rest);
* ``compat_captum`` and ``compat_shap``: ``torchlime.compat.captum.KernelShap`` and
  ``torchlime.compat.shap.KernelExplainer`` called as their peers are.

Every system gets m evaluations of the model per row (torchlime: ``n_samples = m``, the input and the
all-hidden coalition included). Each system runs with ``--seeds`` seeds (default 3; its draws differ per
seed): the error reported is the mean over seeds of the median over rows, each seed's beside it. Goal (at
10n, every data set): torchlime's default at most half of shap's error, or within 1.3x of the reference
Leverage SHAP. Seconds are recorded per system and budget (indicative: a shared machine). ``coverage``: for
torchlime's three designs, the share of 95 % intervals ``phi_hat ± 1.96 coef_se`` that hold the exact value,
over rows, features and seeds (the paired designs' ``coef_se`` is the pairs' stratified estimate, the plain
design's the independent-draws one).

    python benchmarks/bench_kernel_shap_designs.py                  # results/kernel_shap_designs_cpu.json
    python benchmarks/bench_kernel_shap_designs.py --short --device cuda   # the GPU suite's `designs` part
    python benchmarks/bench_kernel_shap_designs.py --quick --out /tmp/q    # smoke run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import math
import time
import warnings
from typing import Callable

import numpy as np
import torch

import torchlime
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.methods.kernel_shap import KernelShapSampler, ShapleyKernel

from benchmarks.common import common_args, device_arg, goal, header, load_average, optional_module, write

DATA_SETS = ("diabetes", "wine", "breast_cancer", "digits")
MULTIPLES = (5, 10, 40)
SYSTEMS = (
    "torchlime_default",
    "torchlime_paired",
    "torchlime_plain",
    "leverage_shap_reference",
    "captum",
    "shap",
    "compat_captum",
    "compat_shap",
)


def data_set(name: str, rows: int):
    """(model's raw output as a numpy function, held-out rows (r, n), baseline row (1, n), exact phi (r, n))."""
    import shap
    from sklearn import datasets
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
    from sklearn.model_selection import train_test_split

    bunch = getattr(datasets, f"load_{name}")()
    x, y = bunch.data.astype(np.float64), bunch.target
    if name == "digits":
        x, y = x[:, x.std(0) > 0], y % 2
    train, test, y_train, _ = train_test_split(x, y, test_size=rows, random_state=0)
    if name in ("diabetes", "wine"):
        model = GradientBoostingRegressor(random_state=0).fit(train, y_train)
        raw: Callable[[np.ndarray], np.ndarray] = model.predict
    else:
        model = GradientBoostingClassifier(random_state=0).fit(train, y_train)
        raw = model.decision_function
    base = train.mean(0, keepdims=True)
    tree = shap.TreeExplainer(model, data=base, feature_perturbation="interventional", model_output="raw")
    phi = np.asarray(tree.shap_values(test))
    slack = float(np.abs(phi.sum(1) - (raw(test) - raw(base))).max())
    assert slack < 1e-5, f"{name}: TreeExplainer's values miss efficiency by {slack}"
    kept = (phi**2).sum(1) > 1e-12  # rows whose trees all agree with the baseline's have phi = 0: no relative error
    return raw, test[kept], base, phi[kept]


def leverage_shap_reference(f: Callable[[np.ndarray], np.ndarray], x, base, m: int, rng) -> np.ndarray:
    """Leverage SHAP from the paper, in NumPy with plain loops over sizes: (n,) Shapley value estimates."""
    n = x.shape[1]
    budget = m - 2
    sizes = np.arange(1, n)
    counts = np.array([math.comb(n, int(s)) for s in sizes], dtype=np.float64)
    lo, hi = 0.0, float(budget)  # c: sum_s min(C(n, s), c) = budget (each size holds leverage 1 in all)
    for _ in range(100):
        c = (lo + hi) / 2
        lo, hi = (c, hi) if np.minimum(counts, c).sum() < budget else (lo, c)
    prob = np.minimum(1.0, c / counts)  # per coalition of each size
    rows, weights = [], []
    for s in range(1, n // 2 + 1):
        classes = math.comb(n, s) // (2 if 2 * s == n else 1)  # pairs {z, 1 - z} with |z| = s
        p = prob[s - 1]
        drawn = rng.binomial(classes, p)
        seen: set[tuple[int, ...]] = set()
        while len(seen) < drawn:  # without replacement
            pick = tuple(sorted(rng.choice(n, s, replace=False).tolist()))
            if 2 * s == n and 0 not in pick:
                pick = tuple(sorted(set(range(n)) - set(pick)))  # one member of each complementary pair
            seen.add(pick)
        kernel = (n - 1) / (math.comb(n, s) * s * (n - s))
        for pick in seen:
            z = np.zeros(n)
            z[list(pick)] = 1
            rows += [z, 1 - z]
            weights += [kernel / p, kernel / p]
    z = np.array(rows)
    v0, v1 = f(base)[0], f(x)[0]
    y = f(np.where(z > 0, x, base)) - v0
    proj = np.eye(n) - np.ones((n, n)) / n
    sw = np.sqrt(np.array(weights))
    a = (z @ proj) * sw[:, None]
    b = (y - z.sum(1) * (v1 - v0) / n) * sw
    theta = np.linalg.lstsq(a, b, rcond=None)[0]
    return proj @ theta + (v1 - v0) / n


def systems(
    raw, test, base, device: torch.device, m: int, seed: int, se: dict[str, np.ndarray]
) -> dict[str, Callable[[], np.ndarray]]:
    """System name -> a function returning (r, n) estimates at m evaluations per row; torchlime's put their
    ``coef_se`` (r, n) in ``se`` under the same name."""
    n = test.shape[1]

    def model_t(rows: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(raw(rows.detach().double().cpu().numpy())).to(rows.device).view(-1, 1)

    x_t = torch.as_tensor(test, dtype=torch.float64, device=device)
    base_t = torch.as_tensor(base, dtype=torch.float64, device=device)
    feats = torch.arange(n, device=device).view(1, n)

    def engine(name: str, **kw: object) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            with warnings.catch_warnings():  # a linear surrogate of a tree game fits it loosely: expected
                warnings.simplefilter("ignore", UnreliableExplanationWarning)
                exp = torchlime.explain(
                    model_t, x_t, feats, n_samples=m, baseline=base_t, target=0, generator=seed, **kw
                )
            se[name] = exp.coef_se[:, 0].double().cpu().numpy()
            return exp.coef[:, 0].double().cpu().numpy()

        return run

    paired = dict(sampler=KernelShapSampler(design="paired"), kernel=ShapleyKernel(design="paired"))
    out = {
        "torchlime_default": engine("torchlime_default", preset="kernel_shap"),
        "torchlime_paired": engine("torchlime_paired", preset="kernel_shap", **paired),
        "torchlime_plain": engine("torchlime_plain", preset="kernel_shap_plain"),
    }

    def reference() -> np.ndarray:
        rng = np.random.default_rng(seed)
        return np.stack([leverage_shap_reference(raw, test[i : i + 1], base, m, rng) for i in range(len(test))])

    out["leverage_shap_reference"] = reference
    captum, _ = optional_module("captum.attr")
    if captum is not None:

        def captum_run() -> np.ndarray:
            torch.manual_seed(seed)
            ks = captum.KernelShap(lambda v: model_t(v)[:, 0])
            rows = [
                ks.attribute(
                    x_t[i : i + 1].cpu(),
                    baselines=base_t.cpu(),
                    feature_mask=feats.cpu(),
                    n_samples=m,
                    perturbations_per_eval=m,
                )
                for i in range(len(test))
            ]
            return torch.cat(rows).double().numpy()

        out["captum"] = captum_run
    shap, _ = optional_module("shap")
    if shap is not None:

        def shap_run() -> np.ndarray:
            np.random.seed(seed)
            explainer = shap.KernelExplainer(raw, base)
            return np.asarray(explainer.shap_values(test, nsamples=m - 2, l1_reg=False, silent=True))

        out["shap"] = shap_run
    from torchlime.compat.captum import KernelShap
    from torchlime.compat.shap import KernelExplainer

    def compat_captum() -> np.ndarray:
        torch.manual_seed(seed)
        ks = KernelShap(lambda v: model_t(v)[:, 0])
        return ks.attribute(x_t, baselines=base_t, feature_mask=feats, n_samples=m).double().cpu().numpy()

    def compat_shap() -> np.ndarray:
        explainer = KernelExplainer(raw, base, seed=seed)
        return np.asarray(explainer.shap_values(test, nsamples=m - 2, l1_reg=False, silent=True))

    out["compat_captum"], out["compat_shap"] = compat_captum, compat_shap
    return out


def error(estimate: np.ndarray, phi: np.ndarray) -> float:
    """Median over rows of ||phi_hat - phi||^2 / ||phi||^2."""
    return float(np.median(((estimate - phi) ** 2).sum(1) / (phi**2).sum(1)))


def coverage(estimate: np.ndarray, se: np.ndarray, phi: np.ndarray) -> float:
    """The share of |phi_hat - phi| <= 1.96 se over rows and features (95 % intervals holding the exact value)."""
    return float(np.mean(np.abs(estimate - phi) <= 1.96 * se))


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--rows", type=int, default=None, help="held-out rows per data set (default 20; short 6; quick 3)")
    ap.add_argument("--short", action="store_true", help="the GPU suite's part: 6 rows, m = 10n only")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per system (default 3; short and quick: 1)")
    args = ap.parse_args()
    device = device_arg(args.device)
    warnings.filterwarnings("ignore", category=FutureWarning)
    rows = args.rows or (3 if args.quick else 6 if args.short else 20)
    names = ("diabetes", "wine") if args.quick else DATA_SETS
    multiples = (10,) if args.quick or args.short else MULTIPLES
    seeds = args.seeds or (1 if args.quick or args.short else 3)
    out = dict(
        header(device),
        benchmark="bench_kernel_shap_designs",
        quick=args.quick,
        short=args.short,
        rows=rows,
        seeds=seeds,
        load_before=load_average(),
        metric="median over held-out rows of ||phi_hat - phi||^2 / ||phi||^2 (phi: TreeExplainer, interventional, "
        "one baseline row: the training mean)",
        results=[],
    )
    tag = "_quick" if args.quick else "_short" if args.short else ""
    file = f"kernel_shap_designs_{device.type}{tag}.json"
    for name in names:
        raw, test, base, phi = data_set(name, rows)
        n = test.shape[1]
        entry: dict = dict(data_set=name, features=n, rows=len(test), errors={}, per_seed={}, seconds={}, goal=None)
        for k in multiples:
            m = k * n
            per_seed: dict[str, list[float]] = {}
            covered: dict[str, list[float]] = {}
            secs: dict[str, float] = {}
            for seed in range(seeds):
                ses: dict[str, np.ndarray] = {}
                for system, run in systems(raw, test, base, device, m, seed, ses).items():
                    t0 = time.perf_counter()
                    estimate = run()
                    secs[system] = round(secs.get(system, 0.0) + time.perf_counter() - t0, 3)
                    per_seed.setdefault(system, []).append(error(estimate, phi))
                    if system in ses:
                        covered.setdefault(system, []).append(coverage(estimate, ses[system], phi))
            errs = {system: float(np.mean(v)) for system, v in per_seed.items()}
            entry["errors"][f"{k}n"], entry["per_seed"][f"{k}n"], entry["seconds"][f"{k}n"] = errs, per_seed, secs
            entry.setdefault("coverage", {})[f"{k}n"] = {system: float(np.mean(v)) for system, v in covered.items()}
            print(f"{name} (n={n}) m={m}: " + ", ".join(f"{s} {e:.2e}" for s, e in errs.items()), flush=True)
        at = entry["errors"].get("10n", {})
        ours, theirs, ref = at.get("torchlime_default"), at.get("shap"), at.get("leverage_shap_reference")
        if ours is not None:
            vs_shap = None if not theirs else ours / theirs
            vs_ref = None if not ref else ours / ref
            met = (vs_shap is not None and vs_shap <= 0.5) or (vs_ref is not None and vs_ref <= 1.3)
            entry["goal"] = dict(
                goal("torchlime's default at 10n over shap's error", vs_shap, 0.5, quick=args.quick),
                over_reference_leverage_shap=vs_ref,
                reference_limit=1.3,
                within_either=None if args.quick else bool(met),
            )
        out["results"].append(entry)
        path = write(file, out, args.out)  # after every data set: a cut run keeps what it finished
    out["load_after"] = load_average()
    path = write(file, out, args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
