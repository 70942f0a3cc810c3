"""The documentation's examples run: every ``>>>`` example in the package's docstrings, every Python
block of README.md and docs/*.md that follows a ``<!-- runnable -->`` marker, and the docs site builds
with warnings as errors.

The examples run from a fixed torch seed, and a deprecated name or an unreliable explanation
(``UnreliableExplanationWarning``) in one fails it: what the documentation teaches is current and
gives explanations worth reading."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest
import torch

import torchlime

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(torchlime.__path__, "torchlime.")
    if not m.name.startswith("torchlime.kernels")
)  # kernels: tests/test_kernels*.py


DEPRECATED = "error::DeprecationWarning"
UNRELIABLE = "error::torchlime.engine.quality.UnreliableExplanationWarning"


@pytest.fixture
def fixed_seed():
    """Examples draw their toy data from torch's global generator: the same data on every run."""
    torch.manual_seed(0)


@pytest.mark.parametrize("name", MODULES)
@pytest.mark.usefixtures("fixed_seed")
@pytest.mark.filterwarnings(DEPRECATED)
@pytest.mark.filterwarnings(UNRELIABLE)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, globs={"torch": torch, **vars(module)}):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"


def runnable_blocks(page: Path = README) -> list[str]:
    return re.findall(r"<!-- runnable -->\s*```python\n(.*?)```", page.read_text(), flags=re.S)


BLOCKS = [(page, i) for page in PAGES for i in range(len(runnable_blocks(page)))]


def test_readme_has_a_runnable_quick_start():
    assert len(runnable_blocks()) >= 1


def test_every_modality_page_has_a_runnable_block():
    for name in ("getting-started", "images", "audio", "text", "tabular", "methods", "metrics"):
        assert runnable_blocks(ROOT / "docs" / f"{name}.md"), f"docs/{name}.md has no runnable block"


@pytest.mark.parametrize("page,index", BLOCKS, ids=[f"{p.name}-{i}" for p, i in BLOCKS])
@pytest.mark.usefixtures("fixed_seed")
@pytest.mark.filterwarnings(DEPRECATED)
@pytest.mark.filterwarnings(UNRELIABLE)
def test_block_runs(page, index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    code = runnable_blocks(page)[index]
    exec(compile(code, f"{page.name} block {index}", "exec", dont_inherit=True), {"__name__": "docs"})


def test_docs_site_builds_without_warnings(docs_build):
    html, status, stderr = docs_build
    assert status == 0, stderr[-4000:]
    assert (html / "index.html").is_file()
