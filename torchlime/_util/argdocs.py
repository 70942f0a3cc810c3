"""Argument descriptions written once: ``with_args`` adds them to the docstrings that leave them out.

Several public functions take the same arguments with the same meaning (the metrics' ``model``,
``inputs`` and ``explanation``; the feature selections' normal equations). Their descriptions live in
one mapping, and each function's docstring gets the entries it does not write itself, in signature
order, so that ``help()``, the API reference and the docstring checks see every argument.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Mapping, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_SECTION = re.compile(r"^(\s*)(Args|Returns|Yields|Raises|Example|Examples|Note|Notes|Attributes):\s*$")
_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:")


def with_args(known: Mapping[str, str]) -> Callable[[F], F]:
    """A decorator: ``fn`` with the entries of ``known`` for the parameters its ``Args:`` leaves out.

    Each entry goes before the entry of the next parameter the docstring describes (in signature
    order), else at the end of the section; a docstring without ``Args:`` gets one before its first
    section (``Returns:``, ``Raises:``, ...).

    Args:
        known: parameter name -> its description (continuation lines separated by newlines).

    Returns:
        The decorator; it sets ``fn.__doc__`` and returns ``fn`` itself.

    Example:
        >>> @with_args({"x": "(N,) the values."})
        ... def total(x, y):
        ...     '''The sum.
        ...
        ...     Args:
        ...         y: (N,) the other values.
        ...     '''
        >>> import inspect
        >>> print(inspect.getdoc(total))
        The sum.
        <BLANKLINE>
        Args:
            x: (N,) the values.
            y: (N,) the other values.
    """

    def decorate(fn: F) -> F:
        fn.__doc__ = completed(fn.__doc__ or "", _names(fn), known)
        return fn

    return decorate


def _names(fn: Callable[..., Any]) -> list[str]:
    """``fn``'s parameter names as an ``Args:`` entry spells them (``*args``, ``**kwargs``), without self."""
    stars: dict[object, str] = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    params = inspect.signature(fn).parameters.values()
    return [stars.get(p.kind, "") + p.name for p in params if p.name not in ("self", "cls")]


def completed(doc: str, names: list[str], known: Mapping[str, str]) -> str:
    """``doc`` with the ``known`` entries of ``names`` that its ``Args:`` section lacks.

    Args:
        doc: a google-style docstring, as written (indented).
        names: the parameters in signature order.
        known: name -> description.

    Returns:
        The docstring with the entries added.
    """
    lines = doc.split("\n")
    head = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if head is None:
        first = next((i for i, line in enumerate(lines) if _SECTION.match(line)), None)
        if first is None:  # the Args section goes last, before the closing line's indentation
            closing = len(lines) - 1 if len(lines) > 1 and not lines[-1].strip() else len(lines)
            lines[closing:closing] = ["", f"{_indent(lines[closing:] or ['    '])}Args:"]
            head = closing + 1
        else:
            lines[first:first] = [f"{_indent(lines[first:])}Args:", ""]
            head = first
    pad = _indent(lines[head:]) + "    "
    starts: dict[str, int] = {}
    end = head + 1
    for i in range(head + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line.startswith(pad):
            break
        rest = line[len(pad) :] if line.startswith(pad) else " "
        found = _ENTRY.match(rest) if rest[:1] != " " else None
        if found:
            starts[found.group(1)] = i
        if line.strip():
            end = i + 1
    inserts: list[tuple[int, int, list[str]]] = []
    for k, name in enumerate(names):
        if name in starts or name not in known:
            continue
        later = [starts[m] for m in names[k + 1 :] if m in starts]
        text = known[name].split("\n")
        entry = [f"{pad}{name}: {text[0]}", *(f"{pad}    {t}" for t in text[1:])]
        inserts.append((later[0] if later else end, k, entry))
    for at, _, entry in sorted(inserts, reverse=True):
        lines[at:at] = entry
    return "\n".join(lines)


def _indent(lines: list[str]) -> str:
    """The leading white space of the first of ``lines``."""
    return lines[0][: len(lines[0]) - len(lines[0].lstrip())]
