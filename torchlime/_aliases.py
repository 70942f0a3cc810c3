"""Old flat module paths (``torchlime.segments``, ``torchlime.audio_data``, ...) as aliases.

Each old path resolves to the module that now holds its code, so code written against
the flat layout keeps working; importing an old path warns once with the new one.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Optional, Sequence

#: old module path -> the module that replaces it
ALIASES = {
    "torchlime.segments": "torchlime.image.segments",
    "torchlime.viz": "torchlime.image.viz",
    "torchlime.models": "torchlime.image.models",
    "torchlime.demo_data": "torchlime.image.data",
    "torchlime.demo": "torchlime.image.demo",
    "torchlime.audio_data": "torchlime.audio.data",
    "torchlime.audio_models": "torchlime.audio.models",
    "torchlime.audio_segments": "torchlime.audio.segments",
    "torchlime.audio_stft": "torchlime.audio.stft",
    "torchlime.audio_viz": "torchlime.audio.viz",
    "torchlime.text_data": "torchlime.text.data",
    "torchlime.text_models": "torchlime.text.models",
    "torchlime.text_viz": "torchlime.text.viz",
    "torchlime.text_kernel": "torchlime.text.kernel",
    "torchlime.text_infill": "torchlime.text.infill",
    "torchlime.text_perturb": "torchlime.text.perturb",
}


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        target = ALIASES[spec.name]
        warnings.warn(f"`{spec.name}` moved to `{target}`; the old path is an alias",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the target module is already imported."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in ALIASES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


def install() -> None:
    """Register the alias finder once (``torchlime/__init__`` calls it)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
