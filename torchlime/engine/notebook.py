"""How an ``Explanation`` shows itself in a notebook (``_repr_html_``): a summary and pictures.

The summary names the run (samples, surrogate, kernel, the quality flags of ``engine.quality``) and
lists every input with its targets, sample count, weighted R² per target and flags. Every explained
target of the first inputs gets a captioned panel (its class index, R², flags; at most ``MAX_TARGETS``,
then "+N more"), drawn by ``engine.notebook_panels`` on one colour scale per input, which is shown
with its legend: images and spectrograms as heat maps over a faded copy of the input where the
explanation's record keeps one (``Info.preview``), texts highlighted in place (``Info.text_pieces``),
tabular rows as bars of their conditions (``Info.feature_labels``), other inputs as bars.
Structured targets (``torchlime.targets``) get one panel per valid target, captioned and outlined by
their record's hooks (``TargetInfo.caption`` and ``outline``: a box is outlined on its heat map). A
record that names its targets (``Info.target_labels``: a generated continuation's tokens) gets a table
instead: one row per target (the whole continuation, then each generated token), one column per feature
named by ``Info.feature_labels`` (the prompt's tokens), each cell coloured by its weight.
"""

from __future__ import annotations

import html
from typing import Sequence

import torch

from torchlime._util.colours import RED, RED_HEX, diverging
from torchlime.engine.info import describe_inputs
from torchlime.engine.notebook_panels import (
    Shown as Shown,
)
from torchlime.engine.notebook_panels import (
    colour_scale,
    figure,
    flagged,
    heat_of,
    image_tag,
    is_image,
    overlay,
    panel,
    panel_row,
    rgb_css,
    target_scale,
)
from torchlime.engine.notebook_panels import (
    png_bytes as png_bytes,
)

MAX_INPUTS = 4  # inputs drawn; the table lists them all
MAX_TARGETS = 6  # panels per input


def _flags_text(flags: dict[int, list[str]], t: int) -> str:
    """Target ``t``'s flags (and those of its whole input) for its caption: " (poor_fit)", or ""."""
    names = flags.get(t, []) + flags.get(-1, [])
    return f" ({', '.join(names)})" if names else ""


def _quality(flags: dict[int, list[str]]) -> str:
    """An input's flags by name, with the targets each concerns: "poor_fit (targets 0, 2)"."""
    by_name: dict[str, list[int]] = {}
    for t, names in sorted(flags.items()):
        for name in names:
            by_name.setdefault(name, []).append(t)
    return "; ".join(
        name if -1 in targets else f"{name} (target{'s' if len(targets) > 1 else ''} {', '.join(map(str, targets))})"
        for name, targets in by_name.items()
    )


def _pictures(exp: Shown, b: int) -> str:
    """Input ``b``'s panels: one per target (at most ``MAX_TARGETS``), on one scale, and the scale."""
    rows = exp.info.target_labels(b) if exp.info is not None else None
    if rows is not None:
        return _target_table(exp, b, rows)
    if exp.target_valid is not None:
        return structured_picture(exp, b)
    t_all = exp.coef.shape[1]
    shown = list(range(min(t_all, MAX_TARGETS)))
    scale = target_scale(exp, b, shown)
    size = 192 if len(shown) == 1 else 128
    flags = flagged(exp, b)
    labels = exp.target[b].tolist()
    panels = []
    for t in shown:
        caption = f"class {labels[t]}, R² {float(exp.score[b, t]):.2f}" + _flags_text(flags, t)
        panels.append(figure(panel(exp, b, t, scale, size), caption))
    return panel_row(panels, t_all - len(shown)) + colour_scale(scale)


def _outline(rgb: torch.Tensor, box: Sequence[float], shape: tuple[int, int]) -> torch.Tensor:
    """The picture (h, w, 3) of an (H, W) input with ``box`` (x1, y1, x2, y2, input pixels) outlined in red."""
    h, w, _ = rgb.shape
    sy, sx = h / shape[0], w / shape[1]
    x1, y1, x2, y2 = (float(v) for v in box)
    c1, c2 = max(0, min(w - 1, int(x1 * sx))), max(0, min(w - 1, int(round(x2 * sx)) - 1))
    r1, r2 = max(0, min(h - 1, int(y1 * sy))), max(0, min(h - 1, int(round(y2 * sy)) - 1))
    out = rgb.clone()
    red = torch.tensor(RED, dtype=torch.uint8)
    out[[r1, r2], c1 : c2 + 1] = red
    out[r1 : r2 + 1, [c1, c2]] = red
    return out


