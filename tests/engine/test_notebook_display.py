"""The notebook display is worth opening: the input under its weights, a colour scale, every target, the
run's summary, lime's conditions for tables and highlighted words for texts."""

from __future__ import annotations

import base64
import dataclasses
import html
import re

import pytest
import torch

import torchlime
from torchlime._util.colours import BLUE, LEGEND, RED, WHITE, css
from torchlime.audio import explain_spectrogram
from torchlime.engine.info import PREVIEW_SIDE, Info, Thumbnails
from torchlime.engine.notebook_panels import heat_of
from torchlime.image import ImagesInfo, explain_image
from torchlime.tabular import explain_tabular

from tests.engine.test_notebook import decode_png

pytestmark = pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")


def images_of(page: str) -> list[torch.Tensor]:
    """Every <img> of a page, decoded: uint8 (H, W, 3) each."""
    return [decode_png(base64.b64decode(m)) for m in re.findall(r"base64,([^\"]+)", page)]


def luma(pixel: torch.Tensor) -> float:
    return float(pixel.float() @ torch.tensor([0.299, 0.587, 0.114]))


@pytest.fixture(scope="module")
def square():
    """A dark 32 x 32 image with a bright square in its bottom-right quadrant, explained on a 2 x 2 grid
    by a model that looks at the top-left quadrant only (targets: its red mean, minus its green mean)."""
    x = torch.full((1, 3, 32, 32), 0.1)
    x[:, :, 20:28, 20:28] = 0.9

    def model(batch: torch.Tensor) -> torch.Tensor:
        top_left = batch[:, :, :16, :16].mean((2, 3))
        return torch.stack((top_left[:, 0], -top_left[:, 1], batch[:, 2].mean((1, 2))), 1)

    return x, model


def test_the_image_is_drawn_under_its_weights_with_a_colour_scale(square):
    x, model = square
    exp = explain_image(model, x, segments="grid", n_segments=4, n_samples=200, baseline=0.0, target=0)
    page = exp._repr_html_()
    (img,) = images_of(page)
    k = img.shape[0] // 32  # the 32 x 32 preview, scaled up by whole pixels
    assert img.shape[:2] == (32 * k, 32 * k)
    inside, beside = img[24 * k, 24 * k], img[18 * k, 18 * k]  # the square and its quadrant (one weight)
    assert luma(inside) > luma(beside) + 60  # the planted square shows through
    looked_at = img[8 * k, 8 * k].int()
    assert looked_at[0] > looked_at[2] + 60  # the quadrant the model reads supports the target: red
    # the colour scale: the map's blue, white and red ends, the range and the legend
    stops = ", ".join(f"rgb{c}" for c in (BLUE, WHITE, RED))
    assert f"linear-gradient(to right, {stops})" in page and html.escape(LEGEND) in page
    top = float(exp.coef[0, 0].abs().max())
    assert f"{-top:+.3g}" in page and f"{top:+.3g}" in page


