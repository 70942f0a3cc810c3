"""Old spellings of a call, accepted for one release with a ``DeprecationWarning`` that names the new one.

``renamed(old="new", ...)`` maps a renamed keyword to its new name, ``replaced(...)`` a retired keyword
to the parameter that now carries its meaning; ``legacy_positions(...)`` keeps
an old positional order working (a signature whose arguments were reordered, or options that became
keyword-only). Both keep the decorated function's signature and docstring (``inspect.signature`` shows
the new names), and both warn at the line of the caller's code, however many of them are stacked.
"""

from __future__ import annotations

import functools
import inspect
import sys
import warnings
from typing import Callable, Optional, Sequence, TypeVar, cast

F = TypeVar("F", bound=Callable[..., object])

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def warn_deprecated(message: str) -> None:
    """Emit a ``DeprecationWarning`` attributed to the first caller outside this module.

    Args:
        message: what is deprecated and what to write instead.
    """
    frame = sys._getframe(1)
    level = 2  # stacklevel 2 is the frame that called this function
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
        level += 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def _parameters(fn: Callable[..., object]) -> tuple[list[str], set[str], bool]:
    """``fn``'s positional parameter names, all its named parameters, and whether it takes ``**kwargs``."""
    params = inspect.signature(fn).parameters.values()
    positional = [p.name for p in params if p.kind in _POSITIONAL]
    named = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return positional, named, any(p.kind == p.VAR_KEYWORD for p in params)


def renamed(**names: str) -> Callable[[F], F]:
    """Accept the old keyword of a renamed parameter for one release, with a ``DeprecationWarning``.

    A call passing ``old=value`` runs as ``new=value`` and warns ``f(): `old=` is deprecated, use
    `new=```; positional calls are not affected. The new name must be a parameter of the decorated
    function (or go to its ``**kwargs``), the old one must not.

    Args:
        **names: ``old="new"`` pairs: each old keyword and the parameter it is now.

    Returns:
        The decorator.

    Raises:
        ValueError: (when decorating) an old name that is still a parameter, or a new one that is not.
        TypeError: (when called) a call that gives both the old and the new keyword.

    Example:
        >>> @renamed(exp="explanation")
        ... def show(explanation: int, *, scale: int = 1) -> int:
        ...     return explanation * scale
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     show(exp=3)
        3
        >>> print(caught[0].category.__name__, caught[0].message)
        DeprecationWarning show(): `exp=` is deprecated, use `explanation=`
        >>> list(inspect.signature(show).parameters)
        ['explanation', 'scale']
    """
    return _replacing({old: (new, _same, f"`{new}=`") for old, new in names.items()})


def replaced(old: str, new: str, convert: Callable[[object], object], spelling: str) -> Callable[[F], F]:
    """Accept a retired keyword whose value now goes, converted, to another parameter (one release).

    A call passing ``old=value`` runs as ``new=convert(value)`` and warns ``f(): `old=` is
    deprecated, use <spelling>``.

    Args:
        old: the retired keyword (not a parameter of the decorated function).
        new: the parameter that takes its meaning now.
        convert: old value -> the value of ``new``.
        spelling: what to write instead, as the warning shows it.

    Returns:
        The decorator.

    Example:
        >>> @replaced("double", "scale", lambda d: 2 if d else 1, "`scale=2`")
        ... def show(x: int, *, scale: int = 1) -> int:
        ...     return x * scale
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     show(3, double=True)
        6
        >>> print(caught[0].message)
        show(): `double=` is deprecated, use `scale=2`
    """
    return _replacing({old: (new, convert, spelling)})


def _same(value: object) -> object:
    """The value as it came (a plain rename)."""
    return value


def _replacing(names: dict[str, tuple[str, Callable[[object], object], str]]) -> Callable[[F], F]:
    """The decorator of ``renamed`` and ``replaced``: ``old -> (new, convert, spelling)``."""

    def decorate(fn: F) -> F:
        _, named, var_keyword = _parameters(fn)
        for old, (new, _, _) in names.items():
            if old in named:
                raise ValueError(f"`{old}` is still a parameter of {fn.__qualname__}: it cannot be a renamed one")
            if new not in named and not var_keyword:
                raise ValueError(f"`{new}` is not a parameter of {fn.__qualname__}")
        title = fn.__qualname__.removesuffix(".__init__") if fn.__name__ == "__init__" else fn.__name__

        @functools.wraps(fn)
        def wrapper(*args: object, **kwargs: object) -> object:
            for old, (new, convert, spelling) in names.items():
                if old not in kwargs:
                    continue
                if new in kwargs:
                    raise TypeError(f"{title}() got both `{old}=` (deprecated) and `{new}=`: pass `{new}=` only")
                warn_deprecated(f"{title}(): `{old}=` is deprecated, use {spelling}")
                kwargs[new] = convert(kwargs.pop(old))
            return fn(*args, **kwargs)

        return cast(F, wrapper)

    return decorate


def legacy_positions(
    old: Sequence[str], detect: Optional[Callable[[tuple[object, ...]], bool]] = None
) -> Callable[[F], F]:
    """Run a call written in the function's old positional order, for one release, with a ``DeprecationWarning``.

    A call is in the old order when ``detect(args)`` says so (arguments reordered: told apart by their
    types, e.g. a path where the explanation now goes), or, without ``detect``, when it passes more
    positional arguments than the function now takes (options that became keyword-only). Its positional
    arguments are then given, by keyword, to the names ``old`` in order.

    Args:
        old: the names, in the function's new spelling, that the old signature took by position, in order.
        detect: ``detect(args) -> bool``, True for positional arguments in the old order.

    Returns:
        The decorator.

    Raises:
        ValueError: (when decorating) a name of ``old`` that is not a parameter.
        TypeError: (when called) more positional arguments than ``old`` names, or a name given twice.

    Example:
        >>> @legacy_positions(["path", "data"], detect=lambda args: isinstance(args[0], str))
        ... def save(data: list[int], path: str, *, index: int = 0) -> str:
        ...     return f"{path}: {data[index]}"
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     save("out.txt", [4, 5], index=1)
        'out.txt: 5'
        >>> print(caught[0].message)
        save(path, data) is deprecated: call save(data, path)
    """
    names = list(old)

    def decorate(fn: F) -> F:
        positional, named, _ = _parameters(fn)
        missing = [n for n in names if n not in named]
        if missing:
            raise ValueError(f"{missing} are not parameters of {fn.__qualname__}")
        title = fn.__name__

        def is_old(args: tuple[object, ...]) -> bool:
            return detect(args) if detect is not None else len(args) > len(positional)

        @functools.wraps(fn)
        def wrapper(*args: object, **kwargs: object) -> object:
            if not args or not is_old(args):
                return fn(*args, **kwargs)
            if len(args) > len(names):
                raise TypeError(f"{title}() takes at most {len(names)} positional arguments, got {len(args)}")
            given = names[: len(args)]
            twice = [n for n in given if n in kwargs]
            if twice:
                raise TypeError(f"{title}() got several values for {', '.join(f'`{n}`' for n in twice)}")
            options = [f"{n}=" for n in given if n not in positional]
            now = f"{title}({', '.join(positional)})" + (f" with {', '.join(options)} by keyword" if options else "")
            warn_deprecated(f"{title}({', '.join(given)}) is deprecated: call {now}")
            return fn(**dict(zip(given, args)), **kwargs)

        return cast(F, wrapper)

    return decorate