def _target_table(exp: Shown, b: int, labels: Sequence[str]) -> str:
    """Rows: the valid targets, named by ``labels``; columns: the features; cells coloured by weight.

    The columns are named by ``Info.feature_labels`` (else "f0", "f1", ...), every cell is on one scale
    and every name is escaped.
    """
    n = int(exp.n_features[b])
    words = exp.info.feature_labels(b) if exp.info is not None else None
    names = words if words is not None else [f"f{f}" for f in range(n)]
    coef = exp.coef[b, :, :n].detach().float().cpu()
    valid = exp.target_valid[b].tolist() if exp.target_valid is not None else [True] * coef.shape[0]
    kept = [t for t, ok in enumerate(valid) if ok]
    scale = target_scale(exp, b, kept)
    colours = diverging(coef, scale)
    head = "<tr><th></th>" + "".join(f"<th>{html.escape(x)}</th>" for x in names[:n]) + "</tr>"
    rows = []
    for t in kept:
        values = coef[t].tolist()
        cells = "".join(
            f"<td style='background:{c}' title='{v:+.4g}'>{v:+.2f}</td>" for c, v in zip(rgb_css(colours[t]), values)
        )
        name = labels[t] if t < len(labels) else f"target {t}"
        rows.append(f"<tr><th>{html.escape(name)}</th>{cells}</tr>")
    return "<table style='font-size:smaller'>" + head + "".join(rows) + "</table>" + colour_scale(scale)


def structured_picture(exp: Shown, b: int) -> str:
    """The pictures of input ``b``'s valid targets (at most ``MAX_TARGETS``), each with its caption.

    Args:
        exp: the explanation, with ``target_valid`` and ``run.targets`` (``torchlime.targets.TargetInfo``).
        b: the input.

    Returns:
        An HTML fragment: the panels and the colour scale.
    """
    record = None if exp.run is None else exp.run.targets
    valid = exp.target_valid[b].tolist() if exp.target_valid is not None else [True] * exp.coef.shape[1]
    labels = exp.target[b].tolist()
    real = [t for t, ok in enumerate(valid) if ok]
    shown = real[:MAX_TARGETS]
    scale = target_scale(exp, b, shown)
    preview = exp.info.preview(b) if exp.info is not None else None
    flags = flagged(exp, b)
    panels = []
    for t in shown:
        caption = f"target {t}" if record is None else record.caption(t, b, labels[t])
        if is_image(exp):
            heat = heat_of(exp, b, t)
            rgb = overlay(heat, scale, preview)
            box = None if record is None else record.outline(t, b)
            if box is not None:
                rgb = _outline(rgb, box, (heat.shape[0], heat.shape[1]))
            body = image_tag(rgb, 128)
        else:
            n = int(exp.n_features[b])
            colours = rgb_css(diverging(exp.coef[b, t, :n], scale))
            body = "".join(f"<span style='background:{c};padding:0 4px'>&nbsp;</span>" for c in colours)
        caption += f", R² {float(exp.score[b, t]):.2f}" + _flags_text(flags, t)
        panels.append(figure(body, caption))
    return panel_row(panels, len(real) - len(shown)) + colour_scale(scale)


def _summary(exp: Shown) -> str:
    """The run: inputs, targets, samples, surrogate, kernel and the quality flags."""
    b, t, _ = exp.coef.shape
    run = exp.run
    said = ("?", "?", "?") if run is None else (run.n_samples, run.surrogate, run.kernel)
    head = (
        f"<b>Explanation</b>: {html.escape(describe_inputs(b, exp.input_shape, exp.info))}, {t} target(s)<br/>"
        f"samples: {html.escape(str(said[0]))} &middot; "
        f"surrogate: {html.escape(str(said[1]))} &middot; "
        f"kernel: {html.escape(str(said[2]))}"
    )
    if run is None:
        return head
    if run.unreliable:
        return head + f"<br/><span style='color:{RED_HEX}'>unreliable: {html.escape(run.unreliable)}</span>"
    return head + "<br/>quality flags: none raised"


def to_html(exp: Shown, max_inputs: int = MAX_INPUTS) -> str:
    """A summary of ``exp``, a table of its inputs and the pictures of the first ones.

    Args:
        exp: the explanation (B inputs, T targets).
        max_inputs: how many inputs get pictures.

    Returns:
        An HTML fragment.
    """
    b = exp.coef.shape[0]
    # a results folder's rows have no run record: their sample counts are in the rendering of their records
    used = exp.meta.get("samples_used") if exp.run is None else exp.run.samples_used
    samples = used if isinstance(used, list) and len(used) == b else ["?"] * b
    scores, targets = exp.score.detach().float().cpu().tolist(), exp.target.detach().cpu().tolist()
    counts = exp.n_features.detach().cpu().tolist()
    cells = []
    for i in range(b):
        r2 = ", ".join(f"{s:.3f}" for s in scores[i])
        quality = _quality(flagged(exp, i))
        picture = _pictures(exp, i) if i < max_inputs else ""
        cells.append(
            f"<tr><td>{i}</td><td>{targets[i]}</td><td>{counts[i]}</td>"
            f"<td>{html.escape(str(samples[i]))}</td><td>{r2}</td><td>{html.escape(quality or 'ok')}</td>"
            f"<td>{picture}</td></tr>"
        )
    table = (
        "<table><tr><th>input</th><th>targets</th><th>features</th><th>samples</th><th>weighted R²</th>"
        "<th>quality</th><th>weights of each target</th></tr>" + "".join(cells) + "</table>"
    )
    return f"<div>{_summary(exp)}{table}</div>"
