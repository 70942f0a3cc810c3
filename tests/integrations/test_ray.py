"""``torchlime.integrations.ray_data``: attribution as a Ray Data ``map_batches`` stage.

Most tests call ``Explain`` on dicts of arrays as ``map_batches`` gives them, without Ray (fast, and they
run where Ray is not installed): one ``Explain`` called batch after batch is what one Ray actor does. One test
starts a local Ray cluster and runs the stage with 2 actors through a parquet round trip (Ray's start and
each actor's imports take seconds: one run is kept). The model computes every row on its own
(``tests.helpers.dataset_worker.RowNet``), so the coefficients are compared bit for bit with
``explain_dataset``'s and the front doors' called with ``index=``.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import torch

import torchlime
from torchlime import Call, Explainer, Images
from torchlime.dataset import explain_dataset, load_results
from torchlime.integrations import ray_data
from torchlime.integrations.ray_data import Explain, explain_ray
from torchlime.tabular import Tabular
from torchlime.text import Words

from tests.helpers.dataset_worker import RECORDS, SEGMENTS, make_data, make_model

N = 16
CALL = RECORDS  # Images(segments=SEGMENTS), Call(n_samples=32, target="top2", generator=5), Explainer(batch_size=256)
FIELDS = ("coef", "intercept", "score", "local_pred", "target", "n_features", "samples_used", "coef_se", "features")


def rows() -> dict[str, np.ndarray]:
    """The data set as one batch: an id column, the 3 x 8 x 8 images and a column that passes through."""
    images = make_data(N).tensors[0]
    return {"id": np.arange(N), "image": images.numpy(), "name": np.array([f"img{i}" for i in range(N)])}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out"
    explain_dataset(make_model(), make_data(N), out, inputs_per_step=7, shard_size=8, progress=False, **CALL)
    return load_results(out).load()


def in_batches(step, data, order, sizes) -> dict[str, np.ndarray]:
    """``step`` called on the rows of ``data`` in ``order``, cut in batches of ``sizes``; rows sorted by id."""
    outs, start = [], 0
    for size in sizes:
        pick = order[start : start + size]
        outs.append(step({name: column[pick] for name, column in data.items()}))
        start += size
    joined = {name: np.concatenate([o[name] for o in outs]) for name in outs[0]}
    order = np.argsort(joined["id"])
    return {name: column[order] for name, column in joined.items()}


def assert_equals_reference(out, reference) -> None:
    assert out["id"].tolist() == list(range(N))
    for name in FIELDS:
        expected = getattr(reference, name)
        got = torch.from_numpy(np.array(out[name]))  # a copy: arrays from Ray are read-only
        assert got.dtype == expected.dtype and torch.equal(got, expected), name


@pytest.mark.parametrize(
    "order,sizes",
    [(np.arange(N), [N]), (np.arange(N), [5, 5, 5, 1]), (np.random.default_rng(0).permutation(N), [3, 9, 4])],
    ids=["one-batch", "batches-of-5", "shuffled-3-9-4"],
)
def test_batches_equal_explain_dataset_bit_for_bit(reference, order, sizes):
    step = Explain(make_model, column="image", index_column="id", keep=("features",), **CALL)
    data = rows()
    before = {name: column.copy() for name, column in data.items()}
    out = in_batches(step, data, order, sizes)
    assert_equals_reference(out, reference)
    assert set(out) == {"id", "name", *FIELDS}  # the input column is left out, the others pass through
    assert out["name"].tolist() == [f"img{i}" for i in range(N)]
    assert all(np.array_equal(data[name], before[name]) for name in data)  # the batch is not modified


def test_explainer_and_modality_equal_explain_dataset(tmp_path):
    lime = Explainer(kernel="lime", baseline="mean")
    images = make_data(N).tensors[0]
    out = explain_dataset(
        make_model(),
        images,
        tmp_path / "out",
        explainer=lime,
        modality=Images(segments=SEGMENTS),
        call=Call(n_samples=24, target="top2", generator=3),
        shard_size=8,
        progress=False,
    )
    step = Explain(
        make_model,
        explainer=lime,
        modality=Images(segments=SEGMENTS),
        call=Call(n_samples=24, target="top2", generator=3),
    )
    got = in_batches(step, rows(), np.arange(N), [6, 10])
    assert torch.equal(torch.from_numpy(got["coef"]), load_results(out).coef)


def test_keep_inputs_and_labels(tmp_path):
    data = make_data(N)  # (images, labels): target="label" explains each input's label
    call = dict(modality=Images(segments=SEGMENTS), call=Call(target="label", n_samples=32))
    out = explain_dataset(make_model(), data, tmp_path / "out", progress=False, **call)
    reference = load_results(out)
    batch = {"id": np.arange(N), "image": data.tensors[0].numpy(), "label": data.tensors[1].numpy()}
    step = Explain(make_model, label_column="label", keep=("inputs",), **call)
    got = in_batches(step, batch, np.arange(N)[::-1], [7, 9])
    assert torch.equal(torch.from_numpy(got["coef"]), reference.coef)
    assert torch.equal(torch.from_numpy(got["target"])[:, 0], data.tensors[1])
    assert np.array_equal(got["image"], batch["image"]) and np.array_equal(got["label"], batch["label"])


class Weighted(torch.nn.Module):
    """Scores (c, 3) of rows (c, 6) by elementwise products and row sums: each row on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 6, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.unsqueeze(1) * self.w).sum(-1).tanh()


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")
def test_tabular_and_feature_map_modalities_equal_the_front_door_with_index():
    x = torch.rand(N, 6, generator=torch.Generator().manual_seed(2))
    train = torch.rand(64, 6, generator=torch.Generator().manual_seed(3))
    batch = {"id": np.arange(N) + 100, "row": x.numpy()}  # global indices 100..115
    step = Explain(Weighted, column="row", modality=Tabular(training_data=train), call=Call(n_samples=48, generator=1))
    got = in_batches(step, batch, np.arange(N), [4, 12])
    want = torchlime.explain_tabular(
        Weighted(), x, training_data=train, n_samples=48, generator=1, index=torch.arange(N) + 100
    )
    assert torch.equal(torch.from_numpy(got["coef"]), want.coef)
    feats = torch.arange(6).view(1, 6)
    step = Explain(Weighted, column="row", modality=feats, call=Call(n_samples=40, target="all"))
    got = in_batches(step, batch, np.arange(N), [10, 6])
    want = torchlime.explain(Weighted(), x, feats, n_samples=40, target="all", index=torch.arange(N) + 100)
    assert torch.equal(torch.from_numpy(got["coef"]), want.coef)


