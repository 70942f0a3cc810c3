"""Result folders keep what it takes to redraw every explanation: the feature maps (compactly), optionally the
inputs; ``Results.explanation()`` paints the same heat maps as the run's explanations, bit for bit; folders of
the second format (no maps) still load, say how to draw them, and resume in their own format; the run says
when it resumes."""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import torchlime
from torchlime.dataset import explain_dataset, load_results
from torchlime.dataset._integrity import index_digest, shard_bytes
from torchlime.dataset._rows import compact_ids

worker = importlib.import_module("tests.helpers.dataset_worker")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("maps") / "out"
    worker.run(out)
    return out


@pytest.fixture(scope="module")
def in_memory() -> torchlime.Explanation:
    """The explanation of the whole data set in one call (the run's explanations, batch-invariant model)."""
    data = worker.make_data()
    return torchlime.Explainer().run(worker.make_model(), data.tensors[0], worker.MODALITY, worker.CALL)


def to_second_format(out: Path) -> None:
    """Rewrite a folder as the second format wrote it: checksums, no feature maps, no input shape."""
    digests = {}
    for shard in sorted(out.glob("shard-*.safetensors")):
        with safe_open(str(shard), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys() if k not in ("features", "inputs")}
            meta = {k: v for k, v in f.metadata().items() if k not in ("sha256", "input_shape")}
        data, digests[shard.name] = shard_bytes(tensors, {**meta, "format": "torchlime.dataset.shard/2"})
        shard.write_bytes(data)
    info = json.loads((out / "index.json").read_text())
    info["format"] = "torchlime.dataset/2"
    for entry in info["shards"]:
        entry["sha256"] = digests[entry["file"]]
    info["sha256"] = index_digest(info)
    (out / "index.json").write_text(json.dumps(info))


def test_heat_maps_read_back_equal_the_runs_bit_for_bit(folder, in_memory):
    res = load_results(folder)
    exp = res.load().explanation()
    assert isinstance(exp, torchlime.Explanation) and exp.input_shape == (3, 8, 8)
    assert exp.features.dtype == torch.long and torch.equal(exp.features, in_memory.features)
    assert torch.equal(exp.heatmap(), in_memory.heatmap()) and torch.equal(exp.heatmap(1), in_memory.heatmap(1))
    one = res[13]  # one input, read from its shard alone
    assert one.features.shape == (1, 1, 8, 8) and torch.equal(one.heatmap(0), in_memory[13].heatmap(0))
    assert torch.equal(res.field("features"), in_memory.features)
    assert exp.meta["samples_used"] == [32] * 20 and one.explanation().meta["samples_used"] == [32]


def test_feature_ids_are_stored_in_the_smallest_integer_dtype():
    assert compact_ids(torch.tensor([-1, 127])).dtype == torch.int8
    assert compact_ids(torch.tensor([-1, 128])).dtype == torch.int16
    assert compact_ids(torch.tensor([0, 40000])).dtype == torch.int32
    assert compact_ids(torch.tensor([0, 2**40])).dtype == torch.int64
    assert compact_ids(torch.zeros(0, dtype=torch.long)).dtype == torch.int8


def test_keeping_inputs_stores_them_as_given_and_keeping_no_features_stores_no_maps(tmp_path, in_memory):
    worker.run(tmp_path / "inputs", keep=("features", "inputs"))
    res = load_results(tmp_path / "inputs").load()
    given = worker.make_data().tensors[0]
    assert res.inputs.dtype == given.dtype and torch.equal(res.inputs, given)
    assert json.loads((tmp_path / "inputs" / "index.json").read_text())["arguments"]["keep_inputs"] is True
    worker.run(tmp_path / "coef", keep=())
    res = load_results(tmp_path / "coef").load()
    assert res.features is None and res.inputs is None and torch.equal(res.coef, in_memory.coef)
    with pytest.raises(ValueError, match="`features` must be given: these results hold no feature maps"):
        res.heatmap()
    with pytest.raises(ValueError, match="keep_features: stored false, given"):
        worker.run(tmp_path / "coef")  # a storage option of the run: another one is refused
    with pytest.raises(TypeError, match=r"`keep` must be a tuple of names among \['features', 'inputs'\]"):
        worker.run(tmp_path / "other", keep="inputs")


