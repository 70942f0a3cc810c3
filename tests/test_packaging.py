"""Packaging: ``torchlime.kernels`` comes from this repository's ``kernels/torchlime_kernels/`` in every way
the package is used (an editable install, a wheel, a bare clone linked by ``benchmarks/gpu/link_kernels.sh``),
and nothing the repository ships shadows an installed distribution's top-level name: PyPI's ``kernels``
(which transformers depends on) stays importable from the clone's root.

The README's CPU-only set-up is one pip command that takes torch, torchvision, torchaudio and the test
extras from the CPU index together (installing them apart lets pip swap the CUDA build back in).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import torchlime

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels" / "torchlime_kernels"
#: what a copy of the source needs to build a wheel or run from a bare clone
SOURCES = ("pyproject.toml", "README.md", "torchlime", "kernels")


def _origin(module: str, cwd: Path, pythonpath: list[Path]) -> Path:
    """The file ``import module`` loads in a fresh interpreter started in ``cwd`` with ``pythonpath`` first."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    code = f"import {module} as m; print(m.__file__)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return Path(proc.stdout.strip().splitlines()[-1]).resolve()


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a wheel is built from, copied out of the repository (no build output lands in it)."""
    root = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        src = REPO / name
        if src.is_dir():  # torchlime/kernels: a bare clone's link, if this one has it
            skip = ("__pycache__", "kernels") if name == "torchlime" else ("__pycache__",)
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns(*skip))
        else:
            shutil.copy2(src, root / name)
    return root


def test_top_level_kernels_is_not_a_package():
    """``kernels/`` has no ``__init__.py`` and no modules of its own: at most a namespace portion, which any
    installed regular package of that name outranks."""
    assert not (REPO / "kernels" / "__init__.py").exists()
    assert sorted(p.name for p in (REPO / "kernels").glob("*.py")) == []
    assert (KERNELS / "__init__.py").is_file()


def test_editable_or_source_import_is_this_repo():
    """In this test run (an editable install, or the clone on the path) the kernels are this repo's files."""
    import torchlime.kernels as pkg
    from torchlime.kernels import blend

    assert Path(pkg.__file__).resolve() == KERNELS / "__init__.py"
    assert Path(blend.__file__).resolve() == KERNELS / "blend.py"
    try:
        top = importlib.metadata.distribution("torchlime").read_text("top_level.txt") or ""
    except importlib.metadata.PackageNotFoundError:
        top = ""
    assert "kernels" not in top.split()


def test_installed_kernels_distribution_wins_from_the_clone_root(tmp_path):
    """``import kernels`` from the clone's root (as ``python -m``, pytest and notebooks run) finds the
    installed distribution, not the repository's folder."""
    site = tmp_path / "site"
    (site / "kernels").mkdir(parents=True)
    (site / "kernels" / "__init__.py").write_text("CUDAProperties = object\n")
    assert _origin("kernels", REPO, [site]) == (site / "kernels" / "__init__.py").resolve()


def test_wheel_ships_kernels_inside_torchlime(source_copy, tmp_path):
    """A wheel holds ``torchlime/kernels/*.py``, no top-level ``kernels``, and imports from its own files."""
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), "."]
    proc = subprocess.run(build, cwd=source_copy, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = wheels.glob("torchlime-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    ours = {p.name for p in KERNELS.glob("*.py")}
    assert {n.split("/")[-1] for n in names if n.startswith("torchlime/kernels/")} == ours
    assert not [n for n in names if n.startswith("kernels/")]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a pure-Python wheel: unpacking is installing
    assert _origin("torchlime.kernels.blend", tmp_path, [site]) == (site / "torchlime" / "kernels" / "blend.py")


def test_bare_clone_link(source_copy, tmp_path):
    """``benchmarks/gpu/link_kernels.sh`` makes a clone on PYTHONPATH, not installed, import its own kernels."""
    clone = tmp_path / "clone"
    shutil.copytree(source_copy, clone, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    script = REPO / "benchmarks" / "gpu" / "link_kernels.sh"
    for _ in range(2):  # the second run finds the link and leaves it
        proc = subprocess.run(["bash", str(script), str(clone)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    assert os.readlink(clone / "torchlime" / "kernels") == "../kernels/torchlime_kernels"
    assert _origin("torchlime.kernels.blend", clone, [clone]) == clone / "kernels" / "torchlime_kernels" / "blend.py"
    assert Path(torchlime.__file__).resolve().parent != clone / "torchlime"  # this process is untouched


def _cpu_only_command(readme: str) -> list[str]:
    """The README's one pip command that installs from PyTorch's CPU index (shell words)."""
    found = [line for line in readme.splitlines() if "pip install" in line and "/whl/cpu" in line]
    assert len(found) == 1, f"the README must give one CPU-only pip command, found {len(found)}: {found}"
    line = found[0].strip().strip("`")
    return shlex.split(line[line.index("pip install") :].split("&&")[0])


def test_readme_cpu_only_command_resolves_torch_once():
    """torch, torchvision, torchaudio and ``.[test]`` come in one command whose index is the CPU one, with
    PyPI only as an extra index (so the ``+cpu`` builds win and nothing re-resolves torch later)."""
    words = _cpu_only_command((REPO / "README.md").read_text())
    assert words[:2] == ["pip", "install"]
    index = words[words.index("--index-url") + 1]
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cpu/?", index), index
    assert words[words.index("--extra-index-url") + 1].startswith("https://pypi.org/simple")
    assert {"torch", "torchvision", "torchaudio"} <= set(words)
    assert any(w.startswith(".[") and "test" in w for w in words) and "-e" in words
