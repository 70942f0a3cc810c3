"""``explain_dataset`` takes the engine's three records, like ``Explainer.run``: an ``Explainer`` (how), a
modality (the input kind) and a ``Call`` (what).

The same records give the same bits as the front door with the same keywords, in any batching; keywords of
0.1 (``explain_fn=``, the engine's keywords beside the records) are refused before any model call.
"""

from __future__ import annotations

import pytest
import torch

import torchlime
from torchlime import Call, Explainer, Images, Series
from torchlime.dataset import explain_dataset, load_results

from tests.helpers import grid_labels


@pytest.fixture(scope="module")
def cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).eval()


def test_the_records_equal_the_front_door_bit_for_bit(tmp_path, cnn):
    images = torch.rand(6, 3, 16, 16)
    seg = grid_labels(16, 16, 2, 2)
    lime = Explainer(kernel="lime", baseline="mean")
    records = dict(explainer=lime, modality=Images(segments=seg), call=Call(n_samples=40, target="top2", generator=4))
    a = explain_dataset(cnn, images, tmp_path / "a", inputs_per_step=4, shard_size=4, progress=False, **records)
    door = torchlime.explain_image(
        cnn, images, segments=seg, kernel="lime", baseline="mean", n_samples=40, target="top2", generator=4
    )
    ra = load_results(a)
    assert ra.coef.shape == (6, 2, 4) and torch.equal(ra.coef, door.coef) and torch.equal(ra.target, door.target)
    assert torch.equal(ra.intercept, door.intercept) and torch.equal(ra.score, door.score)
    # the same run again resumes (its record names the explainer, the modality and the call)
    again = explain_dataset(cnn, images, tmp_path / "a", inputs_per_step=3, shard_size=4, progress=False, **records)
    assert torch.equal(load_results(again).coef, ra.coef)
    with pytest.raises(ValueError, match=r"other arguments \(kernel: stored \"lime\", given \"uniform\"\)"):
        explain_dataset(
            cnn,
            images,
            tmp_path / "a",
            shard_size=4,
            **{**records, "explainer": Explainer(kernel="uniform", baseline="mean")},
        )


def test_series_modality_in_a_data_set(tmp_path):
    model = lambda x: x[:, 1].pow(2).mean(-1, keepdim=True)  # noqa: E731 - channel 1 is the evidence
    series = torch.randn(5, 3, 30)
    out = explain_dataset(
        model, series, tmp_path / "s", modality=Series(segments="channel"), call=Call(n_samples=60), progress=False
    )
    res = load_results(out)
    assert (res.coef[:, 0].argmax(-1) == 1).all()


def test_the_keywords_of_0_1_are_refused_by_name(tmp_path, cnn):
    images = torch.rand(2, 3, 16, 16)
    for old in (dict(n_samples=10), dict(kernel="lime"), dict(explain_fn=torchlime.explain), dict(generator=3)):
        with pytest.raises(TypeError, match=f"unexpected keyword argument '{next(iter(old))}'"):
            explain_dataset(cnn, images, tmp_path / "x", modality=Images(), **old)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'modality'"):
        explain_dataset(cnn, images, tmp_path / "x")
    with pytest.raises(TypeError, match="`explainer` must be None or a torchlime.Explainer"):
        explain_dataset(cnn, images, tmp_path / "x", explainer="lime", modality=Images())
    assert not (tmp_path / "x").exists()


def test_a_continuation_in_a_data_set_equals_the_generation_modality(tmp_path):
    from torchlime.targets import Continuation
    from torchlime.text import Generation

    lm = lambda input_ids: torch.nn.functional.one_hot(input_ids.roll(1, 1), 16).float() * 4  # noqa: E731
    prompts = torch.tensor([[3, 5, 7], [2, 4, 6], [1, 2, 3]])
    call = Call(target=Continuation(max_new_tokens=2), n_samples=64, generator=0)
    out = explain_dataset(lm, prompts, tmp_path / "g", modality=Generation(mask_id=0), call=call, inputs_per_step=2)
    one = Explainer().run(lm, prompts, Generation(mask_id=0), call)
    assert torch.equal(load_results(out).coef, one.coef)
