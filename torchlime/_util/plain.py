"""Plain data for files loaded with ``torch.load(weights_only=True)``: strings, numbers, bools, None, lists, dicts."""

from __future__ import annotations

from typing import Any

__all__ = ["plain"]


def plain(value: Any) -> Any:
    """``value`` as plain data: dict keys as strings, tuples as lists, anything else not plain as its ``repr``.

    Args:
        value: nested settings (dicts, lists, tuples, numbers, strings, objects).

    Returns:
        The same nesting of plain data only.

    Example:
        >>> plain({"n": 3, 1: (0.5, None), "kernel": object}) == {"n": 3, "1": [0.5, None], "kernel": repr(object)}
        True
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)