def counts(texts: list[str]) -> torch.Tensor:
    """A text classifier over strings: (c, 2) counts of good and bad words."""
    return torch.tensor([[t.split().count("good"), t.split().count("bad")] for t in texts], dtype=torch.float32)


def test_a_text_modality_takes_a_string_column():
    texts = ["good film", "bad plot and good cast", "good good bad", "dull but good music"]
    step = Explain(lambda: counts, column="text", modality=Words(), call=Call(n_samples=32, target=0))
    got = step({"id": np.arange(4) + 7, "text": np.array(texts, dtype=object)})
    want = torchlime.explain_text(counts, texts, n_samples=32, target=0, index=torch.arange(4) + 7)
    assert torch.equal(torch.from_numpy(got["coef"]), want.coef)


def test_without_an_index_column():
    batch = {k: v[:4] for k, v in rows().items() if k != "id"}
    with pytest.raises(ValueError, match=r"`index_column` must name a column of the batch, got 'id'.*'image'"):
        Explain(make_model, **CALL)(batch)
    got = Explain(make_model, index_column=None, **CALL)(batch)  # opted out: each batch takes 0..b-1
    want = torchlime.explain_image(
        make_model(), torch.from_numpy(batch["image"]), segments=SEGMENTS, n_samples=32, target="top2", generator=5
    )
    assert torch.equal(torch.from_numpy(got["coef"]), want.coef) and set(got) == {"name", *FIELDS[:-1]}


