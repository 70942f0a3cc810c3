"""Every public name is in the built API reference: each name in the ``__all__`` of every public module of
torchlime must resolve to an object that the docs' object inventory (``objects.inv``) documents.

The docs are built once per session (or read from ``TORCHLIME_DOCS_HTML``, the HTML folder CI has
just built); the inventory's entries are imported and matched by identity, so a name documented under
another path (``torchlime.Images`` for ``torchlime.image.Images``) counts.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import torchlime

ROOT = Path(__file__).resolve().parents[1]
#: built on first use from an optional package the docs build does not import (its module's page and
#: ``ExplainCallbackLogic``, which it wraps, document it)
LAZY = {"torchlime.integrations.lightning_callback.ExplainCallback"}


def public_modules() -> list[str]:
    """torchlime and every submodule without a private component, that declares ``__all__``."""
    names = ["torchlime"]
    for info in pkgutil.walk_packages(torchlime.__path__, "torchlime."):
        if any(part.startswith("_") for part in info.name.split(".")) or info.name.startswith("torchlime.kernels"):
            continue
        names.append(info.name)
    out = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional integration whose package is missing
            continue
        if hasattr(module, "__all__"):
            out.append(name)
    return out


@pytest.fixture(scope="session")
def inventory(docs_build) -> set[str]:
    from sphinx.util.inventory import InventoryFile

    with open(docs_build[0] / "objects.inv", "rb") as f:
        inv = InventoryFile.load(f, "", lambda base, uri: uri)
    return {name for kind, entries in inv.items() if kind.startswith("py:") for name in entries}


def _resolve(dotted: str) -> object:
    """The object a documented dotted name stands for, or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def test_every_public_name_is_in_the_api_reference(inventory: set[str]) -> None:
    documented = {id(obj) for obj in map(_resolve, inventory) if obj is not None}
    missing = []
    for name in public_modules():
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if id(obj) not in documented and f"{name}.{attr}" not in inventory | LAZY:
                missing.append(f"{name}.{attr}")
    assert missing == [], f"{len(missing)} public names are not in the API reference: {missing}"
