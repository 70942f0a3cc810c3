"""What a CUDA graph reads, kept alive as long as the graph: one per-thread list that makers append to.

A graph captured around an upload copies from its pinned host memory at every replay, and one that
reads a cached tensor reads its memory at every replay: whoever keeps the graph must keep those too,
even after their maker lets them go. ``keeping(into)`` opens such a list for the current thread and
``keep(value)`` appends to it when one is open (otherwise it does nothing).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

__all__ = ["keep", "keeping"]

_LOCAL = threading.local()


@contextlib.contextmanager
def keeping(into: list[Any]) -> Iterator[None]:
    """Append everything ``keep`` is given in this thread inside the context to ``into``.

    Args:
        into: the list that keeps them.

    Yields:
        Nothing.
    """
    old = getattr(_LOCAL, "into", None)
    _LOCAL.into = into
    try:
        yield
    finally:
        _LOCAL.into = old


def keep(value: object) -> None:
    """Append ``value`` to the list ``keeping`` opened in this thread, if one is open.

    Args:
        value: a pinned host copy, a cached tensor, anything a captured graph reads.
    """
    into = getattr(_LOCAL, "into", None)
    if into is not None:
        into.append(value)
