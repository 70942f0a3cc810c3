"""How an ``Explanation`` shows itself in a notebook (``_repr_html_``): a summary table and a picture.

Images and spectrograms get their weights as a heat map (a PNG made here, no plotting package needed),
words and tokens are highlighted in place, tabular rows and other inputs get bars of their top features.
"""

from __future__ import annotations

import base64
import html
import struct
import zlib
from typing import TYPE_CHECKING, Any, Optional, Sequence

import torch

if TYPE_CHECKING:
    from torchlime.engine.explanation import Explanation

MAX_INPUTS = 4  # inputs drawn; the table lists them all
TOP = 10  # features in a bar chart


def png_bytes(rgb: torch.Tensor) -> bytes:
    """Encode an RGB image as PNG.

    Args:
        rgb: uint8 (H, W, 3) image on any device.

    Returns:
        The PNG file's bytes (8-bit RGB, no interlace).
    """
    h, w, _ = rgb.shape
    rows = torch.cat([torch.zeros(h, 1, dtype=torch.uint8), rgb.cpu().reshape(h, w * 3)], 1)  # filter byte 0

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    body = zlib.compress(rows.numpy().tobytes(), 6)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def diverging(values: torch.Tensor, scale: Optional[float] = None) -> torch.Tensor:
    """Blue (negative) - white (0) - red (positive) colours of ``values``.

    Args:
        values: (...) real weights.
        scale: the magnitude drawn at full colour (default: the largest |value|).

    Returns:
        uint8 (..., 3) colours.
    """
    v = values.detach().float().cpu()
    top = float(v.abs().max()) if scale is None else scale
    t = (v / top).clamp(-1, 1) if top > 0 else torch.zeros_like(v)
    fade = 1 - t.abs()
    red = torch.where(t >= 0, torch.ones_like(t), fade)
    blue = torch.where(t <= 0, torch.ones_like(t), fade)
    return (torch.stack([red, fade, blue], -1) * 255).round().to(torch.uint8)


def _heat_img(heat: torch.Tensor, size: int = 160) -> str:
    """An <img> of a (H, W) heat map, scaled up by whole pixels to about ``size``."""
    h, w = heat.shape
    k = max(1, size // max(h, w))
    rgb = diverging(heat).repeat_interleave(k, 0).repeat_interleave(k, 1)
    data = base64.b64encode(png_bytes(rgb)).decode()
    return f'<img src="data:image/png;base64,{data}" style="image-rendering:pixelated" alt="weights"/>'


def _bars(names: Sequence[str], weights: torch.Tensor) -> str:
    """Horizontal bars of the ``TOP`` largest |weights| (F,)."""
    order = weights.abs().argsort(descending=True)[:TOP].tolist()
    top = float(weights.abs().max()) or 1.0
    rows = []
    for f in order:
        w = float(weights[f])
        colour = "#d62728" if w >= 0 else "#1f77b4"
        width = int(120 * abs(w) / top)
        rows.append(
            f"<tr><td style='text-align:right'>{html.escape(str(names[f]))}</td><td>"
            f"<div style='background:{colour};width:{width}px;height:10px'></div></td><td>{w:+.4g}</td></tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def _highlight(words: Sequence[str], weights: torch.Tensor) -> str:
    """Words (F,) coloured by their weights (F,)."""
    colours = diverging(weights[: len(words)])
    spans = [
        f"<span style='background:rgb{tuple(c.tolist())};padding:1px 2px'>{html.escape(word)}</span>"
        for word, c in zip(words, colours)
    ]
    return "<div style='line-height:1.8'>" + " ".join(spans) + "</div>"


def _inline(pieces: Sequence[str], feats: Sequence[int], weights: torch.Tensor) -> str:
    """A text as written (pieces), every word piece coloured by its feature's weight (F,)."""
    colours = diverging(weights)
    spans = [
        html.escape(p) if f < 0 else f"<span style='background:rgb{tuple(colours[f].tolist())}'>{html.escape(p)}</span>"
        for p, f in zip(pieces, feats)
    ]
    return "<div style='line-height:1.8;white-space:pre-wrap'>" + "".join(spans) + "</div>"


def _picture(exp: Explanation, b: int) -> str:
    """The picture of input ``b``'s first target (of each of its targets, for a structured target)."""
    if exp.target_valid is not None:
        from torchlime.engine.notebook_targets import structured_picture

        return structured_picture(exp, b)
    n = int(exp.n_features[b])
    weights = exp.coef[b, 0, :n].detach().float().cpu()
    pieces, feats = exp.meta.get("pieces"), exp.meta.get("piece_features")
    if isinstance(pieces, list) and isinstance(feats, list) and b < len(pieces):  # explain_text's texts
        return _inline(pieces[b], feats[b], weights)
    words = exp.meta.get("words")
    if isinstance(words, list) and b < len(words) and isinstance(words[b], list):
        return _highlight([str(w) for w in words[b]], weights)
    tabular = exp.meta.get("tabular")
    if isinstance(tabular, dict) and tabular.get("feature_names"):
        return _bars(list(tabular["feature_names"]), weights)
    shape = tuple(exp.input_shape)
    if "input_shapes" not in exp.meta and len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1:
        heat = exp.heatmap(0)[b].detach().float()
        heat = heat.reshape(-1, *heat.shape[-2:])[0]  # maps are broadcast over channels
        return _heat_img(heat)
    return _bars([f"feature {f}" for f in range(n)], weights)


def to_html(exp: Explanation, max_inputs: int = MAX_INPUTS) -> str:
    """A summary table of ``exp`` and the pictures of its first inputs.

    Args:
        exp: the explanation (B inputs, T targets).
        max_inputs: how many inputs get a picture.

    Returns:
        An HTML fragment.
    """
    b, t, _ = exp.coef.shape
    unreliable: Any = exp.meta.get("unreliable")
    head = (
        f"<b>Explanation</b>: {b} input(s) of shape {tuple(exp.input_shape)}, {t} target(s), "
        f"{exp.meta.get('n_samples', '?')} samples, {html.escape(str(exp.meta.get('surrogate', '?')))}"
    )
    if unreliable:
        head += f"<br/><span style='color:#d62728'>unreliable: {html.escape(str(unreliable))}</span>"
    cells = []
    for i in range(b):
        r2 = ", ".join(f"{float(s):.3f}" for s in exp.score[i])
        picture = _picture(exp, i) if i < max_inputs else ""
        cells.append(
            f"<tr><td>{i}</td><td>{exp.target[i].tolist()}</td><td>{int(exp.n_features[i])}</td>"
            f"<td>{r2}</td><td>{picture}</td></tr>"
        )
    table = (
        "<table><tr><th>input</th><th>targets</th><th>features</th><th>weighted R²</th>"
        "<th>weights of the first target</th></tr>" + "".join(cells) + "</table>"
    )
    return f"<div>{head}{table}</div>"
