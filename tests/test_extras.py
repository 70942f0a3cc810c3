"""Every install hint names an extra that pyproject.toml defines (a hint for a missing extra is a dead end)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HINT = re.compile(r"torchlime\[([A-Za-z0-9_,\- ]+)\]")
REQUIRE = re.compile(r"require\(\s*\"[\w.]+\",\s*\"([\w-]+)\"")


def extras() -> set[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        tomllib = pytest.importorskip("tomli")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["project"]["optional-dependencies"])


def named() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    files = [*(ROOT / "torchlime").rglob("*.py"), *(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    for path in files:
        text = path.read_text()
        for group in HINT.findall(text) + REQUIRE.findall(text):
            for name in group.split(","):
                found.setdefault(name.strip(), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_hinted_extra_exists():
    known = extras()
    missing = {name: sorted(where) for name, where in named().items() if name not in known}
    assert not missing, f"install hints name extras pyproject.toml lacks: {missing}"
    assert {"viz", "notebook"} <= set(named())  # the scan sees the hints it is meant to check
