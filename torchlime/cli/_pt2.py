"""The checks an ExportedProgram file (``torch.export.save``, usually ``.pt2``) passes before it is loaded.

``torch.export.load`` can run code that the file brings: it unpickles the sample inputs, pickled weights and
constants (retrying with ``weights_only=False``, or with plain ``pickle``), it reads every shape expression
with sympy's ``sympify`` (Python's ``eval``), and the program's module is Python code generated from the
names and guards the file holds. ``check_exported`` reads the archive first and refuses the file, by name,
when:

* a member that would be unpickled does not load with ``torch.load(..., weights_only=True)`` (the
  weight and constant bytes that the archive's payload configs list as raw tensors are no pickles);
* a shape expression is anything but sympy's ``srepr`` of arithmetic on symbols and numbers, or a guard
  anything but arithmetic and comparisons of the inputs' sizes;
* a name (of a node, parameter, buffer, constant, module path, or a key of the inputs' spec) holds
  characters other than letters, digits and ``_ . : # -``, or a parameter of the forward is no identifier;
* members lie at the archive's root (the layout of torch 2.5 and older, read with fewer checks) or
  two members share a name.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import math
import re
import warnings
import zipfile
from pathlib import Path
from typing import Iterator, NoReturn, Optional

import torch

from torchlime.cli._common import CliError, short_error

#: members read as text or not read by ``torch.export.load``
_TEXT = {"archive_format", "archive_version", "byteorder", ".data/version", ".data/serialization_id"}
#: payload folders and the file-name prefix of their raw tensors
_RAW = {"data/weights/": "weight_", "data/constants/": "tensor_"}
_CONFIG = re.compile(r"(data/(?:weights|constants)/)[^/]*_config\.json\Z")
_NAME = re.compile(r"[\w.:#\-]*\Z")
_NAME_KEYS = {"name", "target", "fqn", "as_name"}
_ODD_NAME = "a name with characters other than letters, digits and _.:#-"
_WORD = re.compile(r"[A-Za-z_]\w*\Z")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_OPERATORS = (ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.Load)
_PLAIN_NODES = (ast.Expression, ast.Call, ast.Name, ast.Constant, ast.Tuple, ast.keyword, ast.BinOp, ast.UnaryOp)
_GUARD_NODES = (ast.BoolOp, ast.Compare, ast.IfExp, ast.Subscript, ast.Attribute)
_GUARD_NAMES = frozenset(
    {"L", "math", "IsNonOverlappingAndDenseIndicator", "cast_symbool_to_symint_guardless"}
    | {"abs", "bool", "float", "int", "max", "min", "round"}
)
_GUARD_ATTRIBUTES = frozenset({"size", "stride", "storage_offset", "shape", "dim", "numel"}) | frozenset(
    n for n in dir(math) if not n.startswith("_")
)


@functools.cache
def _sympy_names() -> frozenset[str]:
    """The names of sympy's (and torch's sympy) classes and constants: all a shape expression may call."""
    import sympy
    from torch.utils._sympy import functions, numbers

    def basic(value: object) -> bool:
        return isinstance(value, sympy.Basic) or (isinstance(value, type) and issubclass(value, sympy.Basic))

    return frozenset(
        n for m in (sympy, functions, numbers) for n in dir(m) if not n.startswith("_") and basic(getattr(m, n))
    )


def _plain_expression(text: str, names: frozenset[str], guard: bool) -> bool:  # noqa: C901
    """Whether ``text`` is one expression of calls of ``names``, numbers, words and operators.

    Guards (``guard``) may also compare, index by a number or word, and read the attributes of
    ``_GUARD_ATTRIBUTES``; a string may only be a word or a number, and no name starts with "_".
    """
    if len(text) > 100_000 or any(c in text for c in '\\"#;\n\r'):
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    allowed = _PLAIN_NODES + _GUARD_NODES if guard else _PLAIN_NODES
    for node in ast.walk(tree):
        if isinstance(node, _OPERATORS):
            continue
        if not isinstance(node, allowed):
            return False
        if isinstance(node, ast.Name) and node.id not in names:
            return False
        if isinstance(node, ast.Attribute) and node.attr not in _GUARD_ATTRIBUTES:
            return False
        if isinstance(node, ast.keyword) and (node.arg is None or node.arg.startswith("_")):
            return False
        if isinstance(node, ast.Call) and not isinstance(node.func, (ast.Name, ast.Attribute)):
            return False
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if not (_WORD.match(node.value) or _NUMBER.match(node.value)):
                return False
        elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, type(None))):
            return False
    return True


def _spec_words(value: object) -> Iterator[str]:
    """The strings of a serialized pytree spec (``in_spec``), with the JSON strings inside it decoded."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            decoded = value
        if isinstance(decoded, str):
            yield decoded
            return
        value = decoded
    items = [*value.keys(), *value.values()] if isinstance(value, dict) else value if isinstance(value, list) else []
    for item in items:
        yield from _spec_words(item)


