"""``print(exp)`` and the notebook summary say what was explained in the modality's words, from its record.

Texts by their words (and tokens), token sequences by their tokens (padding left out), waveforms by their
samples (and the STFT's grid when the features were its cells), spectrograms by bins and frames; an
explanation without a record by its shape. Both summaries say it with one function, ``describe_inputs``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import pytest
import torch

import torchlime
from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.engine.info import Info, describe_inputs, lengths, sized
from torchlime.text import explain_text, explain_tokens

pytestmark = pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")

TEXTS = ["the cat sat on the mat and it purred", "a dog ran off with my red hat"]  # 9 and 8 words


def headline(exp: torchlime.Explanation) -> str:
    return repr(exp).splitlines()[0]


def summary_line(exp: torchlime.Explanation) -> str:
    return exp._repr_html_().split("<br/>", 1)[0]


def scores(texts: list[str]) -> torch.Tensor:
    return torch.tensor([[float("cat" in t), 1.0] for t in texts])


def test_texts_are_counted_in_words_not_pieces():
    exp = explain_text(scores, TEXTS, target=0, n_samples=16)
    assert exp.input_shape != (9,) and headline(exp).startswith("Explanation of 2 texts of 9 and 8 words: 1 target(s)")
    assert summary_line(exp) == "<div><b>Explanation</b>: 2 texts of 9 and 8 words, 1 target(s)"
    assert headline(exp[1]).startswith("Explanation of 1 text of 8 words:")
    repeated = explain_text(scores, ["the the the cat"], target=0, n_samples=8)  # 2 features, 4 words written
    assert headline(repeated).startswith("Explanation of 1 text of 4 words: 1 target(s) and 2 features each")


def test_token_sequences_are_counted_in_tokens_without_padding(tmp_path):
    ids = torch.randint(3, 50, (2, 9))
    attn = torch.ones(2, 9, dtype=torch.long)
    attn[1, 7:] = 0
    bag = torch.nn.EmbeddingBag(50, 2)
    exp = explain_tokens(lambda x, m: bag(x), ids, attention_mask=attn, mask_id=1, target=0, n_samples=16)
    assert exp.info.lengths == [9, 7]
    assert headline(exp).startswith("Explanation of 2 texts of 9 and 7 tokens: 1 target(s)")
    assert "2 texts of 9 and 7 tokens, 1 target(s)" in summary_line(exp)
    assert headline(exp[1]).startswith("Explanation of 1 text of 7 tokens:")
    exp.save(tmp_path / "tokens.pt")
    assert headline(torchlime.Explanation.load(tmp_path / "tokens.pt")) == headline(exp)


def test_waveforms_are_counted_in_samples_with_the_stft_grid_they_were_explained_on():
    waves = torch.randn(1, 800)
    model = lambda x: torch.stack([x.flatten(1).mean(-1), x.flatten(1).std(-1)], -1)  # noqa: E731
    grid = explain_waveform(model, waves, sample_rate=8000, segments="time_frequency", n_fft=64, n_samples=16, target=0)
    fr, tm = grid.input_shape  # the STFT's grid: what the features were laid on
    assert (fr, tm) == (33, 51)
    assert headline(grid).startswith("Explanation of 1 waveform of 800 samples (a 33 x 51 spectrogram): 1 target(s)")
    assert "1 waveform of 800 samples (a 33 x 51 spectrogram), 1 target(s)" in summary_line(grid)
    two = explain_waveform(model, torch.randn(2, 2, 800), sample_rate=8000, n_samples=16, target=0)
    assert headline(two).startswith("Explanation of 2 waveforms of 800 samples each (2 channels):")


def test_spectrograms_are_counted_in_bins_and_frames():
    model = lambda x: torch.stack([x.mean((1, 2)), x.std((1, 2))], 1)  # noqa: E731
    exp = explain_spectrogram(model, torch.rand(2, 16, 12), n_samples=16, target=0)
    assert headline(exp).startswith("Explanation of 2 spectrograms of 16 frequency bins x 12 frames:")


@dataclass(frozen=True)
class Marked(Info):
    """A record whose description holds markup (as a stored string could)."""

    said: str = "2 <b>texts</b> & more"

    def describe(self, count: int, shape: tuple[int, ...]) -> Optional[str]:
        return self.said


def test_one_description_for_both_summaries_escaped_in_the_notebook():
    exp = torchlime.explain(lambda t: t.sum(1), torch.rand(2, 5), torch.arange(5).view(1, 5), n_samples=16)
    assert headline(exp).startswith("Explanation of 2 input(s) of shape (5,):")  # no record: its shape
    assert describe_inputs(2, (5,), None) == "2 input(s) of shape (5,)"
    marked = dataclasses.replace(exp, info=Marked())
    assert headline(marked).startswith("Explanation of 2 <b>texts</b> & more:")
    assert summary_line(marked) == "<div><b>Explanation</b>: 2 &lt;b&gt;texts&lt;/b&gt; &amp; more, 1 target(s)"


@pytest.mark.parametrize(
    "sizes, said",
    [
        ([9], "1 text of 9 words"),
        ([1], "1 text of 1 word"),
        ([9, 7], "2 texts of 9 and 7 words"),
        ([9, 7, 5], "3 texts of 9, 7 and 5 words"),
        ([4, 4], "2 texts of 4 words each"),
        ([3, 12, 5, 7, 9], "5 texts of 3 to 12 words"),
    ],
)
def test_lengths_read_as_a_phrase(sizes, said):
    assert sized("text", sizes, "word") == said
    assert said.endswith(lengths(sizes, "word"))
