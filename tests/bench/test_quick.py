"""Smoke tests of the GPU-side benchmark scripts: each runs end to end on the CPU with ``--quick``.

Every script is run as a user runs it (``python benchmarks/NAME.py --quick --device cpu --out DIR``
from the repository root, in a child process) and must exit 0 and write a JSON result into DIR
that starts with ``common.header`` (a ``device`` key). ``benchmarks/gpu/run.sh`` is run in quick
mode for one cheap part. Quick runs are tiny (resnet18 at 64x64, N=16 and the like): they prove
that the scripts work on the current package, not how fast anything is.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600  # generous: a shared 2-core machine can be slow; each script takes seconds alone

pytestmark = pytest.mark.slow

#: script -> (JSON it writes in quick mode on the CPU, packages it needs beyond the package's own)
SCRIPTS = {
    "bench_gpu_latency.py": ("gpu_latency_cpu_quick.json", ("torchvision", "skimage")),
    "bench_gpu_throughput.py": ("gpu_throughput_cpu_quick.json", ("torchvision", "skimage")),
    "bench_call_profile.py": ("call_profile_cpu_quick.json", ("torchvision", "skimage")),
    "bench_segmentation.py": ("segmentation_cpu_quick.json", ("skimage",)),
    "bench_audio_gpu.py": ("audio_gpu_cpu_quick.json", ()),
    "bench_audio_batch1.py": ("audio_batch1_cpu_quick.json", ()),
    "bench_text_gpu.py": ("text_gpu_cpu_quick.json", ()),
    "bench_probe_overhead.py": ("probe_overhead_cpu_quick.json", ()),
    "text_rationale.py": ("text_rationale_quick.json", ()),
    "bench_chunk_memory.py": ("chunk_memory_cpu_quick.json", ()),
    "bench_many_inputs.py": ("many_inputs_cpu_quick.json", ()),
    "bench_sample_efficiency.py": ("sample_efficiency_cpu_quick.json", ("torchvision",)),
    "bench_integrations_overhead.py": ("integrations_overhead_cpu_quick.json", ("tensorboard", "lightning")),
    "bench_boxes.py": ("boxes_cpu_quick.json", ("captum", "torchvision")),
    "bench_generation.py": ("generation_cpu_quick.json", ("captum", "transformers")),
    "bench_token_drop.py": ("token_drop_cpu_quick.json", ("torchvision",)),
    "bench_kernel_shap_designs.py": ("kernel_shap_designs_cpu_quick.json", ("sklearn", "shap", "captum")),
}


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("TORCHLIME_BACKEND", None)  # the scripts' own choice, not the caller's
    return env


def _check_result(path: Path, output: str) -> dict:
    assert path.is_file(), f"{path.name} was not written; output:\n{output[-4000:]}"
    result = json.loads(path.read_text())
    assert result.get("device"), f"{path.name} has no `device` (common.header) entry"
    assert result.get("device_type") == "cpu"
    return result


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_runs_quick_on_cpu(script: str, tmp_path: Path) -> None:
    name, needs = SCRIPTS[script]
    for module in needs:
        pytest.importorskip(module)
    out = tmp_path / "results"  # a folder that does not exist yet: the script makes it
    proc = subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--quick", "--device", "cpu", "--out", str(out)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{output[-4000:]}"
    result = _check_result(out / name, output)
    assert result.get("quick") is True or result.get("note"), f"{name} does not say it is a smoke run"
    assert sorted(p.name for p in out.iterdir()) == [name], "a quick run writes exactly its one JSON into --out"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_run_sh_quick_part_on_cpu(tmp_path: Path) -> None:
    """A quick part in short mode (the budget test below runs the full mode)."""
    env = _env()
    env.update(QUICK="1", DEVICE="cpu", WHEELS=str(tmp_path / "no-wheels"), SHORT="1")
    out = tmp_path / "out"
    proc = subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", str(out), "probe"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"run.sh exited {proc.returncode}:\n{output[-4000:]}"
    _check_result(out / "probe_overhead_cpu_quick.json", output)
    log = (out / "probe.log").read_text()
    assert "--quick" in log and "probe: " in log and "ok" in log.splitlines()[-1]
    assert "--reps 5" in log  # short mode's fewer repetitions
    assert (out / "environment.txt").is_file()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_gpu_run_sh_rejects_unknown_part(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", str(tmp_path), "--quick", "no-such-part"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown part 'no-such-part'" in proc.stderr


@pytest.mark.parametrize(
    ("script", "name"),
    [
        ("bench_gpu_latency.py", "gpu_latency_cpu_quick.json"),
        ("bench_gpu_throughput.py", "gpu_throughput_cpu_quick.json"),
    ],
)
def test_stopped_benchmark_writes_the_repetitions_it_finished(script: str, name: str, tmp_path: Path) -> None:
    """SIGTERM (run.sh's time limit) after two repetitions: exit 124 and a JSON holding them."""
    pytest.importorskip("torchvision")
    pytest.importorskip("skimage")
    extra = ["--no-anchors"] if script == "bench_gpu_latency.py" else []
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [
            sys.executable,
            f"benchmarks/{script}",
            "--quick",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--reps",
            "1000",
            "--variants",
            "default",
            *extra,
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        for line in proc.stdout:  # the repetitions as they finish
            lines.append(line)
            if sum(x.startswith("rep ") for x in lines) == 2:
                proc.send_signal(signal.SIGTERM)
                break
        rest, _ = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
    output = "".join(lines) + rest
    assert proc.returncode == 124, f"{script} exited {proc.returncode}:\n{output[-4000:]}"
    result = _check_result(out / name, output)
    assert result["stopped_early"] == "SIGTERM"
    runs = result["variants"]["default"]["seconds"]["torchlime"]["runs"]
    assert 2 <= len(runs) < 1000


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")
def test_gpu_run_sh_budget_skips_parts_and_packs_what_it_has(tmp_path: Path) -> None:
    env = _env()
    env.update(QUICK="1", DEVICE="cpu", WHEELS=str(tmp_path / "no-wheels"), BUDGET="0")
    tar = tmp_path / "back" / "gpu.tar.gz"
    proc = subprocess.run(
        ["bash", "benchmarks/gpu/run.sh", str(tmp_path / "out"), "--tar", str(tar), "probe"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "probe (skipped: no time left)" in proc.stderr
    with tarfile.open(tar) as packed:
        names = {Path(n).name for n in packed.getnames()}
    assert {"environment.txt", "probe.log"} <= names
    assert not (tmp_path / "out" / "probe_overhead_cpu_quick.json").exists()


def test_probe_benchmark_model_has_a_deterministic_cuda_backward() -> None:
    """``bench_probe_overhead`` trains its CNN with deterministic algorithms too: no layer may lack a
    deterministic CUDA backward (``AdaptiveAvgPool2d`` does). Its ``AvgPool2d(8)`` pools the 16x16 map
    of a 32x32 input to the same 2x2 values as ``AdaptiveAvgPool2d(2)``, forward and backward."""
    from benchmarks.bench_probe_overhead import make_model

    model = make_model(torch.device("cpu")).eval()
    assert not any(isinstance(m, (torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d)) for m in model.modules())
    adaptive = copy.deepcopy(model)
    pools = [i for i, m in enumerate(adaptive) if isinstance(m, torch.nn.AvgPool2d)]
    assert len(pools) == 1
    adaptive[pools[0]] = torch.nn.AdaptiveAvgPool2d(2)
    x = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0), requires_grad=True)
    y = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(0), requires_grad=True)
    out, ref = model(x), adaptive(y)
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-6, atol=1e-6)
