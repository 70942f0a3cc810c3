"""What a captum user gets by switching one import: captum's ``Lime`` vs ``torchlime.compat.captum.Lime``.

A small CNN with random weights (``convnet``: three 3x3 stride-2 convolutions, 16/32/64 channels, ReLU,
global average pooling, a linear layer to 10 classes, initialised so that its logits vary over the
samples; or ``--model resnet18``, torchvision's with random weights), 4 random 64x64 RGB images, an 8x8
grid of 8x8 cells as ``feature_mask`` (64 features), ``n_samples=500``, each image's top class as
``target``, the zero baseline, the same global seed before every call. Interleaved repetitions (medians
reported) of:

* ``captum``: ``captum.attr.Lime(model).attribute(x, target=..., feature_mask=..., n_samples=500)``,
  captum's defaults (``perturbations_per_eval=1``: one row per model call);
* ``compat_default``: ``torchlime.compat.captum.Lime``, the same call (``perturbations_per_eval`` left
  out: torchlime's chunk rule);
* ``compat_ppe50``: the same with ``perturbations_per_eval=50``;
* ``compat_ppe1``: the same with ``perturbations_per_eval=1`` given (one row per call, as captum);
* ``floor``: no explanation, the model once on the N x B perturbed rows (built beforehand, in the
  dtype and layout torchlime hands the model) in one batch.

Each system's model calls, by their rows, are counted by a forward pre-hook (captum's probe of the
unperturbed batch included). The attributions
of ``compat_default`` are compared with ``compat_ppe50`` and ``compat_ppe1`` (bit-identical unless the
model's own arithmetic depends on the batch size, as a CPU convolution may in the last bit) and with
captum's (the same samples; the surrogates' solvers differ).

No ``feature_mask`` (``no_feature_mask`` in the JSON): captum's ``Lime`` and ``KernelShap`` at their defaults
(``n_samples=25``, one feature per element: 3,072 for 3x32x32, 150,528 for 3x224x224; ``--no-mask-sizes``)
on the same CNN and images, beside ``torchlime.compat.captum``'s, which fits these in sample space, and the
bare forward pass of the perturbed rows (``floor``); at 3x32x32 also the compat layer forced through (F, F)
normal equations, as it ran before (``*_normal_equations``). Each captum call's scikit-learn fits are
recorded (their samples X, outputs and weights) and solved again in float64 (``LinearRegression()``, or
``Lasso(alpha=0.01)`` to a 1e-12 tolerance): both captum's and the compat layer's attributions are compared
with that exact fit of the same samples, per image (for the Lasso, whose optimum need not be unique with
S <= F, their objectives too).

On a small shared CPU ``--threads 1`` is steadier: with idle threads spinning, a one-row model call can
take tens of times longer, which would flatter the chunked systems.

    python benchmarks/bench_captum_switch.py --threads 1         # results/captum_switch_cpu.json
    python benchmarks/bench_captum_switch.py --device cuda       # results/captum_switch_cuda.json
    python benchmarks/bench_captum_switch.py --quick --out /tmp/q  # smoke run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import collections
import contextlib
import statistics
import warnings
from typing import Callable, Iterator

import torch

import torchlime.compat.captum as compat_captum
from torchlime.compat.captum import KernelShap, Lime
from torchlime.stages.surrogate import Ridge

from benchmarks.captum_fits_lib import captured_fits, exact_fits, lasso_objectives
from benchmarks.common import (
    common_args,
    device_arg,
    formatted,
    header,
    load_average,
    optional_module,
    perturbed_images,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    vision_model,
    write,
)

SIZE, CELL, SEED = 64, 8, 1234


def convnet(device: torch.device) -> torch.nn.Module:
    """The small CNN: three 3x3 stride-2 convolutions (16/32/64 channels), ReLU, pooling, 10 logits.

    Random weights, He-normal convolutions and a unit-normal linear layer, so that the logits vary over
    the samples (by about 0.5): at torch's default initialisation they vary by about 1e-3, and captum's
    default surrogate (``SkLearnLasso(alpha=0.01)``) sets every attribution to 0.
    """
    torch.manual_seed(0)
    nn = torch.nn
    layers: list[nn.Module] = []
    for c_in, c_out in ((3, 16), (16, 32), (32, 64)):
        layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.ReLU()]
    net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    for layer in net:
        if isinstance(layer, nn.Conv2d):
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight)
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.zeros_(layer.bias)
    return net.eval().to(device)


def grid(size: int) -> torch.Tensor:
    """(1, 1, size, size) long ids of the CELL x CELL cells."""
    cells = torch.arange(size) // CELL
    return (cells.view(-1, 1) * (size // CELL) + cells.view(1, -1)).view(1, 1, size, size)


class Calls:
    """Counts a module's calls by their rows (a forward pre-hook)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.rows: collections.Counter[int] = collections.Counter()
        model.register_forward_pre_hook(self._hook)

    def _hook(self, module: torch.nn.Module, args: tuple) -> None:
        self.rows[int(args[0].shape[0])] += 1

    def take(self) -> dict:
        """The calls since the last ``take``: their number, and {rows: calls} (captum's probe included)."""
        out = dict(model_calls=sum(self.rows.values()), calls_by_rows={str(k): v for k, v in sorted(self.rows.items())})
        self.rows.clear()
        return out


