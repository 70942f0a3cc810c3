"""The type check only tightens: all of torchlime/ is checked with the strict options, and ``Any`` stays rare.

``.ci/run`` runs ``mypy`` with the configuration in pyproject.toml. This test holds the configuration
itself: no module is excluded or has its errors ignored, every definition must be typed, every module is
held to the strict options (no bare generics, no Any returned, no untyped calls, strict equality), and at
most ``ANY_CEILING`` of the package's annotations name ``Any``.
"""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
STRICT_OPTIONS = {"disallow_any_generics", "warn_return_any", "disallow_untyped_calls", "strict_equality"}


def mypy_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def test_all_of_the_package_is_checked():
    config = mypy_config()
    assert config["files"] == ["torchlime"]
    assert "exclude" not in config
    assert config.get("disallow_untyped_defs") is True and config.get("check_untyped_defs") is True
    for override in config.get("overrides", []):
        assert not override.get("ignore_errors"), f"errors ignored in {override['module']}"


def test_every_module_is_strict():
    config = mypy_config()
    assert all(config.get(option) is True for option in STRICT_OPTIONS), f"strict options: {sorted(STRICT_OPTIONS)}"
    for override in config.get("overrides", []):  # no module is let off any of them
        assert not any(override.get(option) is False for option in STRICT_OPTIONS), override["module"]


#: the largest share of annotations of torchlime/ that may name ``Any`` (only ever lowered)
ANY_CEILING = 0.03


def annotations_naming_any() -> tuple[int, int]:
    """(annotations, those naming ``Any``) over every parameter, return and annotated assignment of torchlime/."""
    import ast
    import re

    total = with_any = 0
    for path in (ROOT / "torchlime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            found: list[ast.expr] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                found = [p.annotation for p in params if p is not None and p.annotation is not None]
                found += [node.returns] if node.returns is not None else []
            elif isinstance(node, ast.AnnAssign):
                found = [node.annotation]
            total += len(found)
            with_any += sum(bool(re.search(r"\bAny\b", ast.unparse(x))) for x in found)
    return total, with_any


def test_any_is_rare():
    total, with_any = annotations_naming_any()
    assert total > 3000
    assert with_any / total <= ANY_CEILING, f"{with_any} of {total} annotations name Any ({with_any / total:.1%})"
