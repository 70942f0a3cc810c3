"""GPU latency: one 299x299 image, inception_v3, N=1000, end to end (SLIC included), against its floor.

For every variant the script times

* torchlime: ``explain_image(model, image, n_samples=N, normalize=(mean, std), accelerate=...)``
  with everything else at its default (SLIC on the device, measured chunk sizes), until the
  coefficients are on the host; ``exp.meta`` gives the chunk size and the peak CUDA memory;
* its own forward floor: the bare forward pass of the same N perturbed images (built
  beforehand, normalised, in the dtype and layout torchlime writes for that model, on the
  device) through the same (wrapped) model under ``torch.inference_mode()``, in chunks of the
  fastest of a few sizes (the chunk torchlime chose is one of them).

Variants: ``default`` (the plain fp32 model), ``fast`` (``accelerate="fast"``: bf16 autocast,
channels-last and torch.compile on CUDA), ``labels`` (the default with the SLIC labels given: no
segmentation in the call), ``engine_graphs`` (``accelerate="cuda_graphs"`` with the same labels: the
stages after the plan replayed as one CUDA graph, which needs a feature map of fixed size, so the
labels are given; its record's ``cuda_graph`` says whether the timed calls replayed) and
``torchlime.accel.Accelerated`` combinations (bf16 autocast, channels_last, compile, cuda_graphs;
compiled and graphed variants run fixed chunks of ``--compile-chunk``). Side by side, on the same
image, segmentation (torchlime's SLIC labels) and N: lime's ``LimeImageExplainer`` (classifier on
the device, batch 10 = its default and a large batch) and captum's ``Lime`` (model on the device,
perturbations_per_eval 1 = its default and a large value), each at its own defaults otherwise (lime:
top 5 labels, mean-colour fill; captum: fill 0, Lasso); both see softmax probabilities.

Protocol: warm-up (every variant until its chunk size is measured and compiled, every floor
size, every anchor once on few samples), then ``--reps`` interleaved repetitions (the anchors
in the first ``--anchor-reps``), synchronised; medians. Goals (stored and printed next to the
figures; this script claims nothing): every variant at most 5 ms and at most 1.1x beyond its
own floor, accelerate="fast" <= 0.075 s, one 299x299 image segmented in <= 3 ms.

    python benchmarks/bench_gpu_latency.py                         # cuda, every variant, lime, captum
    python benchmarks/bench_gpu_latency.py --variants default fast bf16_channels_last
    python benchmarks/bench_gpu_latency.py --variants compile --no-anchors --tag compiled
    python benchmarks/bench_gpu_latency.py --device cpu --quick --out /tmp/quick   # smoke test
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import time
import traceback
import warnings
from typing import Any, Callable

import torch

from torchlime.accel import Accelerated
from torchlime.image import explain_image
from torchlime.image.segments import slic

from benchmarks.common import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Normalize,
    best_chunk,
    common_args,
    device_arg,
    exit_if_stopped,
    formatted,
    forward_rows,
    goal,
    header,
    normalized,
    optional_module,
    perturbed_images,
    size_defaults,
    smoke_threads,
    summary,
    test_image,
    timed,
    until_stopped,
    vision_args,
    vision_model,
    warm_up,
    write,
)

NORMALIZE = (IMAGENET_MEAN, IMAGENET_STD)
BF16 = torch.bfloat16

#: name -> how torchlime runs the model: ``accelerate`` (explain_image's keyword) or
#: ``options`` (``Accelerated`` keywords; compiled / graphed ones get ``chunk_size``)
VARIANTS: dict[str, dict[str, Any]] = {
    "default": dict(),
    "fast": dict(accelerate="fast"),
    "labels": dict(given_segments=True),
    "engine_graphs": dict(accelerate="cuda_graphs", given_segments=True),
    "bf16": dict(options=dict(autocast=BF16)),
    "channels_last": dict(options=dict(channels_last=True)),
    "bf16_channels_last": dict(options=dict(autocast=BF16, channels_last=True)),
    "cuda_graphs": dict(options=dict(cuda_graphs=True)),
    "bf16_channels_last_cuda_graphs": dict(options=dict(autocast=BF16, channels_last=True, cuda_graphs=True)),
    "compile": dict(options=dict(compile=True)),
    "bf16_channels_last_compile": dict(options=dict(autocast=BF16, channels_last=True, compile=True)),
    "bf16_channels_last_compile_cuda_graphs": dict(
        options=dict(autocast=BF16, channels_last=True, compile=True, cuda_graphs=True)
    ),
}
COMPILED = [k for k, v in VARIANTS.items() if v.get("options", {}).get("compile")]
QUICK_VARIANTS = ["default", "fast", "bf16_channels_last", "labels", "engine_graphs"]
#: what ``accelerate="fast"`` wraps a model in on CUDA (``torchlime.accel.accelerate_model``)
FAST = dict(autocast=BF16, channels_last=True, compile=True)


def build_variant(name: str, model_name: str, device: torch.device, fixed_chunk: int) -> dict[str, Any]:
    """A fresh torchvision model (random weights, seed 0) set up for one variant.

    Returns ``model`` (what explain_image gets), ``accelerate`` (its keyword), ``floor_model``
    (what the floor forwards: the same object, or for "fast" the wrapper accelerate="fast"
    builds, with the same options on the same module) and ``fixed`` (the only chunk size of
    compiled / graphed variants, else None).
    """
    spec = VARIANTS[name]
    base = vision_model(model_name, device)
    if spec.get("accelerate") == "fast":
        floor_model = Accelerated(base, **FAST) if device.type == "cuda" else base  # CPU: "fast" is the model
        return dict(model=base, accelerate="fast", floor_model=floor_model, fixed=None)
    if spec.get("accelerate") == "cuda_graphs":  # the engine graphs its stages with the model as given
        return dict(model=base, accelerate="cuda_graphs", floor_model=base, fixed=None)
    options = dict(spec.get("options", {}))
    if not options:
        return dict(model=base, accelerate=None, floor_model=base, fixed=None)
    fixed = None
    if options.get("compile") or options.get("cuda_graphs"):
        options["chunk_size"] = fixed = fixed_chunk
    model = Accelerated(base, **options).eval()
    return dict(model=model, accelerate=None, floor_model=model, fixed=fixed)


def explain_fn(
    model: Callable,
    images: torch.Tensor,
    n: int,
    accelerate: str | None,
    store: dict,
    batch_size: int | None = None,
    segments: Any = None,
) -> Callable[[], None]:
    """One end-to-end explain_image call (``segments``: explain_image's, None its default); keeps the
    last ``exp.meta`` in ``store``.
    """
    given = {} if segments is None else dict(segments=segments)

    def run() -> None:
        exp = explain_image(
            model, images, n_samples=n, normalize=NORMALIZE, accelerate=accelerate, batch_size=batch_size, **given
        )
        exp.coef.sum().item()  # the result on the host
        store["meta"] = exp.meta

    return run


def lime_fn(
    model: Callable, image: torch.Tensor, segments: torch.Tensor, n: int, batch: int, device: torch.device
) -> Callable[[], None]:
    """Lime's LimeImageExplainer at its defaults (top 5 labels, mean-colour fill), our segments,
    the classifier on ``device`` returning probabilities.
    """
    from lime import lime_image

    img = image[0].permute(1, 2, 0).double().cpu().numpy()
    seg = segments.reshape(image.shape[-2:]).cpu().numpy()

    def classifier_fn(batch_np):
        x = torch.from_numpy(batch_np).permute(0, 3, 1, 2).float().to(device)
        with torch.inference_mode():
            return model(x).softmax(1).double().cpu().numpy()

    def run() -> None:
        explainer = lime_image.LimeImageExplainer(random_state=0)
        explainer.explain_instance(img, classifier_fn, segmentation_fn=lambda _: seg, num_samples=n, batch_size=batch)

    return run


def captum_fn(
    model: Callable, image: torch.Tensor, segments: torch.Tensor, n: int, ppe: int, device: torch.device
) -> Callable[[], None]:
    """Captum's Lime at its defaults (fill 0, Lasso), our segments as the feature mask, on ``device``."""
    from captum.attr import Lime

    x = image.to(device)
    mask = segments.reshape(1, 1, *image.shape[-2:]).to(device)
    with torch.inference_mode():
        target = int(model(x).argmax())

    def run() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            attr = Lime(lambda v: model(v).softmax(1)).attribute(
                x, target=target, feature_mask=mask, n_samples=n, perturbations_per_eval=ppe
            )
        attr.sum().item()

    return run


def roomy_compile_cache(entries: int = 64) -> None:
    """Every compiled variant compiles the same torchvision ``forward`` (for other wrappers,
    dtypes, layouts and shapes): let torch.compile keep that many compiled versions of it instead
    of its default 8, past which it would quietly run the model uncompiled.
    """
    from torch._dynamo import config

    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(config, name):
            setattr(config, name, max(entries, getattr(config, name)))
    if hasattr(config, "accumulated_cache_size_limit"):
        config.accumulated_cache_size_limit = max(8 * entries, config.accumulated_cache_size_limit)


def settings(device: torch.device) -> dict:
    """Backend switches that change speed, recorded with every result."""
    out = dict(
        cudnn_benchmark=torch.backends.cudnn.benchmark,
        deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
    )
    try:
        from torch._dynamo import config

        out.update(
            {
                f"dynamo_{k}": getattr(config, k)
                for k in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit")
                if hasattr(config, k)
            }
        )
    except ImportError:
        pass
    if device.type == "cuda":
        out.update(
            matmul_allow_tf32=torch.backends.cuda.matmul.allow_tf32, cudnn_allow_tf32=torch.backends.cudnn.allow_tf32
        )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cuda")
    vision_args(ap, "inception_v3", 299)
    ap.add_argument("--n", type=int, default=None, help="samples per explanation (default 1000; quick: 16)")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 10; quick: 1)")
    ap.add_argument("--anchor-reps", type=int, default=3, help="repetitions that include lime and captum")
    ap.add_argument(
        "--variants",
        nargs="+",
        default=None,
        choices=list(VARIANTS),
        help=f"default: all; quick: {' '.join(QUICK_VARIANTS)}",
    )
    ap.add_argument(
        "--chunk-sizes",
        type=int,
        nargs="+",
        default=None,
        help="floor chunk sizes tried (default 64 128 256 512 1000; quick: 8 16), plus torchlime's",
    )
    ap.add_argument(
        "--compile-chunk",
        type=int,
        default=None,
        help="fixed chunk of compiled / graphed variants (default 256; quick: 8)",
    )
    ap.add_argument("--lime-batches", type=int, nargs="+", default=[10, 250], help="lime batch sizes (10: default)")
    ap.add_argument(
        "--captum-ppes", type=int, nargs="+", default=[1, 250], help="captum perturbations_per_eval (1: default)"
    )
    ap.add_argument("--no-anchors", action="store_true", help="skip lime and captum")
    ap.add_argument("--tag", default="", help="added to the JSON name (gpu_latency_<tag>_<device>.json)")
    args = ap.parse_args(argv)
    quick = args.quick
    defaults = dict(
        model=("resnet18", "inception_v3"),
        size=(64, 299),
        n=(16, 1000),
        reps=(1, 10),
        chunk_sizes=([8, 16], [64, 128, 256, 512, 1000]),
        compile_chunk=(8, 256),
        variants=(QUICK_VARIANTS, list(VARIANTS)),
    )
    size_defaults(args, defaults, quick=quick)
    if quick:
        args.anchor_reps = min(args.anchor_reps, 1)
        args.lime_batches = [b for b in args.lime_batches if b <= args.n] or [args.n]
        args.captum_ppes = [p for p in args.captum_ppes if p <= args.n] or [args.n]
    return args


