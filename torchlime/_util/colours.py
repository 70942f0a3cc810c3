"""The one colour convention of every picture: red supports the target, blue opposes it.

Every view (matplotlib figures, the notebook display, HTML of texts and tokens) draws weights with one
diverging map centred at 0, ``CMAP`` (matplotlib's "RdBu_r"), and names it in its legend (``LEGEND``;
colour bars: ``label``). The views that do not need matplotlib use the same map's strong red and blue:
the notebook ``diverging`` / ``css`` (interpolated linearly through its centre colour), the HTML of texts
and tokens ``rgba`` (red or blue, opacity growing with |weight|). The lime layer's HTML keeps lime's own
colours.

Pictures name the explained target by its class: ``class_name`` reads the caller's ``class_names=`` (a
sequence indexed by class or a mapping class -> name) and falls back to the index, so a legend says
"supports 'cat'" where the caller named class 1 "cat", else "supports '1'".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional, Union

import torch

#: the matplotlib colour map of every figure's weights (red positive, blue negative)
CMAP = "RdBu_r"
#: what every legend says
LEGEND = "red supports the target, blue opposes it"
#: the opacity of the faintest and of the strongest highlight of ``rgba``
ALPHA_MIN, ALPHA_MAX = 0.08, 0.8
#: the map's strong red, centre and strong blue (ColorBrewer RdBu, one step in from its darkest ends), RGB
RED = (178, 24, 43)
WHITE = (247, 247, 247)
BLUE = (33, 102, 172)
#: the same as hex strings (bars of a chart, swatches of a legend)
RED_HEX = "#b2182b"
BLUE_HEX = "#2166ac"
#: what ``class_names=`` of the pictures takes: names indexed by class, or a mapping class -> name
ClassNames = Union[Sequence[str], Mapping[int, str]]
#: the longest class name a picture shows; longer ones are cut, ending in "…" (the pictures fit this many)
NAME_CHARS = 30


def class_name(label: int, class_names: Optional[ClassNames] = None, default: Optional[str] = None) -> str:
    """The name a picture gives class ``label``: the caller's name for it, else ``default``, else the index.

    A name longer than ``NAME_CHARS`` is cut to that many characters, the last one "…", so that titles
    and legends stay on the canvas.

    Args:
        label: the class.
        class_names: names indexed by class (a list, tuple or array), or a mapping class -> name; None.
        default: the name of a class ``class_names`` does not name (default: ``str(label)``).

    Returns:
        The name, at most ``NAME_CHARS`` characters.

    Raises:
        TypeError: ``class_names`` that is a string, or neither a mapping nor a sequence.

    Example:
        >>> class_name(1, ["dog", "cat"]), class_name(1, {1: "cat"}), class_name(7, ["dog"]), class_name(3)
        ('cat', 'cat', '7', '3')
    """
    index = int(label)
    fallback = str(index) if default is None else default
    if class_names is None:
        return fallback
    if isinstance(class_names, (str, bytes)) or not hasattr(class_names, "__getitem__"):
        raise TypeError(
            "`class_names` must be a sequence of names indexed by class or a mapping class -> name, "
            f"got {type(class_names).__name__} {class_names!r:.60}"
        )
    if isinstance(class_names, Mapping):
        name = class_names.get(index)
    else:
        name = class_names[index] if 0 <= index < len(class_names) else None
    shown = fallback if name is None else str(name)
    return shown if len(shown) <= NAME_CHARS else shown[: NAME_CHARS - 1] + "…"


def diverging(values: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:
    """Colours of ``values`` on the diverging map: blue (negative), near white (0), red (positive).

    Args:
        values: (...) real weights.
        scale: the magnitude drawn at full colour (default: the largest |value|).

    Returns:
        uint8 (..., 3) RGB colours.

    Example:
        >>> diverging(torch.tensor([1.0, 0.0, -1.0])).tolist()
        [[178, 24, 43], [247, 247, 247], [33, 102, 172]]
    """
    v = values.detach().float().cpu()
    top = float(v.abs().max()) if scale is None and v.numel() else (scale or 0.0)
    t = (v / top).clamp(-1, 1) if top > 0 else torch.zeros_like(v)
    white, red, blue = (torch.tensor(c, dtype=torch.float32) for c in (WHITE, RED, BLUE))
    end = torch.where((t >= 0).unsqueeze(-1), red, blue)
    rgb = white + t.abs().unsqueeze(-1) * (end - white)
    return rgb.round().to(torch.uint8)


def css(weight: float, scale: float) -> str:
    """A CSS background for one weight on the map (``transparent`` for 0 or a zero scale).

    Args:
        weight: the weight.
        scale: the magnitude drawn at full colour.

    Returns:
        ``"rgb(r, g, b)"`` or ``"transparent"``.

    Example:
        >>> css(2.0, 2.0), css(-1.0, 2.0), css(0.0, 1.0)
        ('rgb(178, 24, 43)', 'rgb(140, 174, 210)', 'transparent')
    """
    if scale <= 0 or weight == 0:
        return "transparent"
    r, g, b = diverging(torch.tensor([weight]), scale)[0].tolist()
    return f"rgb({r}, {g}, {b})"


def rgba(weight: float, scale: float) -> str:
    """A CSS highlight for one weight: the map's red or blue end, opacity growing with |weight| / scale.

    Text stays readable on light and dark pages: the opacity goes from ``ALPHA_MIN`` (a weight near 0)
    to ``ALPHA_MAX`` (|weight| >= scale).

    Args:
        weight: the weight.
        scale: the magnitude drawn at full opacity.

    Returns:
        ``"rgba(r, g, b, a)"`` (red for a positive weight, blue for a negative one) or ``"transparent"``
        for 0 or a zero scale.

    Example:
        >>> rgba(2.0, 2.0), rgba(-1.0, 2.0), rgba(0.0, 1.0)
        ('rgba(178, 24, 43, 0.800)', 'rgba(33, 102, 172, 0.440)', 'transparent')
    """
    if scale <= 0 or weight == 0:
        return "transparent"
    r, g, b = RED if weight > 0 else BLUE
    alpha = ALPHA_MIN + (ALPHA_MAX - ALPHA_MIN) * min(abs(weight) / scale, 1.0)
    return f"rgba({r}, {g}, {b}, {alpha:.3f})"


def label(what: str = "weight") -> str:
    """The label of a colour bar or legend: what is drawn, the map and the convention.

    Args:
        what: the quantity drawn.

    Returns:
        ``"{what} (RdBu_r):"`` and ``LEGEND`` on a second line.

    Example:
        >>> print(label("weight for 'cat'"))
        weight for 'cat' (RdBu_r):
        red supports the target, blue opposes it
    """
    return f"{what} ({CMAP}):\n{LEGEND}"