@pytest.mark.parametrize(
    "kwargs,batch_change,error,match",
    [
        (dict(model_fn=make_model()), {}, TypeError, "`model_fn` must be a function returning the model"),
        (dict(column=3), {}, TypeError, "`column` must be a str, got int 3"),
        (dict(explain_fn="image"), {}, TypeError, "unexpected keyword argument 'explain_fn'"),
        (dict(n_samples=32), {}, TypeError, "unexpected keyword argument 'n_samples'"),
        (dict(model_batch_size=8), {}, TypeError, "unexpected keyword argument 'model_batch_size'"),
        (dict(call=Call(generator=-1)), {}, ValueError, "`call.generator` must be an int seed >= 0"),
        (dict(call=Call(index=torch.arange(4))), {}, ValueError, "`call.index` must not be given"),
        (dict(call=Call(target="label")), {}, ValueError, "`target='label'` needs `label_column`"),
        (
            dict(call=Call(target=[1, 2, 0, 1])),
            {},
            ValueError,
            r"`target` for Explain must be the same for every input.*\[\[3, 5\]\]",
        ),
        (dict(keep=("features", 1)), {}, TypeError, r"`keep` must be a tuple of names among \['features', 'inputs'\]"),
        (dict(device="gpu"), {}, ValueError, "`device` must be 'auto' or a device name"),
        (dict(explainer="lime"), {}, TypeError, "`explainer` must be None or a torchlime.Explainer"),
        ({}, {"id": np.arange(4.0)}, TypeError, "`index_column` must hold integers"),
        ({}, {"id": np.arange(4) - 1}, ValueError, "`index_column` must hold indices >= 0, got the minimum -1"),
        ({}, {"id": np.arange(3)}, ValueError, r"`index_column` must hold one index per input, shape \(4,\)"),
        ({}, {"image": np.array(["a", "b", 1, 2.0], dtype=object)}, TypeError, "must hold numbers or strings"),
        ({}, {"score": np.zeros(4)}, ValueError, "the batch already has a column 'score'.*give `prefix=`"),
    ],
)
def test_clear_errors(kwargs, batch_change, error, match):
    batch = {**{k: v[:4] for k, v in rows().items()}, **batch_change}
    kwargs = {"model_fn": make_model, **CALL, **kwargs}
    with pytest.raises(error, match=match):
        Explain(**kwargs)(batch)


def test_prefix_and_ragged_and_non_mapping_batches():
    batch = {**{k: v[:4] for k, v in rows().items()}, "score": np.zeros(4)}
    out = Explain(make_model, prefix="lime_", **CALL)(batch)
    assert {"score", "lime_score", "lime_coef"} <= set(out) and "coef" not in out
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = np.zeros((3, 8, 8), np.float32), np.zeros((3, 8, 6), np.float32)
    with pytest.raises(ValueError, match=r"`column` 'image' must hold inputs of one shape per batch"):
        Explain(make_model, **CALL)({"id": np.arange(2), "image": ragged})
    with pytest.raises(TypeError, match=r"`batch` must be a dict of column -> array .*batch_format='numpy'"):
        Explain(make_model, **CALL)([1, 2])


def test_importing_and_explaining_need_no_ray(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    monkeypatch.setitem(sys.modules, "ray.data", None)
    spec = importlib.util.spec_from_file_location("ray_data_without_ray", ray_data.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # a fresh import of the module, with Ray missing
    out = module.Explain(make_model, **CALL)({k: v[:2] for k, v in rows().items()})
    assert out["coef"].shape == (2, 2, 16)
    with pytest.raises(ImportError, match=r"pip install 'torchlime\[ray\]'"):
        module.explain_ray(object(), make_model)


def test_explain_ray_checks_before_ray_starts():
    pytest.importorskip("ray.data")
    with pytest.raises(TypeError, match="`ds` must be a ray.data.Dataset, got list"):
        explain_ray([1, 2], make_model)


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def read_parquet(folder) -> dict[str, np.ndarray]:
    """A parquet folder written by Ray as arrays (Ray's tensor columns are registered with pyarrow by ray.data)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder)
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        extension = isinstance(column.type, pa.ExtensionType)
        columns[name] = column.combine_chunks().to_numpy() if extension else column.to_numpy()
    return {name: column[np.argsort(columns["id"])] for name, column in columns.items()}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*deprecated:DeprecationWarning")  # Ray's own settings
def test_map_batches_on_ray_equals_explain_dataset(ray_cluster, reference, tmp_path):
    ray = ray_cluster
    data = rows()
    ds = ray.data.from_items([{name: column[i] for name, column in data.items()} for i in range(N)])
    options = dict(column="image", index_column="id", keep=("features",), **CALL)
    folder = tmp_path / "parquet"  # 2 actors, batches of 5: Ray decides which actor explains which rows
    explain_ray(ds, make_model, actors=2, batch_size=5, **options).write_parquet(str(folder))
    back = read_parquet(folder)
    assert_equals_reference(back, reference)
    assert back["name"].tolist() == [f"img{i}" for i in range(N)]