def measure(
    args: argparse.Namespace,
    device: torch.device,
    image: torch.Tensor,
    segments: torch.Tensor,
    perturbed: torch.Tensor,
    st: dict[str, dict],
) -> None:
    """Warm-ups, then the interleaved repetitions, filling ``st`` as it goes (``variants``, ``errors``,
    ``skipped``, ``anchor_warm``, ``times``, ``anchor_times``, ``peak``): a stop keeps what finished.
    """
    variants, errors, skipped = st["variants"], st["errors"], st["skipped"]
    for name in args.variants:
        try:
            t0 = time.perf_counter()
            v = build_variant(name, args.model, device, args.compile_chunk)
            v["store"] = {}
            given = segments if VARIANTS[name].get("given_segments") else None
            v["explain"] = explain_fn(v["model"], image, args.n, v["accelerate"], v["store"], segments=given)
            chosen = warm_up(v["explain"], v["store"])
            v["rows"] = formatted(perturbed, v["floor_model"])
            sizes = [v["fixed"]] if v["fixed"] else [*args.chunk_sizes, chosen]
            v["floor_batch"], v["floor_candidates"] = best_chunk(
                lambda b, v=v: forward_rows(v["floor_model"], v["rows"], b), sizes, device
            )
            v["floor"] = forward_rows(v["floor_model"], v["rows"], v["floor_batch"])
            v["warmup_seconds"] = time.perf_counter() - t0
            variants[name] = v
            print(
                f"warm-up {name}: {v['warmup_seconds']:.1f} s, torchlime chunk {chosen}, "
                f"floor chunk {v['floor_batch']}",
                flush=True,
            )
        except Exception as err:  # noqa: BLE001 - one broken variant must not lose the others
            errors[name] = f"{type(err).__name__}: {err}"
            traceback.print_exc()

    anchors: dict[str, Callable[[], None]] = {}
    warm: dict[str, Callable[[], None]] = {}
    if args.no_anchors:
        skipped.update(lime="--no-anchors", captum="--no-anchors")
    else:
        anchor_model = Normalize(vision_model(args.model, device)).to(device).eval()
        for pkg, probe in (("lime", "lime.lime_image"), ("captum", "captum.attr")):
            module, why = optional_module(probe)
            if module is None:
                skipped[pkg] = f"not installed ({why})"
        warm_n = min(args.n, 20)
        if "lime" not in skipped:
            for b in args.lime_batches:
                anchors[f"lime_batch{b}"] = lime_fn(anchor_model, image, segments, args.n, b, device)
                warm[f"lime_batch{b}"] = lime_fn(anchor_model, image, segments, warm_n, min(b, warm_n), device)
        if "captum" not in skipped:
            for p in args.captum_ppes:
                anchors[f"captum_ppe{p}"] = captum_fn(anchor_model, image, segments, args.n, p, device)
                warm[f"captum_ppe{p}"] = captum_fn(anchor_model, image, segments, warm_n, min(p, warm_n), device)
    anchor_warm = st["anchor_warm"]
    for key in list(anchors):  # warm-up on few samples
        try:
            anchor_warm[key] = timed(warm[key], device)
        except Exception as err:  # noqa: BLE001
            errors[key] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
            del anchors[key]

    times, anchor_times, peak = st["times"], st["anchor_times"], st["peak"]
    times.update({name: dict(torchlime=[], floor=[]) for name in variants})
    anchor_times.update({key: [] for key in anchors})
    for rep in range(args.reps):
        for name, v in variants.items():
            times[name]["torchlime"].append(timed(v["explain"], device))
            times[name]["floor"].append(timed(v["floor"], device))
            peak[name] = v["store"]["meta"].get("peak_memory")
            print(
                f"rep {rep} {name}: torchlime {times[name]['torchlime'][-1]:.4f} s, "
                f"floor {times[name]['floor'][-1]:.4f} s",
                flush=True,
            )
        if rep < args.anchor_reps:
            for key, fn in anchors.items():
                anchor_times[key].append(timed(fn, device))
                print(f"rep {rep} {key}: {anchor_times[key][-1]:.3f} s", flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = device_arg(args.device)
    smoke_threads(args, device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    if any(v in ("fast", *COMPILED) for v in args.variants):
        roomy_compile_cache()
    image = test_image(args.size).to(device)

    # segmentation alone (the first stage of every torchlime run), and the labels every system shares
    segments = slic(image)
    seg_times = [timed(lambda: slic(image), device) for _ in range(max(10, min(args.reps, 50)))]
    n_segments = int(segments.max()) + 1
    with torch.inference_mode():  # an inference tensor: the floor's rows need no copy (common.formatted)
        perturbed = normalized(perturbed_images(image, segments, args.n, fill="zero"))  # explain_image's fill: 0

    st: dict[str, dict] = {
        k: {} for k in ("variants", "errors", "skipped", "anchor_warm", "times", "anchor_times", "peak")
    }
    stop: dict[str, Any] = {}
    with until_stopped(stop):
        measure(args, device, image, segments, perturbed, st)
    variants, errors, skipped, anchor_warm, peak = (
        st[k] for k in ("variants", "errors", "skipped", "anchor_warm", "peak")
    )
    times = {k: t for k, t in st["times"].items() if t["torchlime"] and t["floor"]}
    anchor_times = {k: t for k, t in st["anchor_times"].items() if t}

    seg = summary(seg_times)
    results = {}
    for name, t in times.items():
        v = variants[name]
        tl, fl = summary(t["torchlime"]), summary(t["floor"])
        over, ratio = tl["median"] - fl["median"], tl["median"] / fl["median"]
        results[name] = dict(
            how=dict(
                accelerate=v["accelerate"],
                fixed_chunk=v["fixed"],
                options={k: str(o) for k, o in VARIANTS[name].get("options", {}).items()},
            ),
            seconds=dict(torchlime=tl, floor=fl),
            torchlime_chunk=v["store"]["meta"]["batch_size"],
            segments_given=bool(VARIANTS[name].get("given_segments")),
            cuda_graph=v["store"]["meta"].get("cuda_graph"),  # accelerate="cuda_graphs": how the last call ran
            floor_chunk=v["floor_batch"],
            floor_candidates_seconds=v["floor_candidates"],
            floor_input=dict(
                dtype=str(v["rows"].dtype),
                channels_last=bool(v["rows"].is_contiguous(memory_format=torch.channels_last)),
            ),
            overhead_seconds=over,
            torchlime_over_floor=ratio,
            peak_memory_bytes=peak.get(name),
            warmup_seconds=v["warmup_seconds"],
            goals=dict(
                overhead=goal("at most 5 ms beyond its own floor", over, 0.005, quick=args.quick),
                ratio=goal("at most 1.1x its own floor", ratio, 1.1, quick=args.quick),
            ),
        )
        if name == "fast":
            results[name]["goals"]["seconds"] = goal(
                'accelerate="fast" end to end <= 0.075 s', tl["median"], 0.075, quick=args.quick
            )
    reference = results.get("default")
    anchor_results = {}
    for key, t in anchor_times.items():
        s = summary(t)
        anchor_results[key] = dict(seconds=s, warmup_seconds=anchor_warm[key])
        if reference:
            anchor_results[key].update(
                over_default_torchlime=s["median"] / reference["seconds"]["torchlime"]["median"],
                over_default_floor=s["median"] / reference["seconds"]["floor"]["median"],
            )

    out = header(device)
    out.update(
        benchmark="gpu_latency",
        quick=args.quick,
        tag=args.tag or None,
        model=args.model,
        image_size=args.size,
        n_samples=args.n,
        n_segments=n_segments,
        repetitions=args.reps,
        anchor_repetitions=args.anchor_reps,
        settings=settings(device),
        segmentation_seconds_torchlime_slic=seg,
        segmentation_goal=goal(
            f"one {args.size}x{args.size} image segmented in <= 3 ms (goal stated for 299x299)",
            seg["median"],
            0.003,
            quick=args.quick or args.size != 299,
        ),
        variants=results,
        anchors=anchor_results,
        skipped=skipped,
        errors=errors,
        stopped_early=stop["stopped_early"],
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    tag = f"_{args.tag}" if args.tag else ""
    path = write(f"gpu_latency{tag}_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"wrote {path}")
    print(f"segmentation (torchlime SLIC, {args.size}x{args.size}): {seg['median'] * 1e3:.2f} ms (goal <= 3 ms)")
    for name, r in results.items():
        print(
            f"{name:40s} torchlime {r['seconds']['torchlime']['median']:.4f} s  floor "
            f"{r['seconds']['floor']['median']:.4f} s (chunk {r['floor_chunk']})  "
            f"+{r['overhead_seconds'] * 1e3:.1f} ms, x{r['torchlime_over_floor']:.3f} "
            f"(goals: <= 5 ms and <= 1.1x{'; <= 0.075 s' if name == 'fast' else ''})  "
            f"peak {r['peak_memory_bytes']}"
        )
    for key, r in anchor_results.items():
        print(f"{key:40s} {r['seconds']['median']:.3f} s")
    for key, why in skipped.items():
        print(f"{key}: skipped ({why})")
    for key, e in errors.items():
        print(f"{key}: FAILED {e}")
    exit_if_stopped(stop)
    if errors:  # the JSON above keeps what did run; the exit status tells a runner something failed
        raise SystemExit(1)


if __name__ == "__main__":
    main()