def test_the_record_keeps_a_small_preview_out_of_the_plain_view():
    images = torch.rand(3, 3, 200, 100) * 255  # 0..255 pixels: rescaled
    exp = explain_image(lambda b: b.mean((2, 3)), images, segments="grid", n_segments=4, n_samples=16)
    previews = exp.info.previews
    assert previews.dtype == torch.uint8 and previews.shape == (3, 3, PREVIEW_SIDE, PREVIEW_SIDE // 2)
    assert int(previews.max()) > 200 and int(previews.min()) < 50
    assert "previews" not in exp.meta["image"] and set(exp.meta["image"]) == {"segments", "n_segments", "normalized"}
    assert torch.equal(exp[1].info.previews[0], previews[1])  # sliced with the explanation
    assert exp[1].info.preview(0).shape == (PREVIEW_SIDE, PREVIEW_SIDE // 2, 3)
    assert exp.info == ImagesInfo("grid", 4, False)  # the pictures play no part in equality
    assert Info().preview(0) is None


def test_the_previews_are_made_on_first_read_with_the_bits_of_the_eager_ones():
    images = torch.rand(3, 3, 200, 100) * 255
    exp = explain_image(lambda b: b.mean((2, 3)), images, segments="grid", n_segments=4, n_samples=16)
    assert isinstance(exp.info.preview_source, Thumbnails) and exp.info.preview_source._made is None  # nothing made yet
    sliced = exp[1:3].info  # a slice of the unread pictures stays unread, with the same bits once read
    assert isinstance(sliced.preview_source, Thumbnails) and sliced.preview_source._made is None
    assert torch.equal(sliced.previews, Info.thumbnails(images[1:3]))
    assert torch.equal(exp.info.previews, Info.thumbnails(images))
    assert exp.info.previews is exp.info.previews  # made once
    # images written in place after the call: no pictures, rather than pictures of other images
    later = explain_image(lambda b: b.mean((2, 3)), images, segments="grid", n_segments=4, n_samples=16)
    images.mul_(0.5)
    assert later.info.previews is None and later.info.preview(0) is None
    with torch.inference_mode():  # an inference tensor has no version: its pictures are made in the call
        frozen = torch.rand(1, 3, 32, 32)
    eager = explain_image(lambda b: b.mean((2, 3)), frozen, segments="grid", n_segments=4, n_samples=16)
    assert torch.equal(eager.info.preview_source, Info.thumbnails(frozen))


def test_thumbnails_keep_unit_images_and_draw_one_channel_grey():
    unit = torch.rand(2, 3, 8, 12)
    assert torch.equal(Info.thumbnails(unit), (unit * 255).round().to(torch.uint8))
    grey = Info.thumbnails(torch.rand(1, 1, 5, 5) - 3)  # outside [0, 1]: stretched to black..white
    assert torch.equal(grey[:, 0], grey[:, 1]) and int(grey.min()) == 0 and int(grey.max()) == 255
    assert Info.thumbnails(torch.rand(1, 4, 300, 30)).shape == (1, 3, 96, 10)


def test_one_input_heat_map_is_the_explanation_heatmap(square):
    x, model = square
    exp = explain_image(model, x.expand(2, -1, -1, -1), segments="slic", n_segments=9, n_samples=64, target=[[0, 2]])
    for b in range(2):
        for t in range(2):
            assert torch.equal(heat_of(exp, b, t), exp.heatmap(t)[b, 0])


def test_a_saved_explanation_is_drawn_without_its_pictures(square, tmp_path):
    x, model = square
    exp = explain_image(model, x, segments="grid", n_segments=4, n_samples=64, baseline=0.0, target=0)
    exp.save(tmp_path / "exp.pt")
    back = torchlime.Explanation.load(tmp_path / "exp.pt")
    (img,) = images_of(back._repr_html_())  # the weights alone, on the map
    assert img[0, 0].tolist() == list(RED)


def test_every_target_gets_a_captioned_panel(square):
    x, model = square
    exp = explain_image(model, x, segments="grid", n_segments=4, n_samples=200, baseline=0.0, target=[[0, 1, 2]])
    page = exp._repr_html_()
    assert len(images_of(page)) == 3
    for t in range(3):
        assert f"class {t}, R² {float(exp.score[0, t]):.2f}" in page
    blue = images_of(page)[1]  # target 1 falls as the top-left quadrant's green rises: blue there
    assert blue[4, 4, 2] > blue[4, 4, 0] + 60
    w = torch.randn(5, 9, generator=torch.Generator().manual_seed(0))
    rows, features = torch.rand(1, 5), torch.arange(5).view(1, 5)
    wide = torchlime.explain(lambda t: t @ w, rows, features, n_samples=32, target=[list(range(9))])._repr_html_()
    assert "+3 more" in wide and wide.count("<figcaption>class ") == 6  # at most 6 panels
    assert torchlime.explain(lambda t: t @ w, rows, features, n_samples=32)._repr_html_().count("<figcaption>") == 1


def test_the_summary_names_the_run_and_its_quality(square):
    x, model = square
    exp = explain_image(model, x, segments="grid", n_segments=4, n_samples=200, baseline=0.0, target=[[0, 1]])
    page = exp._repr_html_()
    assert "weighted R²" in page and ", ".join(f"{float(s):.3f}" for s in exp.score[0]) in page
    assert "samples: 200" in page and "<td>200</td>" in page
    assert f"surrogate: {html.escape(exp.run.surrogate)}" in page
    assert f"kernel: {html.escape(exp.run.kernel)}" in page
    assert "quality flags: none raised" in page
    exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, quality={**exp.run.quality, "poor_fit": [[0, 1]]}))
    flagged = exp._repr_html_()
    assert "poor_fit (target 1)" in flagged and "class 1, R² " in flagged and "(poor_fit)</figcaption>" in flagged


def test_a_table_row_shows_lime_conditions():
    t = torch.linspace(0, 1, 101)
    train = torch.stack((t, t.flip(0), 2 * t, (torch.arange(101) % 3).float()), 1)
    model = lambda x: torch.stack((4 * x[:, 0], -4 * x[:, 0]), 1).softmax(1)  # noqa: E731
    names = ["petal width", "b", "c", "sex"]
    exp = explain_tabular(
        model, train[[5, 50]], training_data=train, feature_names=names, categorical_features=[3], n_samples=300
    )
    assert exp.info.feature_labels(0) == ["petal width <= 0.25", "b > 0.75", "c <= 0.50", "sex=2"]
    page = exp._repr_html_()
    assert html.escape("petal width <= 0.25") in page and html.escape("0.25 < petal width <= 0.50") in page
    assert "sex=2" in page and "feature 0" not in page


def test_a_text_is_highlighted_in_place_in_red_and_blue():
    def model(texts: list[str]) -> torch.Tensor:
        return torch.tensor([[float("good" in s) - float("bad" in s)] for s in texts])

    exp = torchlime.explain_text(model, "a good movie, not bad", n_samples=64)
    page = exp._repr_html_()
    weights = exp.coef[0, 0, : int(exp.n_features[0])]
    scale = float(weights.abs().max())
    words = exp.info.feature_labels(0)
    good, bad = float(weights[words.index("good")]), float(weights[words.index("bad")])
    assert good > 0 > bad
    assert f"background:{css(good, scale)}' title='{good:+.4g}'>good</span>" in page  # red: supports
    assert f"background:{css(bad, scale)}' title='{bad:+.4g}'>bad</span>" in page  # blue: opposes
    strongest = css(max(good, bad, key=abs), scale)
    assert strongest in (f"rgb{RED}", f"rgb{BLUE}")  # the strongest word at the map's full red or blue
    assert html.escape(LEGEND) in page


def test_a_spectrogram_is_drawn_over_its_picture():
    specs = torch.rand(1, 64, 40) ** 4  # power: drawn in decibels
    specs[:, 10:20, 5:15] = 50.0  # a loud patch

    def model(s: torch.Tensor) -> torch.Tensor:
        return s[:, :32].mean((1, 2)).unsqueeze(1)

    exp = explain_spectrogram(model, specs, n_samples=64)
    previews = exp.info.previews
    assert previews.shape == (1, 3, 64, 40) and "previews" not in exp.meta["audio"]
    assert int(previews[0, 0, 15, 10]) == 255 and int(previews[0, 0, 40, 30]) < 255
    assert len(images_of(exp._repr_html_())) == 1
