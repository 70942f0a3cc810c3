"""Type-check a snippet with the package's own mypy configuration: which of its lines mypy calls errors."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def marked_lines(snippet: str) -> set[int]:
    """The 1-based numbers of the snippet's lines marked ``# error``."""
    return {i for i, line in enumerate(snippet.splitlines(), 1) if "# error" in line}


def mypy_errors(snippet: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[set[int], str]:
    """Run mypy (the package's configuration and cache) on ``snippet``: the lines it calls errors, its output."""
    api = pytest.importorskip("mypy.api")
    (tmp_path / "calls.py").write_text(snippet)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MYPYPATH", str(ROOT))
    out, _, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(tmp_path / "calls.py")])
    lines = {
        int(ln.split("calls.py:")[1].split(":")[0]) for ln in out.splitlines() if "calls.py:" in ln and ": error:" in ln
    }
    return lines, out
