"""Old module paths (``torchlime.sampling``, ``torchlime.segments``, ...) as aliases of their new homes.

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
from typing import Optional, Sequence, Union

#: old module path -> the module(s) that replace it (a tuple: the names of several modules)
ALIASES: dict[str, Union[str, tuple[str, ...]]] = {
    # the flat layout before the modality subpackages
    "torchlime.segments": "torchlime.image.segments",
    "torchlime.viz": "torchlime.image.viz",
    "torchlime.models": "torchlime.demo.image_models",
    "torchlime.demo_data": "torchlime.demo.image_data",
    "torchlime.audio_data": "torchlime.demo.audio_data",
    "torchlime.audio_models": "torchlime.demo.audio_models",
    "torchlime.audio_segments": "torchlime.audio.segments",
    "torchlime.audio_stft": "torchlime.audio.stft",
    "torchlime.audio_viz": "torchlime.audio.viz",
    "torchlime.text_data": "torchlime.demo.text_data",
    "torchlime.text_models": "torchlime.demo.text_models",
    "torchlime.text_viz": "torchlime.text.viz",
    "torchlime.text_kernel": "torchlime.text.proximity",
    "torchlime.text_infill": "torchlime.text.infill",
    "torchlime.text_perturb": "torchlime.text.edits",
    # the flat stages, engine pieces and methods before the stages/engine/methods subpackages
    "torchlime.features": "torchlime.stages.features",
    "torchlime.sampling": "torchlime.stages.sampling",
    "torchlime.baselines": "torchlime.stages.perturb.fills",
    "torchlime.perturb": "torchlime.stages.perturb.blend",
    "torchlime.perturbation": "torchlime.stages.perturb.record",
    "torchlime.chunking": "torchlime.stages.forward.chunking",
    "torchlime.weighting": "torchlime.stages.weighting",
    "torchlime.surrogate": "torchlime.stages.surrogate",
    "torchlime.explanation": "torchlime.engine.explanation",
    "torchlime.registry": "torchlime.engine.registry",
    "torchlime.presets": "torchlime.engine.presets",
    "torchlime.quality": "torchlime.engine.quality",
    "torchlime.designs": "torchlime.methods.designs",
    "torchlime.adaptive": "torchlime.methods.adaptive",
    "torchlime.shap": "torchlime.methods.kernel_shap",
    "torchlime.bayes": "torchlime.methods.baylime",
    "torchlime.smile": "torchlime.methods.smile",
    "torchlime.selection": "torchlime.methods.feature_selection",
    "torchlime.pick": "torchlime.methods.sp_lime",
    "torchlime.text.kernel": "torchlime.text.proximity",
    "torchlime.text.perturb": "torchlime.text.edits",
    "torchlime.integrations.lightning": "torchlime.integrations.lightning_callback",
    "torchlime.integrations.tensorboard": "torchlime.integrations.tensorboard_probe",
    "torchlime.forward": ("torchlime.stages.forward.model", "torchlime.stages.forward.passes"),
    # the demo data, models and job before the demo subpackage
    "torchlime.image.data": "torchlime.demo.image_data",
    "torchlime.image.models": "torchlime.demo.image_models",
    "torchlime.image.demo": "torchlime.demo.run",
    "torchlime.audio.data": "torchlime.demo.audio_data",
    "torchlime.audio.models": "torchlime.demo.audio_models",
    "torchlime.text.data": "torchlime.demo.text_data",
    "torchlime.text.models": "torchlime.demo.text_models",
}


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        target = ALIASES[spec.name]
        names = (target,) if isinstance(target, str) else target
        warnings.warn(
            f"`{spec.name}` moved to `{' and '.join(names)}`; the old path is an alias that will be "
            f"removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        if isinstance(target, str):
            return importlib.import_module(target)
        merged = ModuleType(spec.name, f"Alias of {', '.join(names)}.")
        for name in names:  # a module split in several: one namespace with the public names of all of them
            module = importlib.import_module(name)
            merged.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        return merged

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the target module is already imported."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]] = None, target: Optional[ModuleType] = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if fullname not in ALIASES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


def install() -> None:
    """Register the alias finder once (``torchlime/__init__`` calls it)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
