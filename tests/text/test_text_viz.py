"""Text pictures: HTML escaping (text stays text), colours, merged words, the bar chart."""

from __future__ import annotations

import html.parser

import pytest
import torch

from torchlime.text import explain_tokens
from torchlime.text.viz import explanation_html, feature_strings, plot_top_features, tokens_html

from tests.helpers.text import CLS, MASK, SEP, PositionBag


class Tags(html.parser.HTMLParser):
    """Collects start tags and text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_tokens_are_escaped_never_markup():
    tokens = ["<script>alert(1)</script>", 'say "hi"', "it's", "a&b", "<b>bold</b>"]
    page = tokens_html(tokens, [0.5, -0.2, 0.1, None, 0.0], title="<i>title</i>")
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "say &quot;hi&quot;" in page and "it&#x27;s" in page and "a&amp;b" in page
    parser = Tags()
    parser.feed(page)
    assert set(parser.tags) <= {"div", "span"}  # only our own markup
    text = "".join(parser.text)
    for tok in tokens:
        assert tok in text  # the browser shows the original strings


def test_colours_and_legend():
    page = tokens_html(["up", "down", "zero"], torch.tensor([1.0, -0.5, 0.0]))
    up, down, zero = page.split("<span")[1:4]
    assert "rgba(178, 24, 43, 0.800)" in up  # full red for the largest weight (it supports the target)
    assert "rgba(33, 102, 172, 0.440)" in down  # half-opacity blue (it opposes the target)
    assert "transparent" in zero
    assert "supports the target" in page and "opposes the target" in page
    assert "red supports the target, blue opposes it" in page
    with pytest.raises(ValueError, match=r"`weights` must have one value per token \(2\), got 1"):
        tokens_html(["a", "b"], [1.0])


def test_explanation_html_merges_words_and_bar_chart():
    ids = torch.tensor([[CLS, 10, 11, 12, SEP]])
    words = torch.tensor([[-1, 0, 0, 1, -1]])
    exp = explain_tokens(
        PositionBag(),
        ids,
        word_ids=words,
        special_ids=[CLS, SEP],
        mask_id=MASK,
        n_samples=40,
        model_inputs="positional",
    )
    tokens = ["[CLS]", "un", "##<tag>", 'say"', "[SEP]"]
    page = explanation_html(exp, tokens)
    assert "un&lt;tag&gt;" in page and "say&quot;" in page and "[CLS]" not in page
    assert "[CLS]" in explanation_html(exp, tokens, show_fixed=True)
    assert feature_strings(exp, tokens) == ["un<tag>", 'say"']
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plot_top_features(exp, feature_strings(exp, tokens), k=5)
    assert isinstance(fig, plt.Figure)
    ax = fig.axes[0]
    assert len(ax.patches) == 2
    assert {t.get_text() for t in ax.get_yticklabels()} == {"un<tag>", 'say"'}
    plt.close(fig)
    fig, axes = plt.subplots(1, 2)
    assert plot_top_features(exp, feature_strings(exp, tokens), ax=axes[1]) is fig and len(axes[1].patches) == 2
    plt.close(fig)