def _odd_name(key: str, value: object) -> Optional[str]:
    """The first name under ``key`` that generated code could not quote safely, else None."""
    if key == "forward_arg_names" and isinstance(value, list):  # the parameters of the generated forward
        return next((str(v) for v in value if not (isinstance(v, str) and _WORD.match(v))), None)
    if key in ("in_spec", "out_spec") and isinstance(value, str):  # their keys are quoted in the generated code
        return next((w for w in _spec_words(value) if not _NAME.match(w)), None)
    if (key in _NAME_KEYS or key.endswith(("_name", "_fqn"))) and isinstance(value, str):
        return None if _NAME.match(value) else value
    return None


def _check_program(doc: object, member: str, path: Path) -> None:
    """Refuse a program (``models/*.json``) whose expressions, guards or names are not plain."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            if key == "expr_str" and isinstance(value, str):
                if not _plain_expression(value, _sympy_names(), guard=False):
                    _refuse(path, member, f"a shape expression that is not plain arithmetic: {value[:80]!r}")
            elif key == "guards_code" and isinstance(value, list):
                for guard in value:
                    if not isinstance(guard, str) or not _plain_expression(guard, _GUARD_NAMES, guard=True):
                        _refuse(path, member, f"a guard that is not a plain comparison of sizes: {str(guard)[:80]!r}")
            odd = _odd_name(key, value)
            if odd is not None:
                _refuse(path, member, f"{_ODD_NAME} ({key}): {odd[:80]!r}")
            stack.append(value)


def _weights_only(data: bytes) -> str:
    """Why ``data`` does not load with ``torch.load(weights_only=True)``, or "" when it does."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - every failure is a refusal, with its reason
        said = re.search(r"WeightsUnpickler error:\s*(.+?)(\. Please|\n|$)", str(err))
        return said.group(1).strip()[:120] if said else short_error(err, 120)
    return ""


def _refuse(path: Path, member: str, what: str) -> NoReturn:
    """Raise the refusal of ``path`` for what ``member`` holds."""
    raise CliError(f"MODEL {path} is refused: its member {member} holds {what}; loading it could run code")


def _payloads(z: zipfile.ZipFile, names: list[str], path: Path) -> tuple[set[str], set[str]]:
    """The members the payload configs list as raw tensor bytes and as pickles (by full name)."""
    raw: set[str] = set()
    pickled: set[str] = set()
    for name in names:
        tail = name.split("/", 1)[-1]
        folder = _CONFIG.match(tail)
        if folder is None:
            continue
        try:
            entries = json.loads(z.read(name))["config"]
            for fqn, meta in entries.items():
                if not _NAME.match(fqn):
                    _refuse(path, name, f"{_ODD_NAME}: {fqn[:80]!r}")
                member = name[: len(name) - len(tail)] + folder.group(1) + str(meta["path_name"])
                plain = meta["use_pickle"] is False and str(meta["path_name"]).startswith(_RAW[folder.group(1)])
                (raw if plain else pickled).add(member)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CliError(f"MODEL {path}: its member {name} is not a payload config ({short_error(err)})") from None
    return raw - pickled, pickled


def check_exported(path: Path) -> None:
    """Refuse an ExportedProgram archive that could run code on ``torch.export.load`` (see the module).

    Args:
        path: the ``.pt2`` file.

    Raises:
        CliError: naming the file, the member and what it holds.
    """
    try:
        with zipfile.ZipFile(path) as z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise CliError(f"MODEL {path} is refused: two of its members share a name")
            if any("/" not in n for n in names):
                raise CliError(
                    f"MODEL {path} is refused: it has the archive layout of torch 2.5 and older, whose pickles "
                    f"torch.export.load reads unchecked; save the program again with torch.export.save"
                )
            raw, pickled = _payloads(z, names, path)
            for info in infos:
                name, tail = info.filename, info.filename.split("/", 1)[-1]
                if info.file_size == 0 or (name in raw) or (name not in pickled and tail in _TEXT):
                    continue
                if name not in pickled and (tail.startswith("extra/") or tail.endswith(".json")):
                    if tail.startswith("models/"):
                        _check_program(json.loads(z.read(name)), name, path)
                    continue
                why = _weights_only(z.read(name))
                if why:
                    _refuse(path, name, f"a pickle that torch.load(weights_only=True) refuses ({why})")
    except (OSError, zipfile.BadZipFile, ValueError, RecursionError) as err:
        raise CliError(f"MODEL {path} cannot be read as an ExportedProgram archive: {short_error(err)}") from None
