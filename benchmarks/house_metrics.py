"""The house's measures of repetition, read from the source with ``ast``: lines of code, wide signatures, seams.

Prints (and with ``--json`` writes) for the package under ``--root`` (default: this checkout):

- ``code_lines``: lines of code in ``torchlime/``, not counting blank lines, comments and docstrings;
- ``wide_public_functions``: public functions and methods outside ``compat/`` with more than 12 named
  parameters (``self``/``cls`` not counted), each with its count;
- ``meta_write_modules``: modules that write an explanation's ``meta`` (``meta[...] =``, ``meta=`` passed to a
  call, ``meta.update``/``setdefault``, or a ``meta`` name bound to a dict);
- ``private_imports_across_packages``: imports of ``torchlime.<a>...._<m>`` from a module outside package ``a``;
- ``loose_top_level_modules``: modules directly in ``torchlime/`` besides ``__init__`` and ``__main__``.

Example:
    python benchmarks/house_metrics.py --root /path/to/checkout --json out.json
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import tokenize
from pathlib import Path

WIDE = 12  # named parameters above which a public function counts as wide


def code_lines(source: str) -> int:
    """Lines holding code: tokens other than comments, newlines and docstrings (a string statement)."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for stmt in body:
                if (
                    isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ):
                    docstrings.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docstrings)
    return len(lines)


def named_parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller can name (positional-or-keyword and keyword-only), ``self``/``cls`` left out."""
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    return sum(a.arg not in ("self", "cls") for a in args) - len(fn.args.posonlyargs)


def private(parts: list[str]) -> bool:
    """Whether a part of a dotted path starts with one underscore (dunders aside)."""
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def is_public(path: Path, qualname: str, exported: set[str]) -> bool:
    """A public name in a public module, or a name some package's ``__all__`` exports (its class's, for a method)."""
    names = qualname.split(".")
    return not private(names) and (names[0] in exported or not private(list(path.with_suffix("").parts)))


def exported_names(root: Path) -> set[str]:
    """Every name listed in an ``__all__`` of the package."""
    names: set[str] = set()
    for init in (root / "torchlime").rglob("__init__.py"):
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    names |= {
                        e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    }
    return names


def functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Module-level functions and methods of module-level classes, with their qualified names."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            out += [
                (f"{node.name}.{f.name}", f)
                for f in node.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
    return out


def writes_meta(tree: ast.Module) -> bool:
    """Whether a module writes ``meta``: a subscript store, a ``meta=`` keyword, an update, or a dict bound to it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            target = node.value
            if (isinstance(target, ast.Name) and target.id == "meta") or (
                isinstance(target, ast.Attribute) and target.attr == "meta"
            ):
                return True
        if isinstance(node, ast.keyword) and node.arg == "meta":
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "setdefault")
        ):
            owner = node.func.value
            if (isinstance(owner, ast.Name) and owner.id == "meta") or (
                isinstance(owner, ast.Attribute) and owner.attr == "meta"
            ):
                return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Dict, ast.Call)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "meta" for t in targets):
                return True
    return False


def private_imports(path: Path, tree: ast.Module) -> list[str]:
    """``torchlime.<a>..._<m>`` imported from a module outside package ``a``."""
    own = path.parts[1] if len(path.parts) > 2 else ""
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if len(parts) < 3 or parts[0] != "torchlime" or parts[1] == own:
                continue
            if private(parts[2:]):
                found.append(f"{path} -> {name}")
                break
    return found


def measure(root: Path) -> dict[str, object]:
    """Every measure of the module docstring for the checkout at ``root``."""
    total, wide, meta, reached = 0, [], [], []
    exported = exported_names(root)
    for file in sorted((root / "torchlime").rglob("*.py")):
        path = file.relative_to(root)
        if "kernels" in path.parts:
            continue
        source = file.read_text()
        tree = ast.parse(source)
        total += code_lines(source)
        if path.parts[1] != "compat":
            for qualname, fn in functions(tree):
                count = named_parameters(fn)
                if count > WIDE and is_public(path, qualname, exported):
                    wide.append(f"{path}:{qualname} {count}")
        if writes_meta(tree):
            meta.append(str(path))
        reached += private_imports(path, tree)
    loose = sorted(p.name for p in (root / "torchlime").glob("*.py") if p.stem not in ("__init__", "__main__"))
    return dict(
        code_lines=total,
        wide_public_functions=wide,
        meta_write_modules=meta,
        private_imports_across_packages=sorted(set(reached)),
        loose_top_level_modules=loose,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    result = measure(args.root)
    for key, value in result.items():
        print(f"{key}: {len(value) if isinstance(value, list) else value}")
        for item in value if isinstance(value, list) else []:
            print(f"    {item}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
