"""Result folders written by torchlime 0.1 (``explain_fn=`` and its keywords in ``index.json``): they load as
they are, and resuming one is refused with the current call of its settings, which gives the same numbers.

The fixture ``tests/fixtures/v0_1/dataset_folder`` was written by 0.1 (``make_dataset_folder.py`` beside it):
3 images of 3 x 8 x 8 explained by ``explain_image`` with a 4-cell segments map, N = 16, "top2", seed 3.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from torchlime import Call, Explainer, Images
from torchlime.dataset import explain_dataset, load_results
from torchlime.dataset._describe import describe_model
from torchlime.dataset._old_runs import current_call

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "v0_1" / "dataset_folder"
SEGMENTS = torch.arange(8).view(8, 1) // 4 * 2 + torch.arange(8) // 4  # 4 cells of 4 x 4


def model_and_images() -> tuple[torch.nn.Module, torch.Tensor]:
    """The fixture's model and images, made as its script made them."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 4)).eval()
    return model, torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def test_a_0_1_folder_loads():
    res = load_results(FOLDER)
    assert res.complete and len(res) == 3 and len(res.entries) == 2
    assert res.coef.shape == (3, 2, 4) and torch.equal(res.index, torch.arange(3))
    assert res.info["arguments"]["explain_fn"] == "torchlime.image._explain.explain_image"
    exp = res[0:3].explanation()  # the stored segments maps
    assert exp.heatmap(0).shape == (3, 3, 8, 8) and torch.equal(exp.coef, res.coef)
    assert res[0:3].coef_se is None and exp.coef_se is None and exp.se_method == "none"  # before standard errors


def test_resuming_a_0_1_folder_is_refused_naming_the_current_call(tmp_path):
    out = tmp_path / "old"
    shutil.copytree(FOLDER, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    model, images = model_and_images()
    records = dict(modality=Images(segments=SEGMENTS), call=Call(n_samples=16, target="top2", generator=3))
    match = (
        r"holds a run of torchlime 0\.1 \(explain_fn='torchlime\.image\._explain\.explain_image' and its keywords\), "
        r"which this version cannot resume: read it with load_results, or compute it again in a new folder with "
        r"explain_dataset\(model, data, out, modality=torchlime\.Images\(segments=<the same \(8, 8\) tensor>\), "
        r"explainer=torchlime\.Explainer\(sampler='bernoulli', surrogate='ridge'\), "
        r"call=torchlime\.Call\(n_samples=16, target='top2', generator=3\)\)"
    )
    with pytest.raises(ValueError, match=match):
        explain_dataset(model, images, out, shard_size=2, progress=False, **records)
    assert before == {p.name: p.read_bytes() for p in out.iterdir()}  # untouched


def test_the_named_call_gives_the_0_1_numbers(tmp_path):
    model, images = model_and_images()
    stored = json.loads((FOLDER / "index.json").read_text())["arguments"]
    if describe_model(model) != stored["model"]:
        pytest.skip("this torch initialises the fixture's Linear layer otherwise")
    records = dict(modality=Images(segments=SEGMENTS), call=Call(n_samples=16, target="top2", generator=3))
    explainer = Explainer(sampler="bernoulli", surrogate="ridge")  # 0.1's defaults, as the named call spells them
    out = explain_dataset(
        model, images, tmp_path / "new", inputs_per_step=2, shard_size=2, progress=False, explainer=explainer, **records
    )
    old, new = load_results(FOLDER).load(), load_results(out).load()
    for name in ("coef", "intercept", "score", "local_pred", "target", "n_features", "features"):
        assert torch.equal(getattr(new, name), getattr(old, name)), name


def test_the_current_call_of_other_0_1_runs():
    feats = {"tensor": [1, 6], "dtype": "torch.int64", "sha256": "0" * 64}
    plain = {"explain_fn": "torchlime.engine.explainer.explain", "generator": 0, "explain_kwargs": {"features": feats}}
    assert current_call(plain) == (
        "explain_dataset(model, data, out, modality=<the same (1, 6) tensor>, "
        "explainer=torchlime.Explainer(sampler='bernoulli', surrogate='ridge'), call=torchlime.Call(generator=0))"
    )
    records = {  # 0.1's explainer= + modality= form
        "explain_fn": {
            "type": "torchlime.dataset._modality_run.ModalityRun",
            "fields": {
                "explainer": {"type": "torchlime.engine.explainer.Explainer", "fields": {"kernel": "'lime'"}},
                "modality": {"type": "torchlime.series._series.Series", "fields": {"segments": "channel"}},
            },
        },
        "generator": 2,
        "explain_kwargs": {"n_samples": 60, "batch_size": 256},
    }
    assert current_call(records) == (
        "explain_dataset(model, data, out, modality=torchlime.series._series.Series(segments='channel'), "
        "explainer=torchlime.Explainer(kernel=\"'lime'\", sampler='bernoulli', surrogate='ridge'), "
        "call=torchlime.Call(n_samples=60, generator=2))"
    )
    assert "explainer=torchlime.Explainer(batch_size" not in current_call(records)  # a run setting, not a result's
    assert Explainer(batch_size=256).batch_size == 256  # where 0.1's model_batch_size= goes
