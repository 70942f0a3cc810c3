"""Old import paths keep working for one release: each resolves to its new home with a DeprecationWarning."""

from __future__ import annotations

import importlib
import sys

import pytest

import torchlime
from torchlime._aliases import ALIASES

#: old paths with a private part (``torchlime._x``, ``torchlime.x._y``): never API, so no longer aliased
REMOVED = (
    "torchlime._run",
    "torchlime.tabular._kernel",
    "torchlime.metrics._perturbation",
    "torchlime._cli_common",
    "torchlime._cli_inputs",
    "torchlime._cli_model",
    "torchlime._cli_write",
    "torchlime._cli_explain",
    "torchlime._cli_dataset",
    "torchlime._cli_bench",
)


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


def test_only_public_paths_are_aliased():
    assert [old for old in ALIASES if any(part.startswith("_") for part in old.split("."))] == []


@pytest.mark.parametrize("old", REMOVED)
def test_private_old_paths_are_gone(old):
    sys.modules.pop(old, None)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_demo_is_a_package_with_the_old_demo_names():
    """``torchlime.demo`` was an alias of the demo job; it is the demo package now, without a warning."""
    import warnings

    from torchlime.demo import run

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        demo = importlib.import_module("torchlime.demo")
    assert "torchlime.demo" not in ALIASES and demo.__path__
    assert (demo.run_demo, demo.coverage, demo.hits) == (run.run_demo, run.coverage, run.hits)


def test_old_demo_modules_from_their_modality_packages():
    import torchlime.audio
    from torchlime.demo import audio_data, image_models

    sys.modules.pop("torchlime.audio.data", None)
    vars(torchlime.audio).pop("data", None)  # set by an earlier import of the alias
    with pytest.warns(DeprecationWarning, match="`torchlime.audio.data` moved to `torchlime.demo.audio_data`"):
        from torchlime.audio import data
    assert data is audio_data
    sys.modules.pop("torchlime.image.models", None)
    with pytest.warns(DeprecationWarning, match="`torchlime.image.models` moved to `torchlime.demo.image_models`"):
        from torchlime.image.models import load_demo_model
    assert load_demo_model is image_models.load_demo_model
