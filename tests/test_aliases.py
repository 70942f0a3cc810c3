"""Old import paths keep working for one release: each resolves to its new home with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

import torchlime
from torchlime._aliases import ALIASES


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_old_path_imports_the_new_module_with_a_warning(old):
    sys.modules.pop(old, None)  # a fresh import (an earlier test may have imported the alias)
    with pytest.warns(DeprecationWarning, match=f"`{old}` moved to"):
        module = importlib.import_module(old)
    target = ALIASES[old]
    if isinstance(target, str):
        assert module is importlib.import_module(target)
    else:  # a module split in two: both halves' names in one namespace
        for name in target:
            public = [k for k in vars(importlib.import_module(name)) if not k.startswith("_")]
            assert all(getattr(module, k) is getattr(importlib.import_module(name), k) for k in public)


def test_old_submodule_as_an_attribute_of_the_package():
    sys.modules.pop("torchlime.quality", None)
    vars(torchlime).pop("quality", None)
    with pytest.warns(DeprecationWarning, match="`torchlime.quality` moved to `torchlime.engine.quality`"):
        warning = torchlime.quality.UnreliableExplanationWarning
    assert warning is torchlime.UnreliableExplanationWarning
    with pytest.raises(AttributeError, match="has no attribute 'nonexistent'"):
        torchlime.nonexistent  # noqa: B018


def test_old_forward_names_still_import():
    sys.modules.pop("torchlime.forward", None)
    with pytest.warns(DeprecationWarning):
        from torchlime.forward import InputFormat, run_rows  # noqa: F401
    from torchlime.stages.forward.passes import run_rows as new

    assert run_rows is new
