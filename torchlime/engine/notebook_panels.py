"""The pictures of the notebook display (``engine.notebook``): heat maps over the inputs, bars, texts.

Every picture draws weights on the one diverging map of ``torchlime._util.colours`` (red supports the
target, blue opposes it) at one scale per input, which a colour scale under the pictures states:
heat maps as PNGs made here (no plotting package needed), over a faded grey copy of the input where
the explanation's record keeps one (``Info.preview``); texts highlighted in place (``css``); other
inputs as bars of their strongest features.
"""

from __future__ import annotations

import base64
import html
import struct
import zlib
from collections.abc import Mapping
from typing import Any, Optional, Protocol, Sequence

import torch

from torchlime._util.colours import ALPHA_MAX, ALPHA_MIN, BLUE, BLUE_HEX, LEGEND, RED, RED_HEX, WHITE, css, diverging
from torchlime.engine.info import Info
from torchlime.engine.run_record import RunRecord

TOP = 10  # features in a bar chart
#: the grey of black pixels of a faded input (white stays white): the weights stay readable over it
FADE_FLOOR = 110.0
#: the grey of an RGB colour: the luma weights of ITU-R BT.601
LUMA = (0.299, 0.587, 0.114)


class Shown(Protocol):
    """What the display reads of an ``engine.explanation.Explanation`` (imported by neither side)."""

    coef: torch.Tensor
    features: torch.Tensor
    score: torch.Tensor
    target: torch.Tensor
    n_features: torch.Tensor
    input_shape: tuple[int, ...]
    target_valid: Optional[torch.Tensor]
    run: Optional[RunRecord]
    info: Optional[Info]

    @property
    def meta(self) -> Mapping[str, Any]:
        """The records as plain data (read for explanations without a ``run``: a results folder's rows)."""


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


def rgb_css(colours: torch.Tensor) -> list[str]:
    """CSS colours of uint8 (N, 3) RGB rows, written as ``css`` writes them: ``"rgb(r, g, b)"``."""
    return [f"rgb({r}, {g}, {b})" for r, g, b in colours.reshape(-1, 3).tolist()]


