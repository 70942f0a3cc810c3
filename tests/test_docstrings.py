"""The public API's docstrings: every argument on its own line, every tensor argument with its shape.

ruff's ``D`` rules (google convention) check the form of every docstring; this test checks what ruff
cannot: that each public function, class and public method exported by a public package documents each
of its parameters in an ``Args:`` section (``Attributes:`` for a dataclass), and that a parameter
annotated as a tensor says its shape, e.g. ``inputs: (B, C, H, W) images``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any, Callable

import pytest

PUBLIC_PACKAGES = [
    "torchlime",
    "torchlime.stages",
    "torchlime.engine",
    "torchlime.methods",
    "torchlime.image",
    "torchlime.audio",
    "torchlime.text",
    "torchlime.tabular",
    "torchlime.metrics",
    "torchlime.dataset",
    "torchlime.integrations.tensorboard_probe",
    "torchlime.integrations.lightning_callback",
    "torchlime.compat.captum",
    "torchlime.compat.lime",
]
#: public objects exempt from this rule: empty now, and kept empty (a listed object that passes fails the test)
PENDING: frozenset[str] = frozenset()
#: the modules pyproject.toml exempts from ruff's D rules: empty now, and kept empty
RUFF_D_PENDING: frozenset[str] = frozenset()
SECTION = re.compile(r"^(\s*)(Args|Arguments|Attributes|Parameters):\s*$")
ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:")
SHAPE = re.compile(r"\([^()]*[A-Z0-9][^()]*\)|\bscalar\b|0-d|shape", re.IGNORECASE)


def documented_args(doc: str) -> dict[str, str]:
    """The ``name -> description`` entries of a google docstring's Args/Attributes sections."""
    out: dict[str, str] = {}
    lines = doc.expandtabs().splitlines()
    i = 0
    while i < len(lines):
        match = SECTION.match(lines[i])
        i += 1
        if not match:
            continue
        base = len(match.group(1))
        entry_indent = None
        current = None
        while i < len(lines):
            line = lines[i]
            if line.strip() == "":
                i += 1
                continue
            indent = len(line) - len(line.lstrip())
            if indent <= base:
                break
            if entry_indent is None:
                entry_indent = indent
            found = ENTRY.match(line.strip()) if indent == entry_indent else None
            if found:
                current = found.group(1).lstrip("*")
                out[current] = line.strip()
            elif current is not None:
                out[current] += " " + line.strip()
            i += 1
    return out


def is_tensor_annotation(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
    return bool(re.search(r"\bTensor\b", str(text)))


def own_parameters(obj: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return []
    skip = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [p for p in params if p.name not in ("self", "cls") and p.kind not in skip]


def public_objects() -> list[tuple[str, Any, Any]]:
    """``(qualified name, object whose docstring holds the args, callable with the signature)``."""
    seen: set[int] = set()
    found: list[tuple[str, Any, Any]] = []
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name, None)
            if id(obj) in seen or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            seen.add(id(obj))
            qual = f"{obj.__module__}.{obj.__qualname__}"
            if inspect.isfunction(obj):
                found.append((qual, obj, obj))
                continue
            if issubclass(obj, BaseException):
                continue
            found.append((qual, obj, obj))
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                found.append((f"{qual}.{attr}", member, member))
    return found


OBJECTS = public_objects()


@pytest.mark.parametrize("qual, holder, target", OBJECTS, ids=[o[0] for o in OBJECTS])
def test_every_argument_documented_with_shapes(qual: str, holder: Any, target: Any) -> None:
    if qual in PENDING:
        with pytest.raises(AssertionError):
            check_arguments(qual, holder, target)  # still pending; once it passes, remove it from PENDING
        return
    check_arguments(qual, holder, target)


def test_pending_names_exist() -> None:
    assert PENDING <= {o[0] for o in OBJECTS}, sorted(PENDING - {o[0] for o in OBJECTS})


def check_arguments(qual: str, holder: Any, target: Any) -> None:
    """Assert that every parameter has an Args entry and every tensor parameter's entry a shape."""
    params = own_parameters(target)
    if inspect.isclass(holder) and dataclasses.is_dataclass(holder):
        params = [p for p in params if not p.name.startswith("_")]
    if not params:
        return
    doc = inspect.getdoc(holder) or ""
    documented = documented_args(doc)
    missing = [p.name for p in params if p.name not in documented]
    assert not missing, f"{qual}: parameters without an Args entry: {missing}"
    hints: dict[str, Any] = {}
    try:
        hints = inspect.get_annotations(target.__init__ if inspect.isclass(target) else target, eval_str=False)
    except Exception:
        pass
    no_shape = [
        p.name for p in params if is_tensor_annotation(hints.get(p.name, "")) and not SHAPE.search(documented[p.name])
    ]
    assert not no_shape, f"{qual}: tensor arguments whose entry gives no shape: {no_shape}"


def test_the_parser_reads_google_sections() -> None:
    doc = """Summary.

    Args:
        inputs: (B, C, H, W) images
            on any device.
        n_samples (int): rows per input.

    Returns:
        Something.
    """
    args = documented_args(inspect.cleandoc(doc))
    assert set(args) == {"inputs", "n_samples"}
    assert SHAPE.search(args["inputs"]) and "any device" in args["inputs"]


def test_ruff_docstring_exemptions_only_shrink() -> None:
    """pyproject.toml exempts some modules from ruff's D rules; none may join the list."""
    from pathlib import Path

    import tomllib

    root = Path(__file__).resolve().parents[1]
    ignores = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["ruff"]["lint"]["per-file-ignores"]
    exempt = {k for k, v in ignores.items() if k.startswith("torchlime/") and "D" in v}
    assert exempt <= RUFF_D_PENDING, f"modules newly exempt from ruff D: {sorted(exempt - RUFF_D_PENDING)}"
    assert all((root / f).exists() for f in exempt)
