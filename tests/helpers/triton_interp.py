"""Running Triton kernel tests on two devices: the interpreter (CPU) and CUDA.

Triton decides at decoration time (when a kernel module is first imported) whether ``@triton.jit``
builds a compiled or an interpreted kernel, and some of its helpers read ``TRITON_INTERPRET`` again
at call time, so flipping the variable inside a running test session is fragile. Kernel test
modules therefore never touch ``os.environ``:

* ``kernel_device`` (the body of their ``device`` fixture, parametrised over ``KERNEL_DEVICES``)
  runs the ``interp`` cases only in a process that already interprets the kernels, and the
  ``cuda`` cases only in one that compiles them on a GPU;
* ``run_interp_cases_in_child`` (the body of their ``test_interpreter_cases_in_child_process``)
  runs the module's selected ``interp`` cases in a child ``python -m pytest`` with
  ``TRITON_INTERPRET=1`` and fails with the child's output if any of them fails or is skipped.

So a plain ``pytest`` run and ``TRITON_INTERPRET=1 pytest tests/test_kernels*.py`` both run every
interpreter case exactly once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

KERNEL_DEVICES = [
    pytest.param("interp", id="interp"),
    pytest.param(
        "cuda",
        id="cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ],
    ),
]

# Interpreter CPU time is about 20 s per module, but a saturated shared machine has stretched
# it past 10 minutes of wall time: generous.
CHILD_TIMEOUT_S = 1800


def kernel_device(request: pytest.FixtureRequest, interpreted: bool) -> str:
    """Tensor device of a kernel case: "cpu" for the interpreter, "cuda" for compiled kernels."""
    if request.param == "interp":
        if not interpreted:
            pytest.skip("runs in the TRITON_INTERPRET=1 child (test_interpreter_cases_in_child_process)")
        return "cpu"
    if interpreted:
        pytest.skip("the cuda cases check the compiled kernels; this process interprets them")
    return "cuda"


def run_interp_cases_in_child(request: pytest.FixtureRequest, interpreted: bool) -> None:
    """Runs the calling module's selected ``[interp]`` cases with TRITON_INTERPRET=1 in a child."""
    if interpreted:
        pytest.skip("this process already interprets the kernels; the interp cases ran here")
    nodeids = [
        item.nodeid
        for item in request.session.items
        if getattr(item, "callspec", None) is not None
        and item.callspec.params.get("device") == "interp"
        and item.module is request.module
    ]
    if not nodeids:
        pytest.skip("no interp cases selected")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("TORCHLIME_DISABLE_TRITON", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", *nodeids]
    proc = subprocess.run(
        cmd, cwd=request.config.rootpath, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )
    report = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, report
    summary = proc.stdout.strip().splitlines()[-1]
    assert re.search(rf"\b{len(nodeids)} passed\b", summary) and "skipped" not in summary, report
