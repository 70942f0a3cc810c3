"""What ``torchlime explain`` writes for one input: the explanation file, pictures, sounds, HTML.

Pictures need matplotlib (``pip install torchlime[viz]``); without it they are skipped and the
explanation files and the summary are still written. Every file goes through ``Output`` (``_output``):
never written through a link.
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Optional, TypedDict, Union, cast

import torch

from torchlime.engine.explanation import Explanation

if TYPE_CHECKING:
    from torchlime.cli._inputs import Tokens
    from torchlime.cli._output import Output

PAGE = (
    '<!doctype html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
    '<body style="max-width:60em;margin:2em auto">\n{body}\n</body></html>\n'
)


class Group(NamedTuple):
    """Inputs explained in one call: their positions on the command line, tensor, explanation."""

    positions: list[int]
    inputs: Union[torch.Tensor, Tokens]  # images or waveforms (B, ...), or the texts' tokens
    exp: Explanation


class _Written(TypedDict):
    """What ``write_group`` records of one input (see ``Record``)."""

    name: str
    explanation: str
    pictures: list[str]
    sounds: list[str]
    html: Optional[str]
    target: list[int]
    weighted_r2: list[float]
    n_features: int
    top_features: list[list[int]]
    top_weights: list[list[float]]
    top_names: Union[list[list[int]], list[list[str]]]
    unreliable: Optional[str]


class Record(_Written, total=False):
    """One input's entry of ``summary.json``: what was written for it, and its file (added by the command)."""

    file: str


def has_matplotlib() -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        return True
    except ImportError:
        return False


def write_group(modality: str, out: Output, g: Group, j: int, stem: str, args: argparse.Namespace) -> Record:
    """Write input ``j`` of group ``g`` as ``out/stem.*`` (never through a link); return its ``summary.json`` record."""
    one = g.exp[j]
    with out.staged(f"{stem}.explanation.pt") as path:
        one.save(path)
    idx, w = one.top_features(args.top_k, by="abs")  # the largest |weight|, signed weights (as every listing)
    rec: Record = dict(
        name=stem,
        explanation=path.name,
        pictures=[],
        sounds=[],
        html=None,
        target=one.target[0].tolist(),
        weighted_r2=one.score[0].float().tolist(),
        n_features=int(one.n_features[0]),
        top_features=idx[0].tolist(),
        top_weights=w[0].float().tolist(),
        top_names=idx[0].tolist(),
        unreliable=None if one.run is None else one.run.unreliable,
    )
    pictures = has_matplotlib()
    if modality == "image" and pictures:
        from torchlime.image.viz import plot_image_explanation

        fig = plot_image_explanation(g.exp.to("cpu"), cast(torch.Tensor, g.inputs).cpu(), index=j, k=args.top_k)
        out.figure(f"{stem}.png", fig)
        rec["pictures"].append(f"{stem}.png")
    elif modality == "audio":
        _write_audio(out, g, j, stem, args, rec, pictures)
    elif modality == "text":
        from torchlime.text.viz import explanation_html, feature_strings

        strings = cast("Tokens", g.inputs).strings[j]
        words = feature_strings(g.exp, strings, j)
        rec["top_names"] = [[words[f] if f < len(words) else "" for f in row] for row in idx[0].tolist()]
        body = explanation_html(g.exp, strings, j, title=f"{stem}: target {rec['target'][0]}")
        out.write(f"{stem}.html", PAGE.format(title=html.escape(stem), body=body).encode("utf-8"))
        rec["html"] = f"{stem}.html"
    return rec


def _write_audio(
    out: Output, g: Group, j: int, stem: str, args: argparse.Namespace, rec: Record, pictures: bool
) -> None:
    from torchlime.audio import WaveformInfo
    from torchlime.audio.viz import save_top_segments_wav

    exp = g.exp.to("cpu")
    waves = cast(torch.Tensor, g.inputs).cpu()
    info = exp.info
    if pictures and isinstance(info, WaveformInfo) and info.segments == "time_frequency":
        from torchlime.audio.stft import stft
        from torchlime.audio.viz import plot_spectrogram_explanation

        fft, hop, win = cast(int, info.n_fft), cast(int, info.hop_length), cast(int, info.win_length)
        spec = stft(waves[j : j + 1], fft, hop, win)
        fig = plot_spectrogram_explanation(exp[j], spec, k=args.top_k, title=f"{stem}: target {rec['target'][0]}")
        out.figure(f"{stem}.png", fig)
        rec["pictures"].append(f"{stem}.png")
    written = save_top_segments_wav(exp, waves, out.staging(), k=args.top_k, index=j, prefix=f"{stem}.")
    for name, p in written.items():
        final = f"{stem}.{'top' + str(args.top_k) if name == 'top' else name}.wav"
        out.write(final, Path(p).read_bytes())
        Path(p).unlink()
        rec["sounds"].append(final)
