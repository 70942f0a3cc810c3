"""Fixtures of the data-set tests: one finished result folder per module, and a fresh copy per test."""

import importlib
import shutil
from pathlib import Path

import pytest

worker = importlib.import_module("tests.helpers.dataset_worker")


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "out"
    worker.run(out)
    return out


@pytest.fixture
def copy(clean, tmp_path) -> Path:
    shutil.copytree(clean, tmp_path / "out")
    return tmp_path / "out"
