"""One colour convention in every view: red supports the target, blue opposes it, one map, named in the legends.

Each test reads the colours a view actually emits (the colour map and the RGBA of a drawn image or bar,
the rgb values of an HTML string) for a positive and for a negative weight.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from torchlime._util import colours as _colours
from torchlime.engine.explanation import Explanation
from torchlime.text.viz import explanation_html, legend_html, tokens_html

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

RGB = re.compile(r"rgba?\((\d+), (\d+), (\d+)")


def synthetic(coef: list[float], features: torch.Tensor, input_shape: tuple[int, ...]) -> Explanation:
    """An explanation of one input for one target (target 1) with the given coefficients (F,)."""
    f = len(coef)
    return Explanation(
        torch.tensor([[coef]]),
        torch.zeros(1, 1),
        torch.ones(1, 1),
        torch.zeros(1, 1),
        torch.ones(1, 1, dtype=torch.long),
        features,
        torch.tensor([f]),
        input_shape,
    )


def quadrants(coef: list[float]) -> Explanation:
    """An 8 x 8 image explanation whose four 4 x 4 quadrants are its features, in reading order."""
    grid = (torch.arange(8).view(8, 1) // 4) * 2 + torch.arange(8).view(1, 8) // 4
    return synthetic(coef, grid.view(1, 1, 8, 8), (3, 8, 8))


def is_red(rgb: tuple[float, ...]) -> bool:
    return rgb[0] > rgb[2] + 0.2 * max(rgb[:3])


def is_blue(rgb: tuple[float, ...]) -> bool:
    return rgb[2] > rgb[0] + 0.2 * max(rgb[:3])


def html_colours(page: str) -> list[tuple[int, int, int]]:
    return [(int(r), int(g), int(b)) for r, g, b in RGB.findall(page)]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_the_shared_definitions_agree_with_the_map():
    cmap = matplotlib.colormaps[_colours.CMAP]  # the HTML's red and blue are the map's strong colours
    assert np.allclose(np.array(cmap(0.9)[:3]) * 255, _colours.RED, atol=2) and is_red(cmap(1.0))
    assert np.allclose(np.array(cmap(0.1)[:3]) * 255, _colours.BLUE, atol=2) and is_blue(cmap(0.0))
    assert np.allclose(np.array(to_rgb(_colours.RED_HEX)) * 255, _colours.RED, atol=1)
    assert np.allclose(np.array(to_rgb(_colours.BLUE_HEX)) * 255, _colours.BLUE, atol=1)
    assert _colours.LEGEND == "red supports the target, blue opposes it"
    assert _colours.LEGEND in _colours.label() and _colours.CMAP in _colours.label()


def test_tokens_html_is_red_for_support_and_blue_against():
    page = tokens_html(["up", "down"], [1.0, -1.0], legend=False)
    assert html_colours(page) == [_colours.RED, _colours.BLUE]


def test_explanation_html_is_red_for_support_and_blue_against():
    exp = synthetic([0.8, -0.8], torch.tensor([[-1, 0, 1, -1]]), (4,))
    page = explanation_html(exp, ["[CLS]", "good", "bad", "[SEP]"])
    good, bad = (page.split(f">{w}</span>")[0].rsplit("<span", 1)[1] for w in ("good", "bad"))
    assert html_colours(good) == [_colours.RED] and html_colours(bad) == [_colours.BLUE]


def test_text_html_is_red_for_support_and_blue_against():
    from torchlime.text import explain_text
    from torchlime.text.viz import text_html

    def positive(texts):  # P(positive) grows with "good" and falls with "bad"
        score = [0.5 + 0.2 * t.split().count("good") - 0.2 * t.split().count("bad") for t in texts]
        p = np.clip(np.array(score), 0.0, 1.0)
        return np.stack((1 - p, p), 1)

    exp = explain_text(positive, "good bad", target=1, n_samples=200, generator=0)
    page = text_html(exp)
    good, bad = (page.split(f">{w}</span>")[0].rsplit("<span", 1)[1] for w in ("good", "bad"))
    assert html_colours(good) == [_colours.RED] and html_colours(bad) == [_colours.BLUE]
    assert _colours.LEGEND in page


def test_the_html_legend_names_the_convention():
    legend = legend_html(1.0)
    assert _colours.LEGEND in legend
    supports, opposes = legend.split("supports the target")[0], legend.split("supports the target")[1]
    assert html_colours(supports) == [_colours.RED] and html_colours(opposes)[0] == _colours.BLUE
    assert "opposes the target" in legend and "green" not in legend


def test_plot_top_features_bars_are_red_and_blue_by_magnitude():
    from torchlime.text.viz import plot_top_features

    exp = synthetic([0.5, -2.0, 0.1], torch.tensor([[0, 1, 2]]), (3,))
    fig = plot_top_features(exp, ["small", "strong against", "tiny"], k=2)
    ax = fig.axes[0]
    names = [t.get_text() for t in ax.get_yticklabels()][::-1]  # the strongest at the top
    assert names == ["strong against", "small"]  # by |weight|: the opposing feature ranks first
    colours = [bar.get_facecolor()[:3] for bar in ax.patches][::-1]
    assert is_blue(colours[0]) and is_red(colours[1])
    assert _colours.LEGEND in ax.get_xlabel()


def test_the_image_plot_uses_the_map_and_shows_top_segments_by_sign():
    from torchlime.image.viz import plot_image_explanation

    exp = quadrants([2.0, -1.0, 0.0, 0.5])
    fig = plot_image_explanation(exp, torch.full((1, 3, 8, 8), 0.5), k=2)
    heat_ax, top_ax = fig.axes[2], fig.axes[3]
    heat = heat_ax.images[-1]
    assert heat.get_cmap().name == _colours.CMAP
    rgba = heat.to_rgba(np.array([[2.0, -2.0]]))[0]  # the colours it draws for +|max| and -|max|
    assert is_red(tuple(rgba[0])) and is_blue(tuple(rgba[1]))
    bar = [ax for ax in fig.axes if ax not in fig.axes[:4]][0]
    assert _colours.LEGEND in bar.get_ylabel()
    shown = np.asarray(top_ax.images[0].get_array())
    zoom = shown.shape[0] // 8
    pixel = {q: tuple(shown[(q // 2) * 4 * zoom + 2 * zoom, (q % 2) * 4 * zoom + 2 * zoom]) for q in range(4)}
    assert is_red(pixel[0]) and is_blue(pixel[1])  # the top 2 by |weight|: +2 supports, -1 opposes
    assert max(pixel[3]) < 0.2  # +0.5 is third: faded
    assert top_ax.get_title() == "top 2 segments by |weight|"
    legend = [t.get_text() for t in top_ax.get_legend().get_texts()]
    assert legend == ["supports '1'", "opposes '1'"]


def test_the_image_plot_says_why_a_panel_is_blank():
    from torchlime.image.viz import plot_image_explanation

    fig = plot_image_explanation(quadrants([0.0, 0.0, 0.0, 0.0]), torch.rand(1, 3, 8, 8), k=2)
    texts = [t.get_text() for t in fig.axes[3].texts]
    assert any("nothing to show" in t and "weight 0" in t for t in texts)
    fewer = plot_image_explanation(quadrants([0.0, -1.0, 0.0, 0.0]), torch.rand(1, 3, 8, 8), k=3)
    assert fewer.axes[3].get_title() == "top 1 segments by |weight| (of 4; 3 weigh 0)"


def test_the_spectrogram_plot_uses_the_map_and_numbers_top_segments_by_sign():
    from torchlime.audio.viz import plot_spectrogram_explanation

    lab = torch.arange(2).view(2, 1).expand(2, 6) * 3 + torch.arange(6).view(1, 6) // 2  # (Fr 2, Tm 6), 6 cells
    exp = synthetic([0.1, -3.0, 0.0, 2.0, 0.0, 0.0], lab.reshape(1, 2, 6), (2, 6))
    fig = plot_spectrogram_explanation(exp, torch.rand(1, 2, 6), k=2)
    ax = fig.axes[0]
    mesh = ax.collections[1]
    assert mesh.get_cmap().name == _colours.CMAP
    rgba = mesh.to_rgba(np.array([3.0, -3.0]))
    assert is_red(tuple(rgba[0])) and is_blue(tuple(rgba[1]))
    assert _colours.LEGEND in fig.axes[1].get_ylabel()
    ranks = {t.get_text(): to_rgb(t.get_color()) for t in ax.texts}
    assert set(ranks) == {"1", "2"}  # by |weight|: -3.0 first, then +2.0
    assert is_blue(ranks["1"]) and is_red(ranks["2"])


def test_the_series_plot_uses_the_map():
    from torchlime.series.viz import plot_series

    exp = synthetic([1.0, -1.0, 0.0], (torch.arange(6) // 2).view(1, 1, 6), (1, 6))
    fig = plot_series(exp, torch.rand(1, 1, 6))
    shade = fig.axes[0].images[0]
    assert shade.get_cmap().name == _colours.CMAP
    rgba = shade.to_rgba(np.asarray(shade.get_array()))[0]  # the colours of the 6 steps
    assert is_red(tuple(rgba[0])) and is_blue(tuple(rgba[2]))
    assert _colours.LEGEND in fig.axes[-1].get_xlabel()  # the colour bar, under the panels


def test_the_uncertainty_bars_are_red_and_blue():
    from torchlime.image.viz import plot_coefficients_with_uncertainty

    exp = synthetic([1.0, -1.0], torch.tensor([[0, 1]]), (2,))
    exp.coef_std = torch.full((1, 1, 2), 0.1)
    fig = plot_coefficients_with_uncertainty(exp)
    up, down = (bar.get_facecolor()[:3] for bar in fig.axes[0].patches)
    assert is_red(up) and is_blue(down)
    assert fig.axes[0].get_legend().get_title().get_text() == _colours.LEGEND
