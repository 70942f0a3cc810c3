"""``explain_dataset`` / ``load_results``: storage format, invariance to batching and sharding, lazy
reading, resuming without recomputing, argument checks (the kill tests: test_dataset_resume.py,
torchrun: test_dataset_distributed.py)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import shutil

import pytest
import torch
from safetensors import safe_open
from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data.distributed import DistributedSampler

import torchlime
from torchlime import Call, Explainer, Images
from torchlime.dataset import LazyResults, Results, explain_dataset, load_results
from torchlime.dataset._integrity import shard_bytes

worker = importlib.import_module("tests.helpers.dataset_worker")  # tests/dataset_worker.py (tests/ is on sys.path)
FIELDS = (
    "index",
    "coef",
    "intercept",
    "score",
    "local_pred",
    "target",
    "n_features",
    "samples_used",
    "label",
    "coef_se",
)


def assert_identical(a: Results, b: Results) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and torch.equal(x, y), name


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    worker.run(out, inputs_per_step=7)
    return out


@pytest.fixture(scope="module")
def reference(reference_dir) -> Results:
    return load_results(reference_dir).load()


@pytest.fixture
def engine_runs(monkeypatch) -> list:
    """``(explainer, call)`` of every engine call (``Explainer.run``) of the test."""
    runs = []
    engine = Explainer.run

    def spy(self, model, inputs, modality, call):
        runs.append((self, call))
        return engine(self, model, inputs, modality, call)

    monkeypatch.setattr(Explainer, "run", spy)
    return runs


def test_storage_format(reference_dir):
    files = sorted(os.listdir(reference_dir))
    assert files == ["index.json", "shard-000000.safetensors", "shard-000001.safetensors", "shard-000002.safetensors"]
    info = json.loads((reference_dir / "index.json").read_text())
    assert info["format"] == "torchlime.dataset/4" and info["complete"] and info["n_inputs"] == 20
    assert len(info["sha256"]) == 64 and all(len(e["sha256"]) == 64 for e in info["shards"])
    assert info["n_shards"] == 3 and info["shard_size"] == 8
    assert [(e["shard"], e["start"], e["stop"]) for e in info["shards"]] == [(0, 0, 8), (1, 8, 16), (2, 16, 20)]
    args = info["arguments"]
    assert args["generator"] == 5 and args["modality"]["type"] == "torchlime.image.Images"
    assert args["call"] == {"n_samples": 32, "target": "top2"} and args["explainer"] == {}  # batch_size: not recorded
    assert args["modality"]["fields"]["segments"]["tensor"] == [8, 8] and "explain_fn" not in args
    assert len(args["model"]["state_sha256"]) == 64
    assert (
        info["environment"]["torch"] == torch.__version__ and info["environment"]["torchlime"] == torchlime.__version__
    )
    with safe_open(str(reference_dir / "shard-000002.safetensors"), framework="pt") as f:
        meta = f.metadata()
        shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        dtype = f.get_slice("features").get_dtype()
    assert meta["shard"] == "2" and meta["start"] == "16" and meta["stop"] == "20"
    assert meta["fingerprint"] == info["fingerprint"] and meta["sha256"] == info["shards"][2]["sha256"]
    assert meta["format"] == "torchlime.dataset.shard/4" and json.loads(meta["input_shape"]) == [3, 8, 8]
    assert dtype == "I8"  # 16 segments: the smallest integer dtype that holds the feature ids
    assert shapes == {
        "index": (4,),
        "coef": (4, 2, 16),
        "intercept": (4, 2),
        "score": (4, 2),
        "local_pred": (4, 2),
        "target": (4, 2),
        "n_features": (4,),
        "samples_used": (4,),
        "label": (4,),
        "features": (4, 1, 8, 8),
        "coef_se": (4, 2, 16),
    }


def test_results_equal_explain_image_on_the_whole_batch(reference):
    data = worker.make_data()
    exp = torchlime.image.explain_image(
        worker.make_model(), data.tensors[0], segments=worker.SEGMENTS, n_samples=32, target="top2", generator=5
    )
    assert torch.equal(reference.coef, exp.coef) and torch.equal(reference.target, exp.target)
    assert torch.equal(reference.coef_se, exp.coef_se) and reference.coef_std is None
    assert torch.equal(reference.explanation().coef_se, exp.coef_se)  # read back as the record
    assert torch.equal(reference.label, data.tensors[1]) and torch.equal(reference.index, torch.arange(20))


def test_bit_identical_for_batch_sizes_1_and_7_a_dataloader_and_other_shards(tmp_path, reference):
    worker.run(tmp_path / "b1", inputs_per_step=1, explainer=Explainer(batch_size=7))  # and 7 rows per model call
    assert_identical(load_results(tmp_path / "b1").load(), reference)
    worker.run(tmp_path / "loader", inputs_per_step=5, loader=True)  # the DataLoader's batching
    assert_identical(load_results(tmp_path / "loader").load(), reference)
    worker.run(tmp_path / "s3", inputs_per_step=4, shard_size=3)
    res = load_results(tmp_path / "s3")
    assert len(res.entries) == 7 and [len(p) for p in res] == [3] * 6 + [2]
    assert_identical(res.load(), reference)


class Stream(IterableDataset):
    """The test inputs as a stream of unknown length, optionally failing when it reaches ``fail_at``."""

    def __init__(self, fail_at: int = -1, data=None) -> None:
        self.fail_at = fail_at
        self.data = data

    @classmethod
    def of(cls, data) -> Stream:
        return cls(data=data)

    def __iter__(self):
        for i, item in enumerate(zip(*(self.data or worker.make_data()).tensors)):
            if i == self.fail_at:
                raise RuntimeError("the stream broke")
            yield item


def test_iterable_data_positions_unknown_length_and_resume(tmp_path, reference):
    call = dict(inputs_per_step=6, shard_size=8, progress=False, **worker.RECORDS)
    with pytest.raises(RuntimeError, match="the stream broke"):
        explain_dataset(worker.make_model(), Stream(fail_at=19), tmp_path, **call)  # 3 batches of 6 explained
    part = load_results(tmp_path)
    assert part.n_inputs is None and not part.complete and torch.equal(part.index, torch.arange(16))  # 2 shards
    explain_dataset(worker.make_model(), Stream(), tmp_path, **call)
    res = load_results(tmp_path)
    assert res.complete and res.n_inputs == 20 and res.info["n_shards"] == 3
    assert_identical(res.load(), reference)


def test_lazy_results(reference_dir, reference):
    res = load_results(reference_dir)
    assert isinstance(res, LazyResults) and len(res) == 20 and res.complete
    assert torch.equal(res.index, torch.arange(20))
    for part, (a, b) in ((res[5:18], (5, 18)), (res[-3:], (17, 20)), (res[5], (5, 6))):
        assert isinstance(part, Results) and torch.equal(part.coef, reference.coef[a:b])
        assert torch.equal(part.index, torch.arange(a, b))
    assert torch.equal(res[3:19:4].score, reference.score[3:19:4]) and len(res[7:7]) == 0
    assert [p.index[0].item() for p in res] == [0, 8, 16]
    assert torch.equal(res.coef, reference.coef) and torch.equal(res.target, reference.target)
    assert torch.equal(res.n_features, reference.n_features) and res.valid.all()
    assert "20 input(s) in 3 shard(s) (complete)" in repr(res)
    with pytest.raises(IndexError, match=r"`key` must be in \[-20, 20\) for results of 20 inputs, got 20"):
        res[20]
    with pytest.raises(TypeError, match="`key` must be an int or a slice of positions, got str"):
        res["coef"]
    with pytest.raises(ValueError, match="`name` must be one of .*, got 'weights'"):
        res.field("weights")


@dataclasses.dataclass(frozen=True)
class Bands(torchlime.Modality):
    """Input i has 4 + i % 5 features (bands of rows), so a batch mixes feature counts."""

    def prepare(self, model, inputs, how, call):
        h = inputs.shape[-2]
        bands = torch.arange(h).view(1, 1, h, 1)
        feats = bands * (4 + call.index % 5).view(-1, 1, 1, 1) // h
        return torchlime.Prepared(inputs, feats.expand(-1, 1, h, inputs.shape[-1]), how, call)


def test_inputs_with_fewer_features_are_padded_and_marked(tmp_path):
    explain_dataset(
        worker.make_model(),
        worker.make_data(),
        tmp_path / "a",
        modality=Bands(),
        explainer=worker.FAST,
        call=Call(n_samples=32),
        inputs_per_step=7,
        shard_size=8,
        progress=False,
    )
    res = load_results(tmp_path / "a").load()
    assert torch.equal(res.n_features, 4 + torch.arange(20) % 5) and res.coef.shape == (20, 1, 8)
    assert torch.equal(res.valid, torch.arange(8) < res.n_features.unsqueeze(1))
    assert (res.coef[~res.valid.unsqueeze(1).expand_as(res.coef)] == 0).all()
    assert (res.coef[res.valid.unsqueeze(1).expand_as(res.coef)] != 0).all()
    explain_dataset(
        worker.make_model(),
        worker.make_data(),
        tmp_path / "b",
        modality=Bands(),
        explainer=worker.FAST,
        call=Call(n_samples=32),
        inputs_per_step=1,
        shard_size=8,
        progress=False,
    )
    other = load_results(tmp_path / "b").load()
    # a batch that mixes feature counts pads the fit to its widest input, which changes float
    # rounding of the narrower ones in the last bits (torchlime/surrogate.py: NormalAccumulator.add)
    torch.testing.assert_close(other.coef, res.coef, rtol=1e-5, atol=1e-6)
    assert torch.equal(other.target, res.target) and torch.equal(other.n_features, res.n_features)


def test_target_label_and_the_explainers_run_settings(tmp_path, engine_runs):
    explain_dataset(
        worker.make_model(),
        worker.make_data(12),
        tmp_path,
        modality=worker.MODALITY,
        explainer=Explainer(max_memory=0.25, batch_size=16),
        call=Call(target="label", n_samples=16, generator=3),
        inputs_per_step=5,
        shard_size=8,
        progress=False,
    )
    assert [call.index.tolist() for _, call in engine_runs] == [[0, 1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11]]
    assert all(how.max_memory == 0.25 and how.batch_size == 16 and call.generator == 3 for how, call in engine_runs)
    assert [call.target.tolist() for _, call in engine_runs][1] == [0, 1, 2]  # each input's label
    res = load_results(tmp_path).load()
    assert torch.equal(res.target, (torch.arange(12) % 5).view(-1, 1)) and torch.equal(res.label, torch.arange(12) % 5)


def test_resume_recomputes_only_missing_shards(tmp_path, reference_dir, reference, engine_runs):
    out = tmp_path / "out"
    worker.run(out)
    assert sorted(i for _, call in engine_runs for i in call.index.tolist()) == list(range(20))
    stamps = {p: os.stat(out / p).st_mtime_ns for p in os.listdir(out) if p.startswith("shard")}
    engine_runs.clear()
    worker.run(out)  # finished: nothing to do
    assert engine_runs == [] and stamps == {p: os.stat(out / p).st_mtime_ns for p in stamps}
    os.remove(out / "shard-000001.safetensors")
    assert len(load_results(out)) == 12 and not load_results(out).complete
    with pytest.raises(ValueError, match='kernel: stored \\(not given\\), given "captum"'):
        worker.run(out, explainer=Explainer(kernel="captum"))  # the explainer is one of the arguments
    worker.run(out, inputs_per_step=3, explainer=Explainer(batch_size=5, max_memory=0.5))  # run settings: resumes
    assert sorted(i for _, call in engine_runs for i in call.index.tolist()) == list(range(8, 16))  # the missing one
    res = load_results(out)
    assert res.complete and sorted(os.listdir(out)) == sorted(os.listdir(reference_dir))
    assert stamps["shard-000000.safetensors"] == os.stat(out / "shard-000000.safetensors").st_mtime_ns
    assert_identical(res.load(), reference)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(n_samples=16), r"holds explanations made with other arguments \(n_samples: stored 32, given 16\)"),
        (dict(segments=None), r"segments: stored \{.*tensor.*\}, given null"),
        (dict(shard_size=4), r"shard_size: stored 8, given 4"),
        (dict(generator=6), r"generator: stored 5, given 6"),
        (dict(n=21), r"`data` must hold the 20 inputs of the run stored in `out` .*, got 21"),
        (dict(model=True), r"model: stored"),
    ],
)
def test_other_arguments_are_refused(reference_dir, change, match):
    stamps = {p: os.stat(reference_dir / p).st_mtime_ns for p in os.listdir(reference_dir)}
    call = Call(target="top2", n_samples=change.get("n_samples", 32), generator=change.get("generator", 5))
    modality = Images(segments=change.get("segments", worker.SEGMENTS))
    model = worker.make_model()
    if "model" in change:
        with torch.no_grad():
            model.head[0, 0] += 1
    with pytest.raises(ValueError, match=match):
        explain_dataset(
            model,
            worker.make_data(change.get("n", 20)),
            reference_dir,
            modality=modality,
            call=call,
            shard_size=change.get("shard_size", 8),
            progress=False,
        )
    assert stamps == {p: os.stat(reference_dir / p).st_mtime_ns for p in os.listdir(reference_dir)}  # untouched


@pytest.mark.parametrize("streamed", [False, True], ids=["map-style", "iterable"])
def test_resuming_on_another_data_set_is_refused(tmp_path, reference_dir, streamed):
    out = tmp_path / "out"
    shutil.copytree(reference_dir, out)
    info = json.loads((out / "index.json").read_text())
    os.remove(out / "shard-000001.safetensors")  # an unfinished run, resumed...
    other = worker.make_data()
    other = torch.utils.data.TensorDataset(other.tensors[0].flip(0), other.tensors[1])  # ...on other data
    data = Stream.of(other) if streamed else other
    call = dict(inputs_per_step=7, shard_size=8, progress=False, **worker.RECORDS)
    with pytest.raises(ValueError, match="`data` must be the data set of the run stored in `out` .*first input"):
        explain_dataset(worker.make_model(), data, out, **call)
    assert not (out / "shard-000001.safetensors").exists()
    assert info["first_input"] and len(info["first_input"]) == 64


def test_a_tuple_of_inputs_and_labels_is_a_data_set(tmp_path, reference):
    import numpy as np

    data = worker.make_data()
    call = dict(
        inputs_per_step=np.int64(7), shard_size=np.int32(8), progress=False, **worker.RECORDS
    )  # NumPy integers count as ints
    explain_dataset(worker.make_model(), data.tensors, tmp_path, **call)
    assert_identical(load_results(tmp_path).load(), reference)


def test_progress_bar_counts_explanations_per_second(tmp_path, capsys):
    explain_dataset(
        worker.make_model(),
        worker.make_data(6),
        tmp_path,
        inputs_per_step=3,
        shard_size=4,
        progress=True,
        **worker.RECORDS,
    )
    err = capsys.readouterr().err
    assert "explain_dataset" in err and "6/6" in err and "expl/s" in err


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(inputs_per_step=0), ValueError, "`inputs_per_step` must be >= 1, got 0"),
        (dict(shard_size="8"), TypeError, "`shard_size` must be an int >= 1, got str '8'"),
        (dict(call=Call(generator=torch.Generator())), TypeError, "`call.generator` must be an int seed .*Generator"),
        (dict(call=Call(generator=-1)), ValueError, "`call.generator` must be an int seed >= 0, got -1"),
        (dict(progress="yes"), TypeError, "`progress` must be a bool, got str 'yes'"),
        (dict(call=Call(index=torch.arange(4))), ValueError, "`call.index` must not be given"),
        (dict(call=Call(target=[1, 0, 2, 1])), ValueError, r"`target` for explain_dataset must be the same .*'label'"),
        (dict(call=Call(target=torch.tensor([1, 0]))), ValueError, r"per-input list or tensor .*a tensor of shape"),
        (dict(call=dict(n_samples=8)), TypeError, r"`call` must be None or a torchlime.Call .*got dict"),
        (dict(explainer="lime"), TypeError, "`explainer` must be None or a torchlime.Explainer, got str 'lime'"),
        (dict(modality="images"), TypeError, "`modality` must be a torchlime Modality .*got str 'images'"),
        (dict(keep="inputs"), TypeError, r"`keep` must be a tuple of names among \['features', 'inputs'\]"),
        (dict(keep=("maps",)), ValueError, r"`keep` must name only \['features', 'inputs'\], got \['maps'\]"),
        (dict(model_batch_size=8), TypeError, "unexpected keyword argument 'model_batch_size'"),
        (dict(n_samples=8), TypeError, "unexpected keyword argument 'n_samples'"),
        (dict(data=5), TypeError, "`data` must be a torch Dataset, a DataLoader, .*, got int 5"),
        (dict(data=[{"pixels": torch.rand(3, 8, 8)}] * 4), TypeError, r"`data` must yield input tensors .*, got dict"),
        (dict(data=DataLoader(worker.make_data(), shuffle=True)), ValueError, "shuffle=True.*pass shuffle=False"),
        (
            dict(data=DataLoader(worker.make_data(), sampler=DistributedSampler(worker.make_data(), 2, 0))),
            ValueError,
            "`data` must not use a DistributedSampler",
        ),
        (dict(data=DataLoader(worker.make_data(), batch_size=None)), ValueError, "`data` must yield batches"),
        (
            dict(data=worker.make_data().tensors[0], call=Call(target="label")),
            ValueError,
            "`target='label'` needs data that yield",
        ),
        (dict(out=5), TypeError, "`out` must be a folder path .*, got int 5"),
        (dict(model="net"), TypeError, "`model` must be an nn.Module or a callable, got str 'net'"),
        (dict(device="gpu"), ValueError, "`device` must be a torch device such as 'cpu'"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, error, match):
    call = dict(
        model=worker.make_model(),
        data=worker.make_data(4),
        out=tmp_path / "out",
        progress=False,
        modality=worker.MODALITY,
        call=Call(n_samples=8),
    )
    call.update(kwargs)
    with pytest.raises(error, match=match):
        explain_dataset(call.pop("model"), call.pop("data"), call.pop("out"), **call)


def test_a_cuda_device_without_cuda_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="`device` is 'cuda' but CUDA is not available here"):
        explain_dataset(
            worker.make_model(), worker.make_data(4), tmp_path / "o", modality=None, device="cuda", progress=False
        )


def test_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="`out` must be a folder written by explain_dataset"):
        load_results(tmp_path)
    with pytest.raises(TypeError, match="`out` must be a folder path .*, got int 123"):
        load_results(123)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="`out` must be a folder, got the file"):
        worker.run(tmp_path / "file")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "index.json").write_text(json.dumps({"format": "something"}))
    with pytest.raises(
        ValueError, match="`out` must hold an index of format 'torchlime.dataset/4' .*, got 'something'"
    ):
        load_results(tmp_path / "other")


def test_a_shard_of_another_run_is_refused(tmp_path, reference_dir):
    shutil.copytree(reference_dir, tmp_path / "out")
    shard = tmp_path / "out" / "shard-000001.safetensors"
    with safe_open(str(shard), framework="pt") as f:
        tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, {**f.metadata(), "fingerprint": "another run"}
    meta.pop("sha256")
    shard.write_bytes(shard_bytes(tensors, meta)[0])  # a whole, verified file: of another run
    with pytest.raises(ValueError, match="shard-000001.safetensors, written by a run with other arguments"):
        load_results(tmp_path / "out")
    with pytest.raises(ValueError, match="shard-000001.safetensors, written by a run with other arguments"):
        worker.run(tmp_path / "out")


def test_cuda_device_placement(tmp_path, cuda):
    model = worker.make_model()
    explain_dataset(
        model,
        worker.make_data(),
        tmp_path / "a",
        shard_size=8,
        progress=False,
        device="cuda",
        inputs_per_step=7,
        **worker.RECORDS,
    )
    assert next(model.parameters()).is_cuda  # moved to the device
    explain_dataset(
        model,
        worker.make_data(),
        tmp_path / "b",
        shard_size=8,
        progress=False,
        inputs_per_step=1,
        **worker.RECORDS,
    )
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert a.info["environment"]["device"] == "cuda" and a.complete and b.complete
    a, b = a.load(), b.load()  # batch 7 vs 1 on the GPU (bit identity there not checked on a GPU yet)
    torch.testing.assert_close(a.coef, b.coef, rtol=1e-5, atol=1e-6)
    assert torch.equal(a.target, b.target) and torch.equal(a.index, b.index)
