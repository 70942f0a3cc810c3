"""Shared fixtures: device / dtype parameters and small deterministic models."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n W: the cores shared among the W workers, not W x all of them
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """CPU always; CUDA when available (skips cleanly otherwise)."""
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    return torch.device(request.param)


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request) -> torch.dtype:
    """The floating dtypes every stage supports; float32 is the default everywhere."""
    return request.param


@pytest.fixture
def cuda() -> torch.device:
    """Skip unless a CUDA device exists."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    return torch.device("cuda")


#: a skipif reason that says the test needs CUDA ("needs a CUDA device"), not any mention of CUDA
#: ("checks the error raised without CUDA" is a test for machines without one)
NEEDS_CUDA = re.compile(r"\b(needs|requires)\b.*\bCUDA\b")


def pytest_collection_modifyitems(config, items):
    """Every test that needs CUDA carries the ``cuda`` marker (``pytest -m cuda`` runs them all):
    tests using the ``cuda`` fixture, the ``cuda`` case of the ``device`` fixtures, and tests
    skipped without a CUDA device (a ``skipif`` whose reason says it needs CUDA)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        needs = (
            "cuda" in item.fixturenames
            or params.get("device") == "cuda"
            or any(NEEDS_CUDA.search(str(m.kwargs.get("reason", ""))) for m in item.iter_markers("skipif"))
        )
        if needs and not item.get_closest_marker("cuda"):
            item.add_marker(pytest.mark.cuda)


@pytest.fixture(scope="session")
def docs_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """The docs site built once a session with warnings as errors: (HTML folder, sphinx's exit status, its
    stderr). CI builds it the same way before pytest and names the folder in ``TORCHLIME_DOCS_HTML`` (a build
    that failed there stopped CI), so that one is used as it is."""
    pytest.importorskip("sphinx", reason="the docs extra is not installed: pip install -e '.[docs]'")
    html = os.environ.get("TORCHLIME_DOCS_HTML")
    if html and (Path(html) / "objects.inv").exists():
        return Path(html), 0, ""
    out = tmp_path_factory.mktemp("docs") / "html"
    docs = Path(__file__).resolve().parents[1] / "docs"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(docs), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return out, done.returncode, done.stderr
