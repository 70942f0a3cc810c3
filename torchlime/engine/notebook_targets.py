"""Notebook pictures of structured targets (``torchlime.targets``): one panel per target of an input.

Boxes are drawn over their heat map; regions, references, transcripts' words and a continuation's tokens
each get their own heat map or row. A generated continuation shows a token x token table: one row per
target (the whole continuation, then each generated token), one column per prompt token, each cell
coloured by that token's weight (red supports the target, blue opposes it).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Sequence

import torch

from torchlime.engine.notebook import _heat_img, diverging

if TYPE_CHECKING:
    from torchlime.engine.explanation import Explanation

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


def _token_table(exp: Explanation, b: int) -> str:
    """Rows: targets; columns: the prompt's features; cells coloured by weight."""
    n = int(exp.n_features[b])
    words = exp.meta.get("words")
    names = [str(w) for w in words[b]] if isinstance(words, list) and b < len(words) else [f"f{f}" for f in range(n)]
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


def structured_picture(exp: Explanation, b: int) -> str:
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
