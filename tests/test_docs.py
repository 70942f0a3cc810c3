"""The documentation's examples run: every ``>>>`` example in the package's docstrings, and every
Python block of README.md that follows a ``<!-- runnable -->`` marker."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest
import torch

import torchlime

README = Path(__file__).resolve().parents[1] / "README.md"
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(torchlime.__path__, "torchlime.")
    if not m.name.startswith("torchlime.kernels")
)  # kernels: tests/test_kernels*.py


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, globs={"torch": torch, **vars(module)}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"


def runnable_blocks() -> list[str]:
    return re.findall(r"<!-- runnable -->\s*```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_runnable_blocks():
    assert len(runnable_blocks()) >= 3


@pytest.mark.parametrize("index", range(len(runnable_blocks())))
def test_readme_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    exec(compile(runnable_blocks()[index], f"README.md block {index}", "exec"), {"__name__": "readme"})
