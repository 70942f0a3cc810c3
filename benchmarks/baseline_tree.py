"""An older commit's source tree beside this one, for benchmarks that run both side by side.

``worktree(commit)`` checks the commit out as a ``git worktree`` (once; reused when it is already
there at that commit) and makes its ``torchlime.kernels`` importable from the bare tree, for both
layouts the repository has had: ``kernels/`` itself the package (``kernels/__init__.py``) or
``kernels/torchlime_kernels/``. A benchmark then runs a child ``python`` with the tree's root first on
``sys.path`` (``python_path``), so ``import torchlime`` in it is that commit's package.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the commit the call's fixed cost is measured against
BASELINE = "d781044"


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def link_kernels(tree: Path) -> None:
    """``tree/torchlime/kernels`` -> the tree's kernel package, unless the import already resolves there."""
    link = tree / "torchlime" / "kernels"
    if link.exists() or link.is_symlink():
        return
    target = "../kernels/torchlime_kernels" if (tree / "kernels" / "torchlime_kernels").is_dir() else "../kernels"
    link.symlink_to(target)


def worktree(commit: str = BASELINE, path: Path | None = None) -> Path:
    """A checkout of ``commit`` (at ``path``, default ``<tmp>/torchlime-<commit>``), made once and reused.

    Raises:
        RuntimeError: ``path`` holds a checkout of another commit.
    """
    full = _git("rev-parse", f"{commit}^{{commit}}")
    path = Path(path or Path(tempfile.gettempdir()) / f"torchlime-{commit}").resolve()
    if path.exists():
        at = _git("rev-parse", "HEAD", cwd=path)
        if at != full:
            raise RuntimeError(f"{path} holds {at[:12]}, not {commit}: pass another path")
    else:
        _git("worktree", "add", "--detach", str(path), full)
    link_kernels(path)
    return path


def python_env(tree: Path) -> dict[str, str]:
    """The environment of a child ``python`` that imports ``torchlime`` from ``tree``."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("TORCHLIME_BACKEND", None)
    return env


def commit_of(tree: Path) -> str:
    """The commit ``tree`` has checked out, with ``+modified`` when tracked files differ from it."""
    head = _git("rev-parse", "HEAD", cwd=tree)
    dirty = _git("status", "--porcelain", "--untracked-files=no", cwd=tree)
    return head + ("+modified" if dirty else "")