def test_a_folder_of_the_second_format_loads_and_says_how_to_draw_it(folder, tmp_path, in_memory):
    out = tmp_path / "old"
    shutil.copytree(folder, out)
    to_second_format(out)
    res = load_results(out)  # verified, without warning
    part = res[4:10]
    assert res.complete and part.features is None and part.input_shape is None
    assert torch.equal(part.coef, in_memory.coef[4:10])
    with pytest.raises(ValueError, match=r"written in format 'torchlime.dataset/2' .* pass them as features="):
        part.explanation()
    maps = worker.SEGMENTS.view(1, 1, 8, 8)  # the run's segments, rebuilt
    exp = part.explanation(features=maps, input_shape=(3, 8, 8))
    assert torch.equal(exp.heatmap(), in_memory[4:10].heatmap())
    with pytest.raises(ValueError, match=r"`features` must have shape \(6 or 1, \*fshape\)"):
        part.explanation(features=maps.expand(2, 1, 8, 8))
    with pytest.raises(ValueError, match="`features` must number at most the 16 features"):
        part.explanation(features=maps + 1)
    with pytest.raises(ValueError, match=r"`input_shape` must be a shape the feature maps \(1, 8, 8\) broadcast"):
        part.explanation(features=maps, input_shape=(3, 4, 4))


def test_resuming_a_folder_of_the_second_format_goes_on_in_it(folder, tmp_path, in_memory):
    out = tmp_path / "old"
    shutil.copytree(folder, out)
    to_second_format(out)
    os.remove(out / "shard-000001.safetensors")
    with pytest.warns(RuntimeWarning, match="written in format 'torchlime.dataset/2' by an earlier torchlime"):
        worker.run(out)
    assert json.loads((out / "index.json").read_text())["format"] == "torchlime.dataset/2"
    with safe_open(str(out / "shard-000001.safetensors"), framework="pt") as f:
        assert "features" not in f.keys() and f.metadata()["format"] == "torchlime.dataset.shard/2"
    res = load_results(out)
    assert res.complete and torch.equal(res.coef, in_memory.coef) and res.load().features is None


def test_the_run_says_when_it_resumes_and_what_it_kept(folder, tmp_path, caplog):
    out = tmp_path / "out"
    shutil.copytree(folder, out)
    os.remove(out / "shard-000001.safetensors")
    with caplog.at_level(logging.INFO, logger="torchlime.dataset"):
        worker.run(out)
        worker.run(out)
    lines = [r.getMessage() for r in caplog.records if r.name == "torchlime.dataset"]
    assert lines == [
        f"resuming {out}: 2 of 3 shards already done (12 explanations kept)",
        f"kept 3 of 3 shards, 20 explanations in {out}",
        f"{out} is complete (3 of 3 shards, 20 explanations): nothing to compute",
        f"kept 3 of 3 shards, 20 explanations in {out}",
    ]
    assert caplog.records[0].shards_done == 2 and caplog.records[0].explanations_kept == 12


@dataclasses.dataclass(frozen=True)
class MixedMaps(torchlime.Modality):
    """The batch of inputs 2, 3 gets maps (b, 3, 8, 8), the others maps broadcast over channels (b, 1, 8, 8)."""

    def prepare(self, model, inputs, how, call):
        feats = worker.SEGMENTS.view(1, 1, 8, 8).expand(inputs.shape[0], 1, 8, 8)
        if int(call.index[0]) % 4 == 2:
            feats = feats.expand(-1, 3, -1, -1)
        return torchlime.Prepared(inputs, feats, how, call)


def test_maps_of_different_shapes_in_one_shard_are_left_out_of_it(tmp_path):
    call = dict(
        modality=MixedMaps(), call=torchlime.Call(n_samples=16), inputs_per_step=2, shard_size=4, progress=False
    )
    with pytest.warns(RuntimeWarning, match=r"shard 0: its inputs' features have different shapes"):
        explain_dataset(worker.make_model(), worker.make_data(6), tmp_path, **call)
    res = load_results(tmp_path)
    assert res[0].features is None and res[5].features.shape == (1, 1, 8, 8)  # shard 1: inputs 4, 5
    with pytest.raises(ValueError, match="`name` must be a field every shard of .* holds, got 'features'"):
        res.field("features")
