"""``explain_dataset`` and the training probe take an ``Explainer`` and a modality, like ``Explainer.explain``.

The same explainer and modality give the same shards as the front door with the same keywords; keywords that
are no field of the records, or configuration beside an explainer, are refused before any model call.
"""

from __future__ import annotations

import pytest
import torch

import torchlime
from torchlime import Explainer, Images, Series
from torchlime.dataset import explain_dataset, load_results

from tests.helpers import grid_labels


@pytest.fixture(scope="module")
def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()


def test_explainer_and_modality_equal_the_front_door(tmp_path, cnn):
    images = torch.rand(6, 3, 16, 16)
    seg = grid_labels(16, 16, 2, 2)
    lime = Explainer(kernel="lime", baseline="mean")
    a = explain_dataset(
        cnn,
        images,
        tmp_path / "a",
        explainer=lime,
        modality=Images(segments=seg),
        n_samples=40,
        target="top2",
        inputs_per_step=4,
        shard_size=4,
        progress=False,
    )
    b = explain_dataset(
        cnn,
        images,
        tmp_path / "b",
        segments=seg,
        kernel="lime",
        baseline="mean",
        n_samples=40,
        target="top2",
        inputs_per_step=3,
        shard_size=4,
        progress=False,
    )
    ra, rb = load_results(a), load_results(b)
    assert ra.coef.shape == (6, 2, 4) and torch.equal(ra.coef, rb.coef) and torch.equal(ra.target, rb.target)
    # the same run again resumes (its record names the explainer and the modality)
    again = explain_dataset(
        cnn,
        images,
        tmp_path / "a",
        explainer=lime,
        modality=Images(segments=seg),
        n_samples=40,
        target="top2",
        inputs_per_step=4,
        shard_size=4,
        progress=False,
    )
    assert torch.equal(load_results(again).coef, ra.coef)
    with pytest.raises(ValueError, match="other arguments|another run|different"):
        explain_dataset(
            cnn,
            images,
            tmp_path / "a",
            explainer=Explainer(kernel="uniform"),
            modality=Images(segments=seg),
            n_samples=40,
            target="top2",
            shard_size=4,
            progress=False,
        )


def test_series_modality_in_a_data_set(tmp_path):
    model = lambda x: x[:, 1].pow(2).mean(-1, keepdim=True)  # noqa: E731 - channel 1 is the evidence
    series = torch.randn(5, 3, 30)
    out = explain_dataset(
        model, series, tmp_path / "s", modality=Series(segments="channel"), n_samples=60, progress=False
    )
    res = load_results(out)
    assert (res.coef[:, 0].argmax(-1) == 1).all()


def test_bad_keywords_are_refused_by_name(tmp_path, cnn):
    images = torch.rand(2, 3, 16, 16)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['n_sample'\]"):
        explain_dataset(cnn, images, tmp_path / "x", modality=Images(), n_sample=10)
    with pytest.raises(TypeError, match="settings of the explainer"):
        explain_dataset(cnn, images, tmp_path / "x", explainer=Explainer(), modality=Images(), kernel="lime")
    with pytest.raises(TypeError, match="not both"):
        explain_dataset(cnn, images, tmp_path / "x", explain_fn=torchlime.explain, modality=Images())
    with pytest.raises(TypeError, match="`explainer` must be None or a torchlime.Explainer"):
        explain_dataset(cnn, images, tmp_path / "x", explainer="lime", modality=Images())
