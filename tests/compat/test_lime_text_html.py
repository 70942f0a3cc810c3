"""The lime layer's text HTML has lime's main text panel: the text, its explained words highlighted in place
in the colour of the class each supports (lime's colours), more opaque the larger the weight."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

from torchlime.compat.lime import LimeTextExplainer
from torchlime.compat.lime._html import _CATEGORY10, _CATEGORY20

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

TEXT = "a good movie, good plot & <b>dull</b> acting"
BLUE10, ORANGE10, GREEN10 = "31,119,180", "255,127,14", "44,160,44"  # d3 category10: classes 0, 1, 2


def two_classes(texts: list[str]) -> np.ndarray:
    good = np.array([("good" in t) - 0.5 * ("dull" in t) for t in texts], dtype=float)
    p = 0.5 + 0.3 * good
    return np.stack((1 - p, p), 1)


def highlights(page: str) -> list[tuple[str, str, float]]:
    """(word, rgb, alpha) of every highlighted word of the text panel."""
    panel = page[page.index("Text with highlighted words") :]
    found = re.findall(r"<span style='background-color:rgba\((\d+,\d+,\d+),([\d.]+)\)'>([^<]*)</span>", panel)
    return [(word, rgb, float(alpha)) for rgb, alpha, word in found]


def test_the_text_panel_highlights_the_explained_words_in_place():
    exp = LimeTextExplainer(class_names=["bad", "good"], random_state=0).explain_instance(
        TEXT, two_classes, num_features=3, num_samples=400
    )
    page = exp.as_html()
    assert "<h3>Text with highlighted words</h3>" in page and "<script" not in page
    # the whole text, escaped, with every occurrence of the explained words wrapped in place
    plain = re.sub(r"<span style='background-color:[^']*'>([^<]*)</span>", r"\1", page.split("<h3>")[1])
    assert "a good movie, good plot &amp; &lt;b&gt;dull&lt;/b&gt; acting" in plain
    shown = dict(exp.as_list(label=1))
    assert {"good", "dull"} <= set(shown) and len(shown) == 3
    marks = highlights(page)
    assert [w for w, _, _ in marks].count("good") == 2  # both occurrences
    for word, rgb, alpha in marks:
        assert word in shown
        assert rgb == (ORANGE10 if shown[word] > 0 else BLUE10)  # two classes: class 1's or class 0's colour
        assert alpha == pytest.approx(abs(shown[word]) / max(map(abs, shown.values())), abs=1e-3)
    assert dict((w, a) for w, _, a in marks)["good"] == 1.0  # the strongest word at full opacity
    assert exp.text == TEXT and exp.text_html(1) in page


def test_more_classes_use_the_label_colour_and_lime_not_label_colour():
    def three(texts: list[str]) -> np.ndarray:
        p = two_classes(texts)
        return np.concatenate((p * 0.8, np.full((len(texts), 1), 0.2)), 1)

    exp = LimeTextExplainer(random_state=0).explain_instance(TEXT, three, labels=(0, 2), num_samples=400)
    marks = highlights(exp.as_html())  # the first label shown: 0
    weights = dict(exp.as_list(label=0))
    for word, rgb, _ in marks:
        assert rgb == (BLUE10 if weights[word] > 0 else "95,158,160")  # class 0's colour, or "NOT 0" (#5F9EA0)
    assert any(rgb == "95,158,160" for _, rgb, _ in marks) and any(rgb == BLUE10 for _, rgb, _ in marks)
    marks = highlights(exp.as_html(labels=[2]))
    assert {rgb for _, rgb, _ in marks} <= {GREEN10, "95,158,160"}


def test_the_panel_is_saved_and_characters_are_highlighted_one_by_one(tmp_path):
    exp = LimeTextExplainer(char_level=True, random_state=0).explain_instance(
        "a good", two_classes, num_features=6, num_samples=300
    )
    page = exp.as_html()
    marks = highlights(page)
    assert marks and all(len(w) == 1 for w, _, _ in marks)  # one span per character
    assert re.sub(r"<[^>]+>", "", page.split("<h3>")[1]).endswith("a good")
    exp.save_to_file(str(tmp_path / "text.html"))
    assert "Text with highlighted words" in (tmp_path / "text.html").read_text()


def test_the_colours_are_lime_own():
    lime = pytest.importorskip("lime", reason="lime is a test extra: pip install -e '.[test]'")
    with open(os.path.join(os.path.dirname(lime.__file__), "bundle.js"), encoding="utf8") as f:
        bundle = f.read()
    assert "'#5F9EA0'" in bundle and "Text with highlighted words" in bundle  # lime's "NOT label" colour
    for name, ours in (("d3_category10", _CATEGORY10), ("d3_category20", _CATEGORY20)):  # lime's class colours
        numbers = re.search(rf"var {name} = \[([^\]]+)\]", bundle).group(1).split(",")
        assert [f"#{int(n):06x}" for n in numbers] == list(ours)


def test_lime_s_page_options_are_honoured_and_others_refused():
    from torchlime.compat.lime import LimeTabularExplainer

    exp = LimeTextExplainer(class_names=["bad", "good"], random_state=0).explain_instance(
        TEXT, two_classes, num_features=3, num_samples=400
    )
    assert "Text with highlighted words" not in exp.as_html(text=False)
    assert {a for _, _, a in highlights(exp.as_html(opacity=False))} == {1.0}  # every word fully coloured
    with pytest.raises(TypeError, match=r"unexpected keywords \['bogus'\]: lime's are show_table"):
        exp.as_html(bogus=1)
    rows = np.random.RandomState(0).rand(30, 3)
    table = LimeTabularExplainer(rows, feature_names=["a", "b", "c"], random_state=0).explain_instance(
        rows[0], lambda r: np.c_[1 - r[:, :1], r[:, :1]], num_features=1, num_samples=200
    )

    def cells(page: str) -> list[tuple[str, str]]:  # the rows of the feature / value table
        return re.findall(r"<tr><td>(\w)</td><td>([\d.]+)</td></tr>", page.partition("<th>Value</th></tr>")[2])

    assert cells(table.as_html()) == [("a", f"{rows[0, 0]:.2f}")]  # lime's feature / value table: the explained
    assert [n for n, _ in cells(table.as_html(show_all=True))] == ["a", "b", "c"]
    assert cells(table.as_html(show_table=False)) == []
