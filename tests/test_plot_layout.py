"""Every public ``plot_*`` keeps its words on the canvas, and names the target as the caller named its class.

The plotting functions and methods are found by walking torchlime's sources, so a new ``plot_*`` fails
``test_every_plot_has_a_case`` until ``CASES`` says how to draw it. Each case draws with a long class
name; after ``fig.canvas.draw()`` (Agg) every text that was drawn must lie inside the figure's bbox.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

import torchlime
from torchlime.dataset import Summary
from torchlime.targets import BoxesInfo, TranscriptInfo

from tests.helpers.records import run_record
from tests.test_plot_returns import spectrogram, synthetic

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.text import Text  # noqa: E402

#: a long name for class 1, the target of every case (class 0 keeps its index); pictures cut it to 30 characters
NAMES = {1: "a rather long name for the class of the target"}
#: plots that draw no class of their own: curves name the curves; a transcript's panels are its words
NO_CLASS = {"plot_curves": "curves of scores, labelled by the caller", "plot_transcript": "titled by its words"}


def public_plots() -> dict[str, Callable[..., Any]]:
    """Every public ``plot_*`` function and method of a public class in torchlime, by qualified name."""
    root = Path(torchlime.__file__).parent
    found: dict[str, Callable[..., Any]] = {}
    for path in sorted(root.rglob("*.py")):
        if not re.search(r"^\s*def plot_\w+\(", path.read_text(encoding="utf-8"), re.M):
            continue
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.startswith("plot_") and inspect.isfunction(value) and value.__module__ == name:
                found[attr] = value
            if inspect.isclass(value) and not attr.startswith("_") and value.__module__ == name:
                found.update({f"{attr}.{m}": f for m, f in vars(value).items() if m.startswith("plot_")})
    return found


def one_target(coef: list[float], features: torch.Tensor, shape: tuple[int, ...]) -> Any:
    """An explanation of one input for target column 0, class 1."""
    exp = synthetic(torch.tensor([[coef]]), features, shape)
    exp.target = torch.ones(1, 1, dtype=torch.long)
    return exp


def quadrants() -> tuple[Any, torch.Tensor]:
    grid = (torch.arange(8).view(8, 1) // 4) * 2 + torch.arange(8).view(1, 8) // 4
    return one_target([1.0, -1.0, 0.5, 0.0], grid.view(1, 1, 8, 8), (3, 8, 8)), torch.rand(1, 3, 8, 8)


def summary() -> Summary:
    c, f, d = 2, 4, 5
    mean_abs = torch.rand(c, f, dtype=torch.float64) + 0.1
    return Summary(
        classes=torch.tensor([0, 1]),
        names=("first feature", "second feature", "third", "fourth"),
        mean_abs=mean_abs,
        mean=mean_abs * torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64),
        std=torch.ones(c, f, dtype=torch.float64),
        low=mean_abs * 0.8,
        high=mean_abs * 1.2,
        count=torch.tensor([5, 5]),
        rows=torch.tensor([5, 5]),
        n_rows=10,
        n_boot=10,
        generator=0,
        bootstrap_rows=10,
        dots=torch.randn(c, d, f),
        dot_features=mean_abs.argsort(dim=1, descending=True),
    )


def draw_image(**names: Any) -> Any:
    from torchlime.image.viz import plot_image_explanation

    return plot_image_explanation(*quadrants(), k=2, **names)


def draw_uncertainty(**names: Any) -> Any:
    from torchlime.image.viz import plot_coefficients_with_uncertainty

    exp = one_target([1.0, -1.0], torch.tensor([[0, 1]]), (2,))
    exp.coef_std = torch.full((1, 1, 2), 0.1)
    return plot_coefficients_with_uncertainty(exp, **names)


def draw_boxes(**names: Any) -> Any:
    from torchlime.image.viz_boxes import plot_boxes

    exp, images = quadrants()
    exp.run = run_record(1, targets=BoxesInfo([[[0.0, 0.0, 4.0, 4.0]]]))
    return plot_boxes(exp, images, **names)


def draw_regions(**names: Any) -> Any:
    from torchlime.image.viz_regions import plot_regions

    exp, images = quadrants()
    return plot_regions(exp, images, regions=torch.ones(1, 8, 8, dtype=torch.long), **names)


def draw_spectrogram(**names: Any) -> Any:
    from torchlime.audio.viz import plot_spectrogram_explanation

    exp, specs = spectrogram()
    exp.target = torch.ones_like(exp.target)
    return plot_spectrogram_explanation(exp, specs, **names)


def draw_transcript(**names: Any) -> Any:
    from torchlime.audio.viz_transcript import plot_transcript

    exp, specs = spectrogram()
    exp.run = run_record(1, targets=TranscriptInfo([[1, 2]]))
    exp.target_valid = torch.ones(1, 2, dtype=torch.bool)
    return plot_transcript(exp, specs, words=["hello"])


def draw_top_features(**names: Any) -> Any:
    from torchlime.text.viz import plot_top_features

    exp = one_target([0.5, -1.0, 0.2], torch.tensor([[0, 1, 2]]), (3,))
    return plot_top_features(exp, ["a", "bee", "sea"], **names)


def draw_series(**names: Any) -> Any:
    from torchlime.series.viz import plot_series

    exp = one_target([1.0, -1.0, 0.0], (torch.arange(6) // 2).view(1, 1, 6), (1, 6))
    return plot_series(exp, torch.rand(1, 1, 6), **names)


def draw_curves(**names: Any) -> Any:
    from torchlime.metrics.viz import plot_curves

    return plot_curves(torch.tensor([[1.0, 0.5, 0.0], [1.0, 0.9, 0.8]]), torch.tensor([0.0, 0.5, 1.0]))


CASES: dict[str, Callable[..., Any]] = {
    "plot_image_explanation": draw_image,
    "plot_coefficients_with_uncertainty": draw_uncertainty,
    "plot_boxes": draw_boxes,
    "plot_regions": draw_regions,
    "plot_spectrogram_explanation": draw_spectrogram,
    "plot_transcript": draw_transcript,
    "plot_top_features": draw_top_features,
    "plot_series": draw_series,
    "plot_curves": draw_curves,
    "Summary.plot_bars": lambda **names: summary().plot_bars(k=3, **names),
    "Summary.plot_beeswarm": lambda **names: summary().plot_beeswarm(k=3, **names),
}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_every_plot_has_a_case_and_every_plot_of_a_class_takes_class_names():
    plots = public_plots()
    assert set(plots) == set(CASES), "add a case for each new plot_* to CASES"
    takes = {name for name, f in plots.items() if "class_names" in inspect.signature(f).parameters}
    assert takes == set(CASES) - set(NO_CLASS)


def drawn_texts(fig: Any, monkeypatch: pytest.MonkeyPatch) -> list[Text]:
    """The non-empty texts that ``fig.canvas.draw()`` draws (ticks out of view are not drawn)."""
    drawn: list[Text] = []
    draw = Text.draw

    def spy(self: Text, renderer: Any) -> None:
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)
        draw(self, renderer)

    with monkeypatch.context() as patch:
        patch.setattr(Text, "draw", spy)
        fig.canvas.draw()
    return drawn


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_text_lies_inside_the_figure(name, monkeypatch):
    fig = CASES[name]() if name in NO_CLASS else CASES[name](class_names=NAMES)
    texts = drawn_texts(fig, monkeypatch)
    assert texts, f"{name} drew no text"
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    outside = []
    for t in texts:
        e = t.get_window_extent(renderer)
        if e.x0 < box.x0 - 1 or e.y0 < box.y0 - 1 or e.x1 > box.x1 + 1 or e.y1 > box.y1 + 1:
            outside.append(f"{t.get_text()!r} at {e.bounds} (figure {box.bounds})")
    assert not outside, f"{name}: texts cut off the canvas: {outside}"


def all_text(fig: Any) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text)]


@pytest.mark.parametrize("names", [["dog", "cat"], {1: "cat"}])
def test_the_legends_name_the_class_as_the_caller_named_it(names):
    image = draw_image(class_names=names)
    assert [t.get_text() for t in image.axes[3].get_legend().get_texts()] == ["supports 'cat'", "opposes 'cat'"]
    bars = draw_uncertainty(class_names=names).axes[0]
    assert [t.get_text() for t in bars.get_legend().get_texts()] == ["supports 'cat'", "opposes 'cat'"]
    assert bars.get_legend().get_title().get_text() == "red supports the target, blue opposes it"
    assert draw_top_features(class_names=names).axes[0].get_xlabel().startswith("weight for 'cat'\n")
    for fig in (draw_spectrogram(class_names=names), draw_series(class_names=names)):
        bar = fig.axes[-1]  # the colour bar, upright (spectrogram) or under the panels (series)
        label = bar.get_ylabel() or bar.get_xlabel()
        assert label == "weight for 'cat' (RdBu_r):\nred supports the target, blue opposes it"
    assert any("cat" in t for t in all_text(draw_boxes(class_names=names)))
    assert any("target cat" in t for t in all_text(draw_regions(class_names=names)))
    assert any("class cat" in t for t in all_text(summary().plot_bars(k=2, class_names=names)))


def test_without_names_the_class_index_is_shown_a_long_name_is_cut_and_a_string_is_refused():
    assert [t.get_text() for t in draw_image().axes[3].get_legend().get_texts()] == ["supports '1'", "opposes '1'"]
    legend = draw_image(class_names=NAMES).axes[3].get_legend().get_texts()[0].get_text()
    assert legend == "supports 'a rather long name for the cl…'"
    with pytest.raises(TypeError, match="`class_names` must be a sequence of names"):
        draw_series(class_names="cat")