def seeded(make: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``make`` after the same global seed (the same captum samples every call), warnings silenced."""

    def run() -> torch.Tensor:
        torch.manual_seed(SEED)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # captum's "multiple inputs" warning, quality warnings
            return make()

    return run


def systems(model: torch.nn.Module, x: torch.Tensor, target: list[int], n: int, captum) -> dict[str, Callable]:
    """The calls to time, each returning its attributions (None for the floor)."""
    mask = grid(x.shape[-1]).to(x.device)
    call = dict(target=target, feature_mask=mask, n_samples=n)

    out: dict[str, Callable] = {}
    if captum is not None:
        out["captum"] = seeded(lambda: captum.Lime(model).attribute(x, **call))
    out["compat_default"] = seeded(lambda: Lime(model).attribute(x, **call))
    out["compat_ppe50"] = seeded(lambda: Lime(model).attribute(x, perturbations_per_eval=50, **call))
    out["compat_ppe1"] = seeded(lambda: Lime(model).attribute(x, perturbations_per_eval=1, **call))
    rows = torch.cat([perturbed_images(x[i : i + 1], mask[0, 0], n, seed=i, fill="zero") for i in range(len(x))])
    rows = formatted(rows, model)  # torchlime's dtype and layout for this model

    def floor() -> None:
        with torch.inference_mode():
            model(rows)

    out["floor"] = floor
    return out


def batch_invariant(model: torch.nn.Module, x: torch.Tensor, rows: int = 16) -> bool:
    """Whether the model gives the same bits on ``rows`` rows one at a time as in one batch."""
    batch = formatted(
        x[:1].expand(rows, -1, -1, -1) * torch.linspace(0, 1, rows, device=x.device).view(-1, 1, 1, 1), model
    )
    with torch.inference_mode():
        whole = model(batch)
        return bool(torch.equal(whole, torch.cat([model(batch[i : i + 1]) for i in range(rows)])))


def interleaved(fns: dict[str, Callable], reps: int, device: torch.device, calls: Calls) -> tuple[dict, dict, dict]:
    """Warm-up, then ``reps`` interleaved repetitions: (seconds per system, calls counted, attributions)."""
    attributions: dict[str, torch.Tensor] = {}
    counted: dict[str, dict] = {}
    for name, fn in fns.items():  # warm-up: imports, first allocations, oneDNN primitives
        out = fn()
        counted[name] = calls.take()
        if out is not None:
            attributions[name] = out.float().cpu()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for rep in range(reps):
        for name, fn in fns.items():
            times[name].append(timed(fn, device))
        calls.take()
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()), flush=True)
    return times, counted, attributions


@contextlib.contextmanager
def normal_equations() -> Iterator[None]:
    """The compat layer as it ran before its sample-space fits: (F, F) normal equations whatever S and F."""
    fitters = compat_captum.fitters
    compat_captum.fitters = lambda surrogate, n, f: (Ridge(alpha=0.0, dtype=torch.float64), surrogate)
    try:
        yield
    finally:
        compat_captum.fitters = fitters


def no_mask(model: torch.nn.Module, size: int, args, device: torch.device, calls: Calls, captum) -> dict:
    """captum's defaults without a feature_mask at one image size: times, calls and agreement (module doc)."""
    x = torch.rand(args.images, 3, size, size, generator=torch.Generator().manual_seed(0)).to(device)
    with torch.inference_mode():
        target = model(x).argmax(1).tolist()
    calls.take()
    pairs = {"lime": (Lime, "Lime"), "kernel_shap": (KernelShap, "KernelShap")}
    fns: dict[str, Callable] = {}
    recorded: dict[str, list] = {}
    for key, (ours, theirs) in pairs.items():
        if captum is not None:

            def run_captum(name: str = theirs, key: str = key) -> torch.Tensor:
                with captured_fits() as seen:
                    out = getattr(captum, name)(model).attribute(x, target=target)
                recorded[key] = seen  # the last call's fits (the same samples every call: the same seed)
                return out

            fns[f"captum_{key}"] = seeded(run_captum)
        fns[f"compat_{key}"] = seeded(lambda cls=ours: cls(model).attribute(x, target=target))
        if size <= 32 and not args.quick:

            def old(cls=ours) -> torch.Tensor:
                with normal_equations():
                    return cls(model).attribute(x, target=target)

            fns[f"compat_{key}_normal_equations"] = seeded(old)
    pixels = torch.arange(size * size).view(size, size)
    rows = torch.cat([perturbed_images(x[i : i + 1], pixels, 25, seed=i, fill="zero") for i in range(len(x))])
    rows = formatted(rows, model)

    def floor() -> None:
        with torch.inference_mode():
            model(rows)

    fns["floor"] = floor
    times, counted, attributions = interleaved(fns, args.reps, device, calls)
    med = {k: statistics.median(v) for k, v in times.items()}
    agreement = {}
    for key in pairs:
        if key not in recorded:
            continue
        exact = exact_fits(recorded[key]).float()  # (E, F) in captum's feature order: the inputs' flat order
        for name in (f"captum_{key}", f"compat_{key}", f"compat_{key}_normal_equations"):
            if name in attributions:
                got = attributions[name].reshape(len(x), -1)
                agreement[name] = dict(
                    max_abs_diff_to_exact_fit_per_image=(got - exact).abs().amax(1).tolist(),
                    max_abs_diff_to_captum=float((got - attributions[f"captum_{key}"].reshape(len(x), -1)).abs().max()),
                    nonzero_per_image=(got != 0).sum(1).tolist(),
                )
                if key == "lime":  # where the optimum is not unique, coefficients differ at the same objective
                    mine, best = lasso_objectives(recorded[key], got), lasso_objectives(recorded[key], exact)
                    agreement[name]["objective_over_exact_fit_minus_1_per_image"] = [
                        a / b - 1 for a, b in zip(mine, best)
                    ]
        agreement[f"exact_fit_{key}"] = dict(
            max_abs_per_image=exact.abs().amax(1).tolist(), nonzero_per_image=(exact != 0).sum(1).tolist()
        )
    ratios = {f"captum_over_compat_{k}": med[f"captum_{k}"] / med[f"compat_{k}"] for k in pairs if f"captum_{k}" in med}
    ratios.update({f"compat_{k}_over_floor": med[f"compat_{k}"] / med["floor"] for k in pairs})
    ratios.update(
        {f"{k}_normal_equations_over_{k}": med[f"compat_{k}_normal_equations"] / med[f"compat_{k}"]
         for k in pairs if f"compat_{k}_normal_equations" in med}
    )  # fmt: skip
    return dict(
        setup=dict(
            images=args.images,
            size=size,
            features=3 * size * size,
            n_samples=25,
            reps=args.reps,
            seed=SEED,
            baseline=0.0,
            target="each image's top class",
            floor_rows=25 * args.images,
        ),  # fmt: skip
        systems={k: dict(seconds=summary(times[k]), **counted[k]) for k in fns},
        ratios=ratios,
        attributions=agreement,
    )


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--model", choices=("convnet", "resnet18"), default="convnet")
    parser.add_argument("--images", type=int, default=None, help="B (default 4, quick 2)")
    parser.add_argument("--n-samples", type=int, default=None, help="N per image (default 500, quick 40)")
    parser.add_argument("--size", type=int, default=None, help="image side, a multiple of 8 (default 64)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, quick 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--no-mask-sizes", type=int, nargs="*", default=None, help="image sides without feature_mask (32 224; quick 8)"
    )
    args = size_defaults(parser.parse_args(), dict(images=(2, 4), n_samples=(40, 500), size=(64, 64), reps=(1, 3)))
    args.no_mask_sizes = args.no_mask_sizes if args.no_mask_sizes is not None else [8] if args.quick else [32, 224]
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    captum, captum_missing = optional_module("captum.attr")
    model = convnet(device) if args.model == "convnet" else vision_model(args.model, device)
    calls = Calls(model)
    x = torch.rand(args.images, 3, args.size, args.size, generator=torch.Generator().manual_seed(0)).to(device)
    with torch.inference_mode():
        target = model(x).argmax(1).tolist()
    calls.take()
    invariant = batch_invariant(model, x)
    calls.take()
    fns = systems(model, x, target, args.n_samples, captum)
    times, counted, attributions = interleaved(fns, args.reps, device, calls)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = attributions["compat_default"]
    agreement = {
        k: dict(
            bit_identical=bool(torch.equal(base, v)),
            max_abs_diff=float((base - v).abs().max()),
            max_abs=float(v.abs().max()),
            nonzero_fraction=float((v != 0).float().mean()),
        )
        for k, v in attributions.items()
    }
    ratios = {f"{k}_over_compat_default": med[k] / med["compat_default"] for k in med if k != "compat_default"}
    if "captum" in med:
        ratios.update({f"captum_over_{k}": med["captum"] / med[k] for k in med if k.startswith("compat")})
    result = dict(
        header(device),
        threads=torch.get_num_threads() if device.type == "cpu" else None,
        load_average_1_5_15=load_average(),
        load_average_1_5_15_at_start=load_before,
        quick=args.quick,
        captum_missing=captum_missing,
        setup=dict(
            model=args.model,
            images=args.images,
            size=args.size,
            features=(args.size // CELL) ** 2,
            n_samples=args.n_samples,
            reps=args.reps,
            seed=SEED,
            baseline=0.0,
            target="each image's top class",
            floor_rows=args.images * args.n_samples,
            reduced=(args.images, args.n_samples, args.size) != (4, 500, 64),  # from the sizes named above
        ),
        systems={k: dict(seconds=summary(times[k]), **counted[k]) for k in fns},
        ratios=ratios,
        attributions_vs_compat_default=agreement,
        # False: the model's own arithmetic depends on the batch size (one row vs a batch), which is what
        # separates compat_ppe1's bits from the chunked systems'
        model_same_bits_one_row_or_batched=invariant,
        no_feature_mask={f"3x{n}x{n}": no_mask(model, n, args, device, calls, captum) for n in args.no_mask_sizes},
    )
    for k, v in med.items():
        print(f"{k}: {v:.3f} s, {counted[k]['model_calls']} model calls, rows: calls {counted[k]['calls_by_rows']}")
    print("ratios:", {k: round(v, 2) for k, v in ratios.items()})
    print("attributions vs compat_default:", agreement)
    for size, part in result["no_feature_mask"].items():
        print(size, {k: round(statistics.median(v["seconds"]["runs"]), 3) for k, v in part["systems"].items()})
        print(size, "ratios:", {k: round(v, 2) for k, v in part["ratios"].items()})
        print(size, "attributions:", part["attributions"])
    print(write(f"captum_switch_{device.type}{'_quick' if args.quick else ''}.json", result, args.out))


if __name__ == "__main__":
    main()
