"""Overhead of the training-loop integrations: ``TensorBoardProbe`` and Lightning's ``ExplainCallback``.

The small CIFAR-sized CNN of ``bench_probe_overhead.py`` (conv-BN-ReLU x2, pooling, linear; 32x32 RGB,
batch 64, SGD with momentum) and its probe (P fixed images, 4x4 grid features, N samples). Three parts:

1. TensorBoardProbe, idle step (the hook on a step that does not explain). Each repetition times, back to
   back: ``plain`` (K training steps), ``step_plus_idle_hook`` (K training steps, each followed by a
   ``TensorBoardProbe`` call that does not explain) and ``idle_hook`` (M hook calls alone, in a loop: one
   call is far below the timer's noise). Reported: seconds per step, microseconds per idle call (the
   Python loop included) and the idle call over a plain step.
2. TensorBoardProbe, explaining step (``every=1``), with ``log_images`` True and False, each with its own
   ``SummaryWriter`` in a temporary folder: after a training step, one hook call; its
   ``last["explain_seconds"]`` and ``last["log_seconds"]`` (the explanation, and the writing of scalars
   and heatmaps), the call's wall time and, apart, the ``writer.flush()`` after it (the hook never
   flushes). Parts 1 and 2 are interleaved within each repetition.
3. Lightning: a LightningModule over the same CNN, ``Trainer(max_steps=S, logger=TensorBoardLogger(tmp),
   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)``; the wall time of
   ``fit`` with no callback (``none``), with ``ExplainCallback(every=S + 1)`` (``idle``: it explains at
   step 0 only) and with ``ExplainCallback(every=k)`` (``every_k``: steps 0, k, 2k, ..., S), interleaved
   per repetition; the module logs its loss (``self.log``). Per explanation: (every_k - idle) /
   (explanations of every_k - 1). Idle overhead per step: (idle - none - the idle fit's one explanation,
   as the callback timed it, - its logging, as part 2 timed it) / S, a small difference of noisy fits;
   so the callback's ``on_train_batch_end`` on a step that does not explain is also timed directly (M
   calls in a loop, on the trainer of the idle fit), without Lightning's own dispatch to it.

Timings are synchronised on CUDA. The JSON holds medians, min/max and every run, the ratios (idle
overhead / plain step; logging seconds / explaining seconds) and the machine's load average.

    python benchmarks/bench_integrations_overhead.py --threads 1   # CPU, writes results/integrations_overhead_cpu.json
    python benchmarks/bench_integrations_overhead.py --device cuda
    python benchmarks/bench_integrations_overhead.py --quick --out /tmp/quick
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from torchlime.engine.config import Call
from torchlime.integrations.probe import ProbeExplainer
from torchlime.integrations.tensorboard_probe import TensorBoardProbe, summary_writer

from benchmarks.bench_probe_overhead import Trainer, grid_features, make_model
from benchmarks.common import (
    common_args,
    device_arg,
    header,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    summary,
    sync,
    timed,
    write,
)

NEVER = 10**9  # a probe period no timed step reaches: the hook stays idle


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def tensorboard_parts(args, device: torch.device, images: torch.Tensor, tmp: Path) -> dict[str, Any]:
    """Parts 1 and 2, interleaved per repetition."""
    torch.manual_seed(0)
    loop = Trainer(device, args.batch, None)  # the training loop of bench_probe_overhead, no probe
    feats = grid_features(32, 4, device)

    def probe(every: int) -> ProbeExplainer:
        return ProbeExplainer(loop.model, images, feats, every=every, call=Call(n_samples=args.n))

    idle_tb = TensorBoardProbe(probe(NEVER), summary_writer(str(tmp / "idle")))
    explaining = {
        flag: TensorBoardProbe(probe(1), summary_writer(str(tmp / f"images_{flag}")), log_images=flag)
        for flag in (True, False)
    }
    hook_steps = list(range(1, args.hook_calls + 1))  # never a multiple of NEVER: no call explains
    counter = 0

    def plain() -> None:
        for _ in range(args.steps_per_timing):
            loop.step()

    def step_plus_idle_hook() -> None:
        for s in hook_steps[: args.steps_per_timing]:
            loop.step()
            idle_tb(s)

    def idle_hook() -> None:
        for s in hook_steps:
            idle_tb(s)

    def explain_and_log(tb: TensorBoardProbe) -> dict[str, float]:
        nonlocal counter
        loop.step()
        sync(device)  # the hook's own timer must not wait for the training step's queued kernels
        counter += 1
        wall = timed(lambda: tb(counter), device)
        if tb.last.get("step") != float(counter):
            raise RuntimeError("the TensorBoardProbe call did not explain")
        flush = timed(tb.flush, device)
        return dict(
            explain_seconds=tb.last["explain_seconds"],
            log_seconds=tb.last["log_seconds"],
            call_seconds=wall,
            flush_seconds=flush,
        )

    idle_fns = dict(plain=plain, step_plus_idle_hook=step_plus_idle_hook, idle_hook=idle_hook)
    for fn in idle_fns.values():  # warm-up
        fn()
    for tb in explaining.values():
        explain_and_log(tb)
        explain_and_log(tb)
    idle_times: dict[str, list[float]] = {k: [] for k in idle_fns}
    expl: dict[bool, dict[str, list[float]]] = {flag: {} for flag in explaining}
    for rep in range(args.reps):
        for key, fn in idle_fns.items():
            idle_times[key].append(timed(fn, device))
        for flag, tb in explaining.items():
            for key, value in explain_and_log(tb).items():
                expl[flag].setdefault(key, []).append(value)
        print(
            f"rep {rep}: step {idle_times['plain'][-1] / args.steps_per_timing * 1e3:.1f} ms, "
            f"idle hook {idle_times['idle_hook'][-1] / args.hook_calls * 1e6:.2f} us; "
            + "; ".join(
                f"log_images={flag}: explain {v['explain_seconds'][-1]:.3f} s, log {v['log_seconds'][-1] * 1e3:.1f} ms"
                for flag, v in expl.items()
            ),
            flush=True,
        )
    for tb in [idle_tb, *explaining.values()]:
        tb.probe.history.clear()
        tb.writer.close()

    per_step = {k: [t / args.steps_per_timing for t in idle_times[k]] for k in ("plain", "step_plus_idle_hook")}
    per_call = [t / args.hook_calls for t in idle_times["idle_hook"]]
    plain_step = statistics.median(per_step["plain"])
    hook = statistics.median(per_call)
    idle = dict(
        steps_per_timing=args.steps_per_timing,
        hook_calls_per_timing=args.hook_calls,
        seconds_per_step={k: summary(v) for k, v in per_step.items()},
        idle_hook_seconds_per_call=summary(per_call),
        idle_hook_microseconds_per_call=hook * 1e6,
        idle_hook_over_plain_step=hook / plain_step,
        # the same overhead read off whole steps: far below the noise of a training step
        step_plus_idle_hook_minus_plain_seconds=statistics.median(per_step["step_plus_idle_hook"]) - plain_step,
    )
    explaining_out = {}
    for flag, runs in expl.items():
        ratios = [lg / ex for lg, ex in zip(runs["log_seconds"], runs["explain_seconds"])]
        explaining_out[f"log_images_{str(flag).lower()}"] = dict(
            **{k: summary(v) for k, v in runs.items()},
            logging_over_explaining_median_of_ratios=statistics.median(ratios),
            logging_over_explaining=statistics.median(runs["log_seconds"]) / statistics.median(runs["explain_seconds"]),
            call_over_plain_step=statistics.median(runs["call_seconds"]) / plain_step,
        )
    return dict(idle=idle, explaining=explaining_out)


def lightning_part(args, device: torch.device, images: torch.Tensor, tmp: Path, log_seconds: float) -> dict[str, Any]:
    """Part 3: ``Trainer.fit`` with no callback, an idle ``ExplainCallback`` and one explaining every k steps.

    ``log_seconds``: what logging one explanation with heatmaps costs (part 2), subtracted from the idle fit
    with the explanation time the callback measured itself, to leave the idle overhead.
    """
    pl, why = optional_module("lightning.pytorch")
    if pl is None:
        return dict(skipped=f"lightning is not installed ({why})")
    from lightning.pytorch.loggers import TensorBoardLogger

    from torchlime.integrations.lightning_callback import ExplainCallback

    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)  # "GPU available: ..." and the like
    warnings.filterwarnings("ignore", module=r"lightning\..*")
    warnings.filterwarnings("ignore", message=r".*(num_workers|log_every_n_steps|does not have many workers).*")

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_model(torch.device("cpu"))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            self.log("train_loss", loss)  # as a real module does: the logger is in use in every variant
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    g = torch.Generator().manual_seed(2)
    steps = args.lightning_steps
    x = torch.randn(steps * args.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (steps * args.batch,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=args.batch, shuffle=False)
    feats = grid_features(32, 4, torch.device("cpu"))
    accelerator = "cuda" if device.type == "cuda" else "cpu"
    devices = [device.index or 0] if device.type == "cuda" else 1
    fits = 0

    def fit(every: int | None, max_steps: int = steps) -> tuple[float, Any, Any]:
        nonlocal fits
        fits += 1
        cb = None if every is None else ExplainCallback(images.cpu(), feats, every=every, call=Call(n_samples=args.n))
        trainer = pl.Trainer(
            max_steps=max_steps,
            logger=TensorBoardLogger(str(tmp), name=f"fit{fits}"),
            callbacks=[] if cb is None else [cb],
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            accelerator=accelerator,
            devices=devices,
            default_root_dir=str(tmp),
        )
        module = Module()
        seconds = timed(lambda: trainer.fit(module, loader), device)
        return seconds, cb, trainer

    fit(2, max_steps=2)  # warm-up: Lightning's code paths, the first explanation and heatmap
    variants = dict(none=None, idle=steps + 1, every_k=args.lightning_every)
    times: dict[str, list[float]] = {k: [] for k in variants}
    explanations: dict[str, list[int]] = {k: [] for k in variants if k != "none"}
    explain_seconds: dict[str, list[float]] = {k: [] for k in explanations}
    each: dict[str, list[float]] = dict(first=[], later=[])  # explain_fn's own seconds_total per explanation
    hook_per_call: list[float] = []
    for rep in range(args.lightning_reps):
        for key, every in variants.items():
            seconds, cb, trainer = fit(every)
            times[key].append(seconds)
            if cb is not None:
                explanations[key].append(len(cb.history))
                explain_seconds[key].append(cb.seconds_explaining)
                for i, (_, exp) in enumerate(cb.history):
                    if exp.meta.get("seconds_total") is not None:
                        each["first" if i == 0 else "later"].append(float(exp.meta["seconds_total"]))
            if key == "idle":  # the callback's hook on a step that does not explain, timed alone
                assert trainer.global_step % cb.every != 0
                module = trainer.lightning_module

                def hooks(cb: Any = cb, trainer: Any = trainer, module: Any = module) -> None:
                    for _ in range(args.hook_calls):
                        cb.on_train_batch_end(trainer, module, None, None, 0)

                hook_per_call.append(timed(hooks, device) / args.hook_calls)
        print(
            f"lightning rep {rep}: "
            + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items())
            + f"; idle hook {hook_per_call[-1] * 1e6:.2f} us",
            flush=True,
        )

    med = {k: statistics.median(v) for k, v in times.items()}
    n_k, n_idle = explanations["every_k"][0], explanations["idle"][0]
    per_explanation = (med["every_k"] - med["idle"]) / (n_k - n_idle)
    paired_expl = [(k - i) / (n_k - n_idle) for k, i in zip(times["every_k"], times["idle"])]
    # the idle fit less the fit without callback, less its one explanation (the callback's own timer) and its logging
    paired_idle = [
        (i - n - e - n_idle * log_seconds) / steps
        for i, n, e in zip(times["idle"], times["none"], explain_seconds["idle"])
    ]
    idle_per_step = (
        med["idle"] - med["none"] - statistics.median(explain_seconds["idle"]) - n_idle * log_seconds
    ) / steps
    step = med["none"] / steps
    hook = statistics.median(hook_per_call)
    return dict(
        max_steps=steps,
        repetitions=args.lightning_reps,
        every_k=args.lightning_every,
        idle_every=steps + 1,
        logger="TensorBoardLogger",
        log_images=True,
        fit_seconds={k: summary(v) for k, v in times.items()},
        explanations_per_fit=dict(none=0, idle=n_idle, every_k=n_k),
        callback_seconds_explaining={k: summary(v) for k, v in explain_seconds.items()},
        seconds_per_step_no_callback=step,
        per_explanation_seconds=per_explanation,
        per_explanation_seconds_paired_median=statistics.median(paired_expl),
        # explain_fn alone, from the callback's own timer: the rest of per_explanation is logging
        per_explanation_explain_only_seconds=statistics.median(
            [s / n for s, n in zip(explain_seconds["every_k"], explanations["every_k"])]
        ),
        per_explanation_in_training_steps=per_explanation / step,
        explain_fn_seconds_first_of_fit=summary(each["first"]) if each["first"] else None,
        explain_fn_seconds_later=summary(each["later"]) if each["later"] else None,
        logging_seconds_subtracted_per_explanation=log_seconds,
        idle_overhead_per_step_seconds_from_fits=idle_per_step,
        idle_overhead_per_step_seconds_from_fits_paired_median=statistics.median(paired_idle),
        idle_overhead_from_fits_over_step=idle_per_step / step,
        fit_noise_seconds_per_step=(max(times["none"]) - min(times["none"])) / steps,
        # True: the fits cannot resolve the idle overhead here; the direct figure below is the one to quote
        idle_overhead_from_fits_within_noise=abs(idle_per_step) < (max(times["none"]) - min(times["none"])) / steps,
        idle_hook_seconds_per_call=summary(hook_per_call),
        idle_hook_microseconds_per_call=hook * 1e6,
        idle_hook_over_step=hook / step,
    )


def main() -> None:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    ap.add_argument("--batch", type=int, default=64, help="training batch size")
    ap.add_argument("--probe-images", type=int, default=4)
    ap.add_argument("--n", type=int, default=None, help="LIME samples per probe image (default 1000; quick: 16)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions of parts 1-2 (default 11; quick: 1)")
    ap.add_argument(
        "--steps-per-timing", type=int, default=None, help="training steps per timing in part 1 (default 10; quick: 2)"
    )
    ap.add_argument(
        "--hook-calls", type=int, default=None, help="idle hook calls per timing (default 20000; quick: 500)"
    )
    ap.add_argument("--lightning-steps", type=int, default=None, help="max_steps of each fit (default 60; quick: 4)")
    ap.add_argument("--lightning-every", type=int, default=None, help="k of the explaining fit (default 20; quick: 2)")
    ap.add_argument("--lightning-reps", type=int, default=None, help="default 5; quick: 1")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's; quick on CPU: 1); 1 is steadier on a loaded machine",
    )
    args = ap.parse_args()
    size_defaults(
        args,
        dict(
            n=(16, 1000),
            reps=(1, 11),
            steps_per_timing=(2, 10),
            hook_calls=(500, 20000),
            lightning_steps=(4, 60),
            lightning_every=(2, 20),
            lightning_reps=(1, 5),
        ),
    )
    device = device_arg(args.device)
    smoke_threads(args, device)
    load_before = load_average()
    t_start = time.perf_counter()
    images = torch.rand(args.probe_images, 3, 32, 32, generator=torch.Generator().manual_seed(1)).to(device)

    with tempfile.TemporaryDirectory(prefix="torchlime_integrations_") as tmp:
        tb = tensorboard_parts(args, device, images, Path(tmp) / "tensorboard")
        threads_before_lightning = torch.get_num_threads()
        log_seconds = tb["explaining"]["log_images_true"]["log_seconds"]["median"]
        lit = lightning_part(args, device, images, Path(tmp) / "lightning", log_seconds)

    idle, expl = tb["idle"], tb["explaining"]
    out = header(device)
    out.update(
        benchmark="integrations_overhead",
        quick=args.quick,
        torch_threads=threads_before_lightning,
        torch_threads_after_lightning=torch.get_num_threads(),
        load_average_1_5_15=load_average(),
        load_average_1_5_15_at_start=load_before,
        wall_seconds=time.perf_counter() - t_start,
        versions=dict(
            tensorboard=getattr(optional_module("tensorboard")[0], "__version__", None),
            lightning=getattr(optional_module("lightning")[0], "__version__", None),
        ),
        setup=dict(
            model="small CNN (2 conv-BN-ReLU, 10 classes), as bench_probe_overhead",
            train_batch=args.batch,
            image="3x32x32",
            probe_images=args.probe_images,
            n_samples=args.n,
            features="4x4 grid (16)",
            explain_fn="torchlime.explain (default target)",
            writer="SummaryWriter in a temporary folder",
            repetitions=args.reps,
        ),
        tensorboard_probe=tb,
        lightning=lit,
        ratios=dict(
            tensorboard_idle_hook_over_plain_step=idle["idle_hook_over_plain_step"],
            lightning_idle_hook_over_step=lit.get("idle_hook_over_step"),
            lightning_idle_overhead_from_fits_over_step=lit.get("idle_overhead_from_fits_over_step"),
            logging_over_explaining={k: v["logging_over_explaining"] for k, v in expl.items()},
            lightning_per_explanation_over_explain_only=ratio(
                lit.get("per_explanation_seconds"), lit.get("per_explanation_explain_only_seconds")
            ),
        ),
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    name = f"integrations_overhead_{device.type}{'_quick' if args.quick else ''}.json"
    path = write(name, out, args.out)
    print(f"wrote {path}")
    print(
        f"plain step {idle['seconds_per_step']['plain']['median'] * 1e3:.1f} ms; TensorBoardProbe idle call "
        f"{idle['idle_hook_microseconds_per_call']:.2f} us ({idle['idle_hook_over_plain_step']:.2e} of a step)"
    )
    for key, v in expl.items():
        print(
            f"{key}: explain {v['explain_seconds']['median']:.3f} s, "
            f"log {v['log_seconds']['median'] * 1e3:.1f} ms (logging/explaining {v['logging_over_explaining']:.3f}), "
            f"flush {v['flush_seconds']['median'] * 1e3:.1f} ms"
        )
    if "skipped" in lit:
        print(f"lightning: {lit['skipped']}")
    else:
        print(
            f"lightning: step {lit['seconds_per_step_no_callback'] * 1e3:.1f} ms; per explanation "
            f"{lit['per_explanation_seconds']:.3f} s "
            f"(explain alone {lit['per_explanation_explain_only_seconds']:.3f} s); "
            f"idle overhead per step from fits {lit['idle_overhead_per_step_seconds_from_fits'] * 1e3:.2f} ms; "
            f"idle hook {lit['idle_hook_microseconds_per_call']:.2f} us"
        )


if __name__ == "__main__":
    main()
