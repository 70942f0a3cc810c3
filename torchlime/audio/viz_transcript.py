"""``plot_transcript``: a speech recogniser's transcript explained word by word over its spectrogram.

One panel per valid target of an explanation made with ``target=torchlime.targets.Transcript(...)``: the
whole transcript first, then each word, each drawn by ``plot_spectrogram_explanation`` (the spectrogram
in dB, the coefficients overlaid, red supporting the word, blue opposing it).
Matplotlib is optional (``pip install torchlime[viz]``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Optional, Sequence

import torch

from torchlime._util.checks import describe, require
from torchlime.audio.viz import plot_spectrogram_explanation
from torchlime.engine.explanation import Explanation
from torchlime.targets import TranscriptInfo

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def plot_transcript(
    explanation: Explanation,
    specs: torch.Tensor,
    *,
    index: int = 0,
    words: Optional[Sequence[str]] = None,
    columns: int = 3,
    **kwargs: Any,
) -> Figure:
    """Spectrogram panels of clip ``index``: the whole transcript, then each word.

    Args:
        explanation: from an audio front door with ``target=Transcript(...)`` (``meta["targets"]["kind"]``
            is "transcript").
        specs: the explained spectrograms (B, [C,] Fr, Tm) (for ``explain_waveform``, the STFT it explained).
        index: which clip.
        words: the words' text, for the titles (default: "word 0", "word 1", ...).
        columns: panels per row.
        **kwargs: passed to ``plot_spectrogram_explanation`` (``units``, ``k``, ``alpha``, ...; not
            ``class_names``: each panel's colour bar names its word).

    Returns:
        The matplotlib ``Figure``.

    Raises:
        ValueError: an explanation of another target, or ``index`` out of range.
    """
    plt = require("matplotlib.pyplot", "viz", "plot_transcript")
    record = None if explanation.run is None else explanation.run.targets
    if not isinstance(record, TranscriptInfo) or explanation.target_valid is None:
        kind = None if record is None else record.kind
        raise ValueError(f"`explanation` must be made with target=Transcript(...), got targets of kind {kind!r}")
    b = explanation.coef.shape[0]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < b:
        raise ValueError(f"`index` must be an int in [0, {b}), got {describe(index)}")
    shown = [t for t, ok in enumerate(explanation.target_valid[index].tolist()) if ok]
    rows = math.ceil(len(shown) / columns)
    fig: Figure
    fig, axes = plt.subplots(rows, min(columns, len(shown)), figsize=(4 * min(columns, len(shown)), 3 * rows))
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax, t in zip(flat, shown):
        name = "the whole transcript" if t == 0 else (words[t - 1] if words and t - 1 < len(words) else f"word {t - 1}")
        r2 = float(explanation.score[index, t])
        named = {int(explanation.target[index, t]): name}  # the colour bar names the word: "weight for 'hello'"
        plot_spectrogram_explanation(
            explanation,
            specs,
            index=index,
            target_index=t,
            ax=ax,
            title=f"{name} (R² {r2:.2f})",
            class_names=named,
            **kwargs,
        )
    for ax in flat[len(shown) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig
