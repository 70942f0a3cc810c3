"""Explanation files written by torchlime 0.1 still load: their tensors as saved, their typed records rebuilt
from the plain ``meta`` the file keeps, and ``meta`` rendered from those records equal to what the file holds.

The fixtures (``tests/fixtures/v0_1/``: an image, a token and a ``Boxes`` explanation) were written by
``make_explanations.py`` there, run with the code of 0.1 (commit 682388e).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from torchlime import Explanation
from torchlime.engine.run_record import RunRecord
from torchlime.image import ImagesInfo
from torchlime.targets import BoxesInfo
from torchlime.text import TokensInfo

FIXTURES = Path(__file__).parents[1] / "fixtures" / "v0_1"
NAMES = ("image", "tokens", "boxes")


def _stored(name: str) -> dict[str, object]:
    return torch.load(FIXTURES / f"{name}.pt", weights_only=True)


@pytest.mark.parametrize("name", NAMES)
def test_a_0_1_file_loads_its_tensors_and_renders_its_meta_as_written(name, tmp_path):
    raw = _stored(name)
    exp = Explanation.load(FIXTURES / f"{name}.pt")
    for field in ("coef", "intercept", "score", "local_pred", "target", "features", "n_features"):
        assert torch.equal(getattr(exp, field), raw[field]), field
    assert exp.input_shape == tuple(raw["input_shape"])
    assert isinstance(exp.run, RunRecord) and dict(exp.meta) == raw["meta"]
    assert dict(exp.stored) == {}  # every entry is read back into a typed record
    exp.save(tmp_path / "again.pt")  # saved again, the file holds the same plain data
    assert _stored_again(tmp_path / "again.pt") == raw["meta"]


def _stored_again(path: Path) -> dict[str, object]:
    return torch.load(path, weights_only=True)["meta"]


def test_the_records_of_a_0_1_image_explanation():
    exp = Explanation.load(FIXTURES / "image.pt")
    assert exp.coef.shape == (2, 1, 4) and exp.info == ImagesInfo("grid", 4, False)
    assert exp.run.n_samples == 32 and exp.run.samples_used == [32, 32] and exp.run.baseline == "mean"
    assert exp.run.perturbation == "blend" and exp.run.unreliable is None
    assert exp.run.surrogate.startswith("Ridge(alpha=1.0") and exp.run.kernel.startswith("ExponentialKernel(width=0.25")
    one = exp[1]  # the records are sliced, the rendering follows them
    assert one.run.samples_used == [32] and one.meta["samples_used"] == [32] and one.info == exp.info
    assert "2 input(s) of shape (1, 8, 8)" in repr(exp) and "32 samples per input" in repr(exp)
    assert "samples: 32" in exp._repr_html_()


def test_the_records_of_a_0_1_token_explanation():
    exp = Explanation.load(FIXTURES / "tokens.pt")
    assert isinstance(exp.info, TokensInfo) and exp.info.mode == "replace" and exp.info.lengths == [5, 5]
    assert exp.meta["mode"] == "replace" and exp.meta["text_tokens"] == exp.info.as_plain()
    assert exp.run.perturbation == "custom" and exp.features.tolist() == [[0, 1, 2, 3, 4]] * 2
    assert exp[0].info.lengths == [5]


def test_the_records_of_a_0_1_boxes_explanation():
    exp = Explanation.load(FIXTURES / "boxes.pt")
    assert exp.run.targets == BoxesInfo([[[0.0, 0.0, 8.0, 8.0]]]) and exp.target.tolist() == [[1]]
    assert exp.run.targets.caption(0, 0, 1) == "box 0 (label 1) at [0.0, 0.0, 8.0, 8.0]"
    assert exp.run.quality["few_samples"] == [[0]] and "Kish" in exp.run.unreliable
    page = exp._repr_html_()
    assert "box 0 (label 1) at [0.0, 0.0, 8.0, 8.0]" in page and "unreliable: fewer effective samples" in page
