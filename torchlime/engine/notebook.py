"""How an ``Explanation`` shows itself in a notebook (``_repr_html_``): a summary table and a picture.

Images and spectrograms get their weights as a heat map (a PNG made here, no plotting package needed),
texts are highlighted in place (as ``Explanation.info`` records their words), tabular rows and other
inputs get bars of their top features.
Structured targets (``torchlime.targets``) get one captioned panel per valid target (boxes outlined on
their heat map), and a generated continuation a token x token table: one row per target (the whole
continuation, then each generated token), one column per prompt token, each cell coloured by its weight.
"""

from __future__ import annotations

import base64
import html
import struct
import zlib
from typing import Any, Optional, Protocol, Sequence

import torch

from torchlime._colours import diverging
from torchlime.engine.info import Info


class Shown(Protocol):
    """What the display reads of an ``engine.explanation.Explanation`` (imported by neither side)."""

    coef: torch.Tensor
    score: torch.Tensor
    target: torch.Tensor
    n_features: torch.Tensor
    input_shape: tuple[int, ...]
    target_valid: Optional[torch.Tensor]
    meta: dict[str, Any]
    info: Optional[Info]

    def heatmap(self, target_index: Optional[int] = None) -> torch.Tensor:
        """Coefficients painted back onto the inputs."""
        ...


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


def _inline(pieces: Sequence[str], feats: Sequence[int], weights: torch.Tensor) -> str:
    """A text as written (pieces), every word piece coloured by its feature's weight (F,)."""
    colours = diverging(weights)
    spans = [
        html.escape(p) if f < 0 else f"<span style='background:rgb{tuple(colours[f].tolist())}'>{html.escape(p)}</span>"
        for p, f in zip(pieces, feats)
    ]
    return "<div style='line-height:1.8;white-space:pre-wrap'>" + "".join(spans) + "</div>"


def _picture(exp: Shown, b: int) -> str:
    """The picture of input ``b``'s first target (of each of its targets, for a structured target)."""
    if exp.target_valid is not None:
        return structured_picture(exp, b)
    n = int(exp.n_features[b])
    weights = exp.coef[b, 0, :n].detach().float().cpu()
    text = exp.info.text_pieces(b) if exp.info is not None else None
    if text is not None:  # explain_text's texts
        return _inline(*text, weights)
    names = exp.info.feature_labels(b) if exp.info is not None else None
    if names is not None:  # a table's columns
        return _bars(names, weights)
    shape = tuple(exp.input_shape)
    if "input_shapes" not in exp.meta and len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1:
        heat = exp.heatmap(0)[b].detach().float()
        heat = heat.reshape(-1, *heat.shape[-2:])[0]  # maps are broadcast over channels
        return _heat_img(heat)
    return _bars([f"feature {f}" for f in range(n)], weights)


MAX_TARGETS = 6  # panels per input


def _outline(heat: torch.Tensor, box: Sequence[float]) -> torch.Tensor:
    """The heat map (H, W) with ``box`` (x1, y1, x2, y2) marked by the largest |value| on its edge."""
    h, w = heat.shape
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    x1, x2 = max(0, min(w - 1, x1)), max(0, min(w - 1, x2 - 1))
    y1, y2 = max(0, min(h - 1, y1)), max(0, min(h - 1, y2 - 1))
    top = float(heat.abs().max()) or 1.0
    out = heat.clone()
    for r in (y1, y2):
        out[r, x1 : x2 + 1] = top
    for c in (x1, x2):
        out[y1 : y2 + 1, c] = top
    return out


def _caption(kind: str, t: int, label: int, info: dict[str, Any], b: int) -> str:
    if kind == "boxes":
        box = info.get("boxes", [[]])[b][t] if b < len(info.get("boxes", [])) else []
        return f"box {t} (label {label}) at {[round(float(v), 1) for v in box]}"
    if kind == "region":
        return f"class {label}"
    if kind == "similarity":
        return f"reference {label}"
    if kind in ("continuation", "transcript"):
        whole = "the whole continuation" if kind == "continuation" else "the whole transcript"
        unit = "token" if kind == "continuation" else "word"
        return whole if t == 0 else f"{unit} {t - 1}"
    return f"target {t}"


def _token_table(exp: Shown, b: int) -> str:
    """Rows: targets; columns: the prompt's features; cells coloured by weight."""
    n = int(exp.n_features[b])
    words = exp.info.feature_labels(b) if exp.info is not None else None
    names = words if words is not None else [f"f{f}" for f in range(n)]
    coef = exp.coef[b, :, :n].detach().float().cpu()
    colours = diverging(coef)
    valid = exp.target_valid[b].tolist() if exp.target_valid is not None else [True] * coef.shape[0]
    head = "<tr><th></th>" + "".join(f"<th>{html.escape(x)}</th>" for x in names[:n]) + "</tr>"
    rows = []
    for t in range(coef.shape[0]):
        if not valid[t]:
            continue
        cells = "".join(
            f"<td style='background:rgb{tuple(colours[t, f].tolist())}' title='{float(coef[t, f]):+.4g}'>"
            f"{float(coef[t, f]):+.2f}</td>"
            for f in range(n)
        )
        rows.append(f"<tr><th>{html.escape(_caption('continuation', t, t, {}, b))}</th>{cells}</tr>")
    return "<table style='font-size:smaller'>" + head + "".join(rows) + "</table>"


def structured_picture(exp: Shown, b: int) -> str:
    """The pictures of input ``b``'s targets (at most ``MAX_TARGETS``), each with its caption."""
    info = exp.meta.get("targets") or {}
    kind = str(info.get("kind", ""))
    if kind == "continuation":
        return _token_table(exp, b)
    valid = exp.target_valid[b].tolist() if exp.target_valid is not None else [True] * exp.coef.shape[1]
    labels = exp.target[b].tolist()
    shape = tuple(exp.input_shape)
    image = len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1 and "input_shapes" not in exp.meta
    panels = []
    for t in [t for t, ok in enumerate(valid) if ok][:MAX_TARGETS]:
        caption = html.escape(_caption(kind, t, labels[t], info, b))
        if image:
            heat = exp.heatmap(t)[b].detach().float()
            heat = heat.reshape(-1, *heat.shape[-2:])[0].cpu()
            if kind == "boxes" and b < len(info.get("boxes", [])):
                heat = _outline(heat, info["boxes"][b][t])
            body = _heat_img(heat, size=120)
        else:
            n = int(exp.n_features[b])
            colours = diverging(exp.coef[b, t, :n])
            body = "".join(
                f"<span style='background:rgb{tuple(c.tolist())};padding:0 4px'>&nbsp;</span>" for c in colours
            )
        r2 = float(exp.score[b, t])
        panels.append(
            f"<figure style='display:inline-block;margin:2px'>{body}<figcaption>{caption}, R² {r2:.2f}"
            f"</figcaption></figure>"
        )
    return "".join(panels)


def to_html(exp: Shown, max_inputs: int = MAX_INPUTS) -> str:
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
