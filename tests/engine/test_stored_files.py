"""Explanation files from elsewhere: a field of the wrong kind is refused on load, naming the file and
the field, and free text that loads is escaped in the notebook display."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from torchlime import Explanation, explain, explain_tabular, explain_text, explain_tokens
from torchlime.engine._stored import StoredDataError
from torchlime.engine.notebook import _summary
from torchlime.engine.run_record import RunRecord
from torchlime.tabular._info import TabularInfo
from torchlime.text._tokens import TokensInfo
from torchlime.text._words import WordsInfo

from tests.helpers import SegmentLinear, grid_labels
from tests.helpers.text import PositionBag

SCRIPT = "<script>alert(1)</script>"


def _image() -> Explanation:
    labels = grid_labels(8, 8, 2, 2)
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return explain(SegmentLinear(labels, 4), x, labels.view(1, 1, 8, 8), n_samples=32)


def _words(text: str = "good film, bad cast") -> Explanation:
    def score(texts: list[str]) -> torch.Tensor:
        return torch.tensor([[t.count("good") - t.count("bad") + 0.1 * len(t)] for t in texts])

    return explain_text(score, [text], target=0, n_samples=32, generator=0)


def _table() -> Explanation:
    g = torch.Generator().manual_seed(0)
    train = torch.rand(40, 3, generator=g, dtype=torch.float64)
    return explain_tabular(lambda x: x[:, :1] * 2 - x[:, 1:2], train[:2], training_data=train, n_samples=32)


def _tokens() -> Explanation:
    ids = torch.tensor([[1, 5, 6, 7, 2]])
    return explain_tokens(PositionBag(), ids, mask_id=3, model_inputs="positional", n_samples=32, generator=0)


def _tampered(exp: Explanation, path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``exp`` saved to ``path`` with ``edit`` applied to the stored dict."""
    exp.save(path)
    data = torch.load(path, weights_only=True)
    edit(data)
    torch.save(data, path)
    return path


@pytest.mark.parametrize(
    ("make", "kind"),
    [(_image, type(None)), (_words, WordsInfo), (_table, TabularInfo), (_tokens, TokensInfo)],
    ids=["image", "words", "table", "tokens"],
)
def test_files_that_save_wrote_load_as_before(make, kind, tmp_path):
    exp = make()
    exp.save(tmp_path / "e.pt")
    back = Explanation.load(tmp_path / "e.pt")
    assert back.input_shape == exp.input_shape and torch.equal(back.coef, exp.coef.cpu())
    assert back.meta == torch.load(tmp_path / "e.pt", weights_only=True)["meta"]
    assert back.run == RunRecord.from_plain(back.meta) and back.run.as_plain().keys() == exp.run.as_plain().keys()
    assert type(back.info) is kind
    assert back._repr_html_().startswith("<div>")


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ([SCRIPT, 8, 8], r"input_shape\[0\] must be an int, got str '<script>"),
        ([3, True, 8], r"input_shape\[1\] must be an int, got bool True"),
        ("3x8x8", r"input_shape must be a list of ints, got str '3x8x8'"),
        ([3, -8, 8], r"input_shape must hold sizes >= 0, got \[3, -8, 8\]"),
    ],
)
def test_a_stored_shape_of_other_than_sizes_is_refused_naming_the_file(shape, said, tmp_path):
    path = _tampered(_image(), tmp_path / "evil.pt", lambda d: d.update(input_shape=shape))
    with pytest.raises(StoredDataError, match=f"evil.pt is not a valid Explanation file: {said}"):
        Explanation.load(path)


@pytest.mark.parametrize(
    ("make", "edit", "said"),
    [
        (_image, lambda d: d.update(coef=[[[1.0]]]), r"coef must be a tensor, got list"),
        (_image, lambda d: d["meta"].update(surrogate=[SCRIPT]), r"meta\['surrogate'\] must be a str, got list"),
        (_image, lambda d: d["meta"].update(samples_used=[32, "x"]), r"meta\['samples_used'\]\[1\] must be an int"),
        (_image, lambda d: d["meta"].update(seconds_total="1"), r"meta\['seconds_total'\] must be a number, got str"),
        (_image, lambda d: d.update(meta={1: 2}), r"meta must be a mapping with str keys"),
        (
            _words,
            lambda d: d["meta"]["text_words"]["pieces"][0].__setitem__(1, 7),
            r"meta\['text_words'\]\['pieces'\]\[0\]\[1\] must be a str, got int 7",
        ),
        (
            _table,
            lambda d: d["meta"]["tabular"]["levels"][0].__setitem__(0, SCRIPT),
            r"meta\['tabular'\]\['levels'\]\[0\]\[0\] must be a number \(a tensor is kept as nested lists\)",
        ),
        (
            _table,
            lambda d: d["meta"]["tabular"].update(feature_names=[SCRIPT, 2, "c"]),
            r"meta\['tabular'\]\['feature_names'\]\[1\] must be a str, got int 2",
        ),
        (
            _tokens,
            lambda d: d["meta"]["text_tokens"].update(pad_id="0"),
            r"meta\['text_tokens'\]\['pad_id'\] must be an int, got str '0'",
        ),
    ],
    ids=["tensor", "surrogate", "samples", "seconds", "meta", "pieces", "levels", "names", "pad"],
)
def test_a_record_field_of_another_kind_is_refused_naming_file_and_field(make, edit, said, tmp_path):
    path = _tampered(make(), tmp_path / "evil.pt", edit)
    with pytest.raises(ValueError, match=f"evil.pt is not a valid Explanation file: {said}"):
        Explanation.load(path)


def test_free_text_of_a_loaded_file_is_escaped_in_the_notebook(tmp_path):
    def edit(data: dict[str, Any]) -> None:
        data["meta"].update(surrogate=SCRIPT, kernel=SCRIPT, unreliable=SCRIPT, n_samples=SCRIPT)
        data["meta"]["quality"] = {SCRIPT: [[0, 0]]}

    page = Explanation.load(_tampered(_words(f"good {SCRIPT} film"), tmp_path / "e.pt", edit))._repr_html_()
    assert "<script" not in page and page.count("&lt;script&gt;") >= 5
    table = Explanation.load(
        _tampered(_table(), tmp_path / "t.pt", lambda d: d["meta"]["tabular"].update(feature_names=[SCRIPT] * 3))
    )
    assert "<script" not in table._repr_html_() and "&lt;script&gt;" in table._repr_html_()


def test_the_summary_escapes_the_shape_it_is_given():
    exp = _image()
    exp.input_shape = (SCRIPT,)  # what a file would bring if load let it through
    head = _summary(exp)
    assert "<script" not in head and "&lt;script&gt;" in head