def overlay(heat: torch.Tensor, scale: float, preview: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The weights of a heat map drawn on the diverging map, over a faded grey copy of the input if given.

    Without ``preview`` every pixel takes its weight's colour (``diverging``). With it, the input's grey
    (faded: black becomes ``FADE_FLOOR``) shows through the map's red or blue end, laid on with the
    opacity of ``_colours.rgba``: ``ALPHA_MIN`` for a weight near 0 up to ``ALPHA_MAX`` at ``scale``
    (none for a weight of exactly 0). The heat map is resized to the preview (averaged over its pixels).

    Args:
        heat: (H, W) real weights.
        scale: the magnitude drawn at full colour.
        preview: uint8 (h, w, 3) RGB picture of the input, or None.

    Returns:
        uint8 (H, W, 3) without a preview, else uint8 (h, w, 3).
    """
    heat = heat.detach().float().cpu()
    if preview is None:
        return diverging(heat, scale)
    h, w, _ = preview.shape
    if tuple(heat.shape) != (h, w):
        heat = torch.nn.functional.adaptive_avg_pool2d(heat[None, None], (h, w))[0, 0]
    grey = preview.cpu().float() @ torch.tensor(LUMA)  # (h, w)
    faded = FADE_FLOOR + grey * (255.0 - FADE_FLOOR) / 255.0
    t = (heat / scale).clamp(-1, 1) if scale > 0 else torch.zeros_like(heat)
    alpha = torch.where(t != 0, ALPHA_MIN + (ALPHA_MAX - ALPHA_MIN) * t.abs(), torch.zeros_like(t)).unsqueeze(-1)
    red, blue = torch.tensor(RED, dtype=torch.float32), torch.tensor(BLUE, dtype=torch.float32)
    end = torch.where((t >= 0).unsqueeze(-1), red, blue)
    rgb = faded.unsqueeze(-1) * (1 - alpha) + end * alpha
    return rgb.round().clamp(0, 255).to(torch.uint8)


def image_tag(rgb: torch.Tensor, size: int, alt: str = "weights") -> str:
    """An <img> of a uint8 (H, W, 3) picture, scaled up by whole pixels to about ``size``."""
    h, w, _ = rgb.shape
    k = max(1, size // max(h, w))
    big = rgb.repeat_interleave(k, 0).repeat_interleave(k, 1)
    data = base64.b64encode(png_bytes(big)).decode()
    return f'<img src="data:image/png;base64,{data}" style="image-rendering:pixelated" alt="{html.escape(alt)}"/>'


def colour_scale(scale: float) -> str:
    """A small gradient bar of the diverging map from -``scale`` to +``scale``, and ``LEGEND``."""
    stops = ", ".join(f"rgb{c}" for c in (BLUE, WHITE, RED))
    bar = f"<span style='display:inline-block;width:120px;height:10px;background:linear-gradient(to right, {stops})'>"
    return (
        "<div style='font-size:smaller;margin-top:2px'>"
        f"{-scale:+.3g} {bar}</span> {scale:+.3g}<br/>{html.escape(LEGEND)}</div>"
    )


def bars(names: Sequence[str], weights: torch.Tensor, scale: Optional[float] = None) -> str:
    """Horizontal bars of the ``TOP`` largest |weights| (F,), red for positive ones, blue for negative ones.

    Args:
        names: the F features' names.
        weights: (F,) their weights.
        scale: the |weight| of a full-length bar (default: the largest).

    Returns:
        An HTML table: name, bar, signed weight.
    """
    order = weights.abs().argsort(descending=True)[:TOP].tolist()
    top = scale if scale is not None else float(weights.abs().max()) if weights.numel() else 0.0
    top = top or 1.0
    rows = []
    for f, w in zip(order, weights[order].tolist()):
        width = int(120 * abs(w) / top)
        rows.append(
            f"<tr><td style='text-align:right'>{html.escape(str(names[f]))}</td><td>"
            f"<div style='background:{RED_HEX if w >= 0 else BLUE_HEX};width:{width}px;height:10px'></div></td>"
            f"<td>{w:+.4g}</td></tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def inline(pieces: Sequence[str], feats: Sequence[int], weights: torch.Tensor, scale: float) -> str:
    """A text as written (pieces), every word piece's background its feature's weight (F,) on ``css``'s map."""
    values = weights.tolist()
    spans = [
        html.escape(p)
        if f < 0
        else f"<span style='background:{css(values[f], scale)}' title='{values[f]:+.4g}'>{html.escape(p)}</span>"
        for p, f in zip(pieces, feats)
    ]
    return "<div style='line-height:1.8;white-space:pre-wrap;max-width:48em'>" + "".join(spans) + "</div>"


def is_image(exp: Shown) -> bool:
    """Whether the inputs are drawn as heat maps: one tensor whose last two dimensions are both > 1."""
    shape = tuple(exp.input_shape)
    return (exp.run is None or exp.run.input_shapes is None) and len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1


def heat_of(exp: Shown, b: int, t: int) -> torch.Tensor:
    """Input ``b``'s (H, W) heat map of target ``t``, on the CPU (as ``heatmap`` paints it, for this input only).

    Args:
        exp: the explanation.
        b: the input.
        t: the target (a column of ``coef``).

    Returns:
        (H, W) float weights of the input's last two dimensions (the first channel's: maps are broadcast
        over channels); 0 where no feature lies.
    """
    feats = exp.features[b if exp.features.shape[0] > 1 else 0].detach().cpu()
    coef = torch.nn.functional.pad(exp.coef[b, t].detach().float().cpu(), (0, 1))
    labels = torch.where(feats < 0, coef.shape[0] - 1, feats)  # elements outside every feature get 0
    heat = coef[labels].expand(*exp.input_shape)
    return heat.reshape(-1, *heat.shape[-2:])[0]


def panel(exp: Shown, b: int, t: int, scale: float, size: int) -> str:
    """The picture of input ``b``'s weights for target ``t`` (a heat map, a highlighted text or bars)."""
    n = int(exp.n_features[b])
    weights = exp.coef[b, t, :n].detach().float().cpu()
    text = exp.info.text_pieces(b) if exp.info is not None else None
    if text is not None:  # explain_text's texts
        return inline(*text, weights, scale)
    names = exp.info.feature_labels(b) if exp.info is not None else None
    if names is not None:  # a table row's conditions, a prompt's words
        return bars(names, weights, scale)
    if is_image(exp):
        preview = exp.info.preview(b) if exp.info is not None else None
        return image_tag(overlay(heat_of(exp, b, t), scale, preview), size)
    return bars([f"feature {f}" for f in range(n)], weights, scale)


def figure(body: str, caption: str) -> str:
    """One captioned panel of a grid."""
    return f"<figure style='margin:2px'>{body}<figcaption>{html.escape(caption)}</figcaption></figure>"


def panel_row(panels: Sequence[str], more: int = 0) -> str:
    """Panels side by side (wrapping), and "+N more" for ``more`` panels left out."""
    tail = f"<div style='align-self:center'>+{more} more</div>" if more > 0 else ""
    return "<div style='display:flex;flex-wrap:wrap;gap:6px'>" + "".join(panels) + tail + "</div>"


def flagged(exp: Shown, b: int) -> dict[int, list[str]]:
    """The quality flags (``engine.quality``, ``run.quality``) of input ``b``'s targets.

    Returns:
        Target -> flag names (-1: all targets); none without a run record.
    """
    out: dict[int, list[str]] = {}
    for name, where in ({} if exp.run is None else exp.run.quality).items():
        if not isinstance(where, list):
            continue
        for w in where:
            if isinstance(w, list) and w and w[0] == b:
                t = int(w[1]) if len(w) > 1 else -1
                out.setdefault(t, []).append(str(name))
    return out


def target_scale(exp: Shown, b: int, targets: Sequence[int]) -> float:
    """The largest |weight| of input ``b`` over ``targets``: the scale of all its pictures."""
    if not targets:
        return 0.0
    n = int(exp.n_features[b])
    return float(exp.coef[b, list(targets), :n].detach().abs().max()) if n else 0.0
