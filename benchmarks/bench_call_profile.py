"""Where the time of one explanation goes: a torch.profiler split of one explain_image call beside its floor.

The latency goals ask every variant to stay within 5 ms of its own forward floor; this script shows
where the rest of a call goes. For every variant (``bench_gpu_latency``'s, default fp32) and every
way of giving the segments:

* ``slic``: the default (SLIC on the images' device, part of the call);
* ``labels``: the same SLIC labels passed as a tensor (no segmentation in the call);
* ``grid``: ``segments="grid"`` (a cheap segmentation, no connectivity pass);

it times ``explain_image(model, image, n_samples=N, normalize=...)`` (the end-to-end median of
``--reps`` synchronised calls) and the bare forward of the same rows at torchlime's chunk size, then
profiles one call (torch.profiler, CPU and CUDA activities) and records:

* the wall time of each of torchlime's profiler ranges (``torchlime::prepare`` = segmentation,
  ``::plan``, ``::masks``, ``::blend``, ``::model``, ``::rows``, ``::fit``, ``::assemble``), exclusive
  of the ranges nested in them, and the device time of the kernels each launched;
* the device's busy time (kernel intervals merged) against the call's wall time: the idle rest is
  host work the device waits for (launches, Python, synchronisations);
* kernel launches, ``cudaStreamSynchronize`` / ``cudaMemcpy*`` calls, and the host
  synchronisations ``torch.cuda.set_sync_debug_mode`` reports, with the source line of each
  (CUDA only);
* the 15 operators with the most device time and the most host time;
* a goal: the call's own host synchronisations (the benchmark's read of the result left out) within
  the budget ``tests/engine/test_host_syncs.py`` holds the CPU count to (5 with SLIC, 2 with labels or
  a grid).

``--trace`` also writes the Chrome trace of the default call (``call_profile_<model>.trace.json.gz``,
open it in Perfetto or chrome://tracing).

``--ops`` counts instead of timing, on the CPU: the operators each call of a table of calls dispatches
(``tests/helpers/ops.py``'s counter: the model's own operators, views and allocations left out, each
kernel door one operator), split into a fixed part and a part per chunk, the profiler ranges, the most
frequent operators and where they come from (profiler range, function, source line), for this tree and
for ``--baseline``'s (a ``git worktree``, run in a child process; ``benchmarks/call_ops_lib.py`` holds
the calls). It writes ``call_ops_cpu.json``; every count is exact and repeats from run to run.

    python benchmarks/bench_call_profile.py                     # cuda: inception_v3, 299x299, N=1000
    python benchmarks/bench_call_profile.py --variants default bf16_channels_last --trace
    python benchmarks/bench_call_profile.py --device cpu --quick --out /tmp/quick   # smoke test
    python benchmarks/bench_call_profile.py --ops               # results/call_ops_cpu.json, ~1 min
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import json
import statistics
import subprocess
import traceback
import warnings
from collections import Counter
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

from torchlime.image.segments import slic

from benchmarks.baseline_tree import BASELINE, commit_of, python_env, worktree
from benchmarks.bench_gpu_latency import VARIANTS, build_variant, explain_fn, roomy_compile_cache
from benchmarks.common import (
    common_args,
    device_arg,
    formatted,
    forward_rows,
    goal,
    header,
    normalized,
    perturbed_images,
    size_defaults,
    smoke_threads,
    summary,
    test_image,
    timed,
    vision_args,
    vision_model,
    warm_up,
    write,
)

SEGMENTS = ("slic", "labels", "grid")
#: host synchronisations a call may make, as tests/engine/test_host_syncs.py counts them on the CPU
SYNC_BUDGET = {"slic": 5, "labels": 2, "grid": 2}
PREFIX = "torchlime::"
ROOT = str(_Path(__file__).resolve().parents[1])


def _own_ranges(event: Any) -> list[Any]:
    """The torchlime ranges nested in ``event`` with no torchlime range between."""
    found = []
    for child in event.cpu_children:
        found.extend([child] if child.name.startswith(PREFIX) else _own_ranges(child))
    return found


def _device_time(event: Any) -> float:
    """Microseconds of device kernels an event launched (its own and its children's)."""
    name = "device_time_total" if hasattr(event, "device_time_total") else "cuda_time_total"  # older torch
    return float(getattr(event, name, 0.0) or 0.0)


def _merged_busy(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of (start, end) intervals."""
    busy, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            busy += b - max(a, end)
            end = b
    return busy


def split(prof: Any) -> dict[str, Any]:
    """Ranges (exclusive wall ms, device ms), device busy time, launches and top operators of a profile."""
    events = prof.events()
    ranges: dict[str, dict[str, float]] = {}
    for e in events:
        if e.name.startswith(PREFIX) and e.device_type == torch.autograd.DeviceType.CPU:
            inner = _own_ranges(e)
            r = ranges.setdefault(e.name[len(PREFIX) :], dict(wall_ms=0.0, device_ms=0.0, calls=0))
            r["wall_ms"] += (e.cpu_time_total - sum(c.cpu_time_total for c in inner)) / 1e3
            r["device_ms"] += (_device_time(e) - sum(_device_time(c) for c in inner)) / 1e3
            r["calls"] += 1
    kernels = [  # kernels, copies and fills on the device; the ranges' device-side annotations left out
        (e.time_range.start, e.time_range.end)
        for e in events
        if e.device_type == torch.autograd.DeviceType.CUDA
        and not getattr(e, "is_user_annotation", False)
        and not e.name.startswith(PREFIX)
    ]
    api = Counter(e.name for e in events if e.name.startswith(("cuda", "cu")) and e.device_type.name == "CPU")
    averages = prof.key_averages()

    def top(attr: str) -> list[dict[str, Any]]:
        rows = sorted(
            (a for a in averages if not a.key.startswith(PREFIX)), key=lambda a: -float(getattr(a, attr, 0) or 0)
        )[:15]
        return [dict(op=a.key, ms=float(getattr(a, attr, 0) or 0) / 1e3, calls=a.count) for a in rows]

    return dict(
        ranges=ranges,
        device_busy_ms=_merged_busy(kernels) / 1e3 if kernels else None,
        kernel_launches=sum(v for k, v in api.items() if "LaunchKernel" in k) if kernels else None,
        runtime_calls={k: v for k, v in api.most_common(12)},
        aten_ops=sum(a.count for a in averages if a.key.startswith("aten::")),
        top_host=top("self_cpu_time_total"),
        top_device=top("self_device_time_total") if kernels else [],
    )


def _is_sync(message: str) -> bool:
    """A synchronisation the debug mode reports (not its one-time notice that it is a prototype, which
    says it "does not yet detect all synchronizing operations")."""
    return "synchroniz" in message and "prototype" not in message


def host_syncs(run: Callable[[], None], device: torch.device) -> dict[str, Any] | None:
    """Host synchronisations of one call as ``set_sync_debug_mode("warn")`` reports them, by source line."""
    if device.type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    lines = Counter(f"{str(w.filename).replace(ROOT + '/', '')}:{w.lineno}" for w in caught if _is_sync(str(w.message)))
    own = sum(n for line, n in lines.items() if not line.startswith("benchmarks/"))  # the call's, not the reader's
    return dict(total=sum(lines.values()), in_call=own, by_line=dict(lines.most_common()))


def profile_case(args: argparse.Namespace, device: torch.device, image, labels, rows, name: str, seg: str) -> dict:
    """Time, floor and profile of one (variant, segments) case."""
    v = build_variant(name, args.model, device, args.compile_chunk)
    store: dict = {}
    given = labels if seg == "labels" else seg
    run = explain_fn(v["model"], image, args.n, v["accelerate"], store, segments=given)
    chunk = warm_up(run, store)
    floor = forward_rows(v["floor_model"], formatted(rows, v["floor_model"]), chunk)
    floor()
    call_s = [timed(run, device) for _ in range(args.reps)]
    floor_s = [timed(floor, device) for _ in range(args.reps)]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:  # the first profiled call pays the profiler's start
        run()
    with profile(activities=activities) as prof:
        wall = timed(run, device)
    if args.trace and name == "default" and seg == "slic":
        prof.export_chrome_trace(str(args.out / f"call_profile_{args.model}.trace.json.gz"))
    result: dict[str, Any] = dict(
        seconds=summary(call_s),
        floor_seconds=summary(floor_s),
        chunk=chunk,
        beyond_floor_ms=(statistics.median(call_s) - statistics.median(floor_s)) * 1e3,
        profiled_wall_ms=wall * 1e3,
    )
    for key, part in (("host_syncs", lambda: dict(host_syncs=host_syncs(run, device))), ("split", lambda: split(prof))):
        try:  # the timings above are kept if reading the profile fails on some torch version
            result.update(part())
        except Exception as err:  # noqa: BLE001
            result[f"{key}_error"] = f"{type(err).__name__}: {err}"
            traceback.print_exc()
    syncs = (result.get("host_syncs") or {}).get("in_call")
    result["goals"] = dict(
        host_syncs=goal(
            "host synchronisations per call within the CPU sync test's budget",
            syncs,
            SYNC_BUDGET[seg],
            quick=args.quick,
        )
    )
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cuda")
    vision_args(ap, "inception_v3", 299)
    ap.add_argument("--n", type=int, default=None, help="samples per explanation (default 1000; quick: 16)")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per case (default 5; quick: 1)")
    ap.add_argument("--variants", nargs="+", default=["default"], choices=list(VARIANTS))
    ap.add_argument("--segments", nargs="+", default=list(SEGMENTS), choices=SEGMENTS)
    ap.add_argument("--compile-chunk", type=int, default=None, help="compiled / graphed variants' chunk (256)")
    ap.add_argument("--trace", action="store_true", help="write the Chrome trace of the default SLIC call")
    ap.add_argument("--ops", action="store_true", help="count each call's operators on the CPU (call_ops_cpu.json)")
    ap.add_argument("--baseline", default=BASELINE, help="--ops: the commit counted beside (default %(default)s)")
    ap.add_argument("--baseline-tree", type=_Path, default=None, help="--ops: where its worktree is (or goes)")
    args = ap.parse_args(argv)
    defaults = dict(model=("resnet18", "inception_v3"), size=(64, 299), n=(16, 1000), reps=(1, 5))
    return size_defaults(args, dict(defaults, compile_chunk=(8, 256)))


def _change(before: Any, after: Any) -> str:
    """``a -> b``, or ``a`` when equal (``-`` for none)."""
    a, b = ("-" if v is None else f"{v:g}" for v in (before, after))
    return a if a == b else f"{a} -> {b}"


def count_tree(tree: _Path) -> dict[str, Any]:
    """``call_ops_lib.py``'s rows counted with ``tree``'s torchlime, in a child process."""
    script = _Path(__file__).resolve().parent / "call_ops_lib.py"
    proc = subprocess.run(
        [_sys.executable, str(script), str(tree)], env=python_env(tree), capture_output=True, text=True, check=False
    )
    if proc.returncode:
        raise RuntimeError(f"counting {tree} failed:\n{proc.stderr[-4000:]}")
    rows: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])["rows"]
    return rows


def ops_main(args: argparse.Namespace) -> None:
    """``--ops``: the operator table of this tree and the baseline's, written to call_ops_cpu.json."""
    from benchmarks import call_ops_lib as lib

    trees = {"baseline": worktree(args.baseline, args.baseline_tree), "current": _Path(ROOT)}
    counted = {}
    for which, tree in trees.items():
        place = "this checkout" if which == "current" else f"a worktree of {args.baseline}"  # no machine paths
        counted[which] = dict(tree=place, commit=commit_of(tree), rows=count_tree(tree))
    table = []
    print("| call | fixed (baseline -> current) | per chunk | ranges |")
    print("|---|---|---|---|")
    for name in counted["current"]["rows"]:
        pair = {k: counted[k]["rows"].get(name, {}) for k in counted}
        row = dict(call=name)
        for k, r in pair.items():
            fields = ("fixed", "per_chunk", "ranges", "ranges_fixed", "ranges_per_chunk", "error")
            row.update({f"{k}_{f}": r.get(f) for f in fields if f in r})
        table.append(row)
        cells = [_change(pair["baseline"].get(f), pair["current"].get(f)) for f in ("fixed", "per_chunk", "ranges")]
        print(f"| {name} | {' | '.join(cells)} |")
    out = header(torch.device("cpu"))
    out.update(
        benchmark="call_ops",
        definition=(
            "operators dispatched during one call (a TorchDispatchMode, tests/helpers/ops.py), the model's own "
            "left out (counting pauses inside it), views and metadata/allocation operators left out (func.is_view, "
            "empty*, _unsafe_view, set_, resize_), record_function enters counted apart as ranges, each "
            "torchlime._backend kernel door (blend, slic_assign, slic_update, hash_words: one Triton launch on "
            "CUDA) one operator with its CPU torch reference not counted; calls at N and 4N samples at a fixed "
            "chunk split the count as fixed + per_chunk * chunks; each counted call follows an uncounted one. "
            "Apart, not in the count: uploads (tensors made from Python data, a pinned copy each on CUDA) and "
            "host_reads (tolist / numpy / cpu calls, a copy to the host each on CUDA), at N and 4N"
        ),
        setup=dict(image_size=lib.SIZE, n_samples=lib.N, chunk_rows=lib.CHUNK, probe_n_samples=lib.PROBE_N),
        table=table,
        trees=counted,
    )
    print(f"wrote {write('call_ops_cpu.json', out, args.out)}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.ops:
        ops_main(args)
        return
    device = device_arg(args.device)
    smoke_threads(args, device)
    args.out.mkdir(parents=True, exist_ok=True)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    if any(VARIANTS[v].get("accelerate") or VARIANTS[v].get("options", {}).get("compile") for v in args.variants):
        roomy_compile_cache()
    vision_model(args.model, device)  # torchvision imported before any timing
    image = test_image(args.size).to(device)
    labels = slic(image)
    with torch.inference_mode():
        rows = normalized(perturbed_images(image, labels, args.n, fill="zero"))
    cases: dict[str, dict] = {}
    errors: dict[str, str] = {}
    for name in args.variants:
        for seg in args.segments:
            key = f"{name}/{seg}"
            try:
                cases[key] = profile_case(args, device, image, labels, rows, name, seg)
                c = cases[key]
                print(
                    f"{key}: {c['seconds']['median'] * 1e3:.1f} ms, floor {c['floor_seconds']['median'] * 1e3:.1f}"
                    f" ms, beyond {c['beyond_floor_ms']:.1f} ms, device busy {c.get('device_busy_ms')} ms, "
                    f"syncs in the call {(c.get('host_syncs') or {}).get('in_call')}",
                    flush=True,
                )
            except Exception as err:  # noqa: BLE001 - one broken case must not lose the others
                errors[key] = f"{type(err).__name__}: {err}"
                traceback.print_exc()
    out = header(device)
    out.update(
        benchmark="call_profile",
        quick=args.quick,
        model=args.model,
        image_size=args.size,
        n_samples=args.n,
        n_segments=int(labels.max()) + 1,
        repetitions=args.reps,
        cases=cases,
        errors=errors,
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    path = write(f"call_profile_{device.type}{'_quick' if args.quick else ''}.json", out, args.out)
    print(f"wrote {path}")
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
