"""The type check only tightens: all of torchlime/ is checked, and the strictly typed set only grows.

``.ci/run`` runs ``mypy`` with the configuration in pyproject.toml. This test holds the configuration
itself: no module is excluded or has its errors ignored, every definition must be typed, and the modules
held to ``strict`` options include at least the ones listed here (a module may join, never leave).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
# modules that passed the strict options when they joined; the set in pyproject.toml must contain them
STRICT_FLOOR: frozenset[str] = frozenset(
    {
        "torchlime",
        "torchlime.__main__",
        "torchlime._aliases",
        "torchlime._backend",
        "torchlime._checks",
        "torchlime._cudagraphs",
        "torchlime._nested",
        "torchlime.accel",
        "torchlime.audio.segments",
        "torchlime.audio.stft",
        "torchlime.compat",
        "torchlime.compat._captum_args",
        "torchlime.compat._vocabulary",
        "torchlime.compat.captum",
        "torchlime.compat.lime",
        "torchlime.compat.lime._checks",
        "torchlime.compat.lime._common",
        "torchlime.compat.lime._explanation",
        "torchlime.compat.lime._image",
        "torchlime.compat.lime._stats",
        "torchlime.compat.lime._tabular",
        "torchlime.compat.lime._text",
        "torchlime.engine",
        "torchlime.engine.assemble",
        "torchlime.engine.explainer",
        "torchlime.engine.modality",
        "torchlime.engine.info",
        "torchlime.engine.config",
        "torchlime.engine.explanation",
        "torchlime.engine.multi",
        "torchlime.engine.notebook",
        "torchlime.engine.plan",
        "torchlime.engine.presets",
        "torchlime.engine.quality",
        "torchlime.engine.registry",
        "torchlime.engine.resolve",
        "torchlime.engine.rows",
        "torchlime.engine.run",
        "torchlime.image._connect",
        "torchlime.image._slic",
        "torchlime.image.segments",
        "torchlime.integrations",
        "torchlime.integrations.lightning_callback",
        "torchlime.integrations.tensorboard_probe",
        "torchlime.methods",
        "torchlime.methods.adaptive",
        "torchlime.methods.baylime",
        "torchlime.methods.designs",
        "torchlime.methods.feature_selection",
        "torchlime.methods.kernel_shap",
        "torchlime.methods.lars",
        "torchlime.methods.smile",
        "torchlime.methods.sp_lime",
        "torchlime.stages",
        "torchlime.stages.features",
        "torchlime.stages.forward",
        "torchlime.stages.forward.chunking",
        "torchlime.stages.forward.errors",
        "torchlime.stages.forward.model",
        "torchlime.stages.forward.passes",
        "torchlime.stages.forward.targets",
        "torchlime.stages.normal",
        "torchlime.stages.perturb",
        "torchlime.stages.perturb.blend",
        "torchlime.stages.perturb.fills",
        "torchlime.stages.perturb.packing",
        "torchlime.stages.perturb.record",
        "torchlime.stages.sampling",
        "torchlime.stages.surrogate",
        "torchlime.stages.weighting",
        "torchlime.tabular",
        "torchlime.tabular._conditions",
        "torchlime.tabular._discretize",
        "torchlime.tabular._numpy",
        "torchlime.tabular._proximity",
        "torchlime.tabular._sample",
        "torchlime.tabular._stats",
        "torchlime.targets",
        "torchlime.targets._base",
        "torchlime.targets.boxes",
        "torchlime.targets.continuation",
        "torchlime.targets.region",
        "torchlime.targets.similarity",
        "torchlime.targets.transcript",
        "torchlime.text.edits",
        "torchlime.text.generation",
        "torchlime.text.infill",
        "torchlime.text.proximity",
        "torchlime.text.split",
        "torchlime.text.strings",
        "torchlime.training",
        "torchlime.typing",
    }
)
STRICT_OPTIONS = {"disallow_any_generics", "warn_return_any", "disallow_untyped_calls", "strict_equality"}


def mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def strict_modules(config: dict) -> set[str]:
    found: set[str] = set()
    for override in config.get("overrides", []):
        if STRICT_OPTIONS <= {k for k, v in override.items() if v is True}:
            modules = override["module"]
            found |= {modules} if isinstance(modules, str) else set(modules)
    return found


def test_all_of_the_package_is_checked():
    config = mypy_config()
    assert config["files"] == ["torchlime"]
    assert "exclude" not in config
    assert config.get("disallow_untyped_defs") is True and config.get("check_untyped_defs") is True
    for override in config.get("overrides", []):
        assert not override.get("ignore_errors"), f"errors ignored in {override['module']}"


def test_strict_set_only_grows():
    strict = strict_modules(mypy_config())
    left = sorted(STRICT_FLOOR - strict)
    assert not left, f"modules left the strictly typed set: {left}"


def test_strict_modules_exist():
    strict = strict_modules(mypy_config())
    missing = sorted(m for m in strict if importlib.util.find_spec(m) is None)
    assert not missing, f"strict set names modules that do not exist: {missing}"
