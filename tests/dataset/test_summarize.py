"""``summarize`` and ``pick`` over a result folder, on a planted truth: a linear model over 6 tabular features
where feature 0 makes class 0 and features 2 (+) and 4 (-) make class 1. The summary ranks them first for
their class with the right signs, its intervals hold the means and equal a slow bootstrap, it is the same on a
rerun and whatever the sharding; superpixels (maps that differ between rows) are refused."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from torch.utils.data import TensorDataset

import torchlime
from torchlime.dataset import Summary, explain_dataset, load_results, pick, summarize
from torchlime.dataset._summarize import _seed, boot_means
from torchlime.methods.sp_lime import submodular_pick

N, F = 24, 6
COLUMNS = ["age", "income", "debt", "tenure", "late", "score"]
TENSORS = ("classes", "mean_abs", "mean", "std", "low", "high", "count", "rows", "dots", "dot_features")


class Planted(torch.nn.Module):
    """Class 0: 3 x0; class 1: 3 x2 - 3 x4 (elementwise products and sums: batch-invariant)."""

    def __init__(self) -> None:
        super().__init__()
        w = torch.zeros(2, F)
        w[0, 0], w[1, 2], w[1, 4] = 3.0, 3.0, -3.0
        self.register_buffer("w", w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.unsqueeze(1) * self.w).sum(-1)


def data() -> TensorDataset:
    x = 0.5 + 0.5 * torch.rand(N, F, generator=torch.Generator().manual_seed(0))
    return TensorDataset(x, torch.arange(N) % 2)


def write(out, target="label", **extra):
    call = dict(modality=torch.arange(F).view(1, F), call=torchlime.Call(n_samples=64, target=target))
    return explain_dataset(Planted(), data(), out, progress=False, **{**call, **extra})


@dataclasses.dataclass(frozen=True)
class PerRowMaps(torchlime.Modality):
    """Feature maps that differ from row to row (as superpixels do): pairs of columns by rank."""

    def prepare(self, model, inputs, how, call):
        return torchlime.Prepared(inputs, inputs.argsort(dim=1) // 2, how, call)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("summarize")
    write(root / "shards", shard_size=5)
    write(root / "one", shard_size=100)
    write(root / "all", shard_size=10, target="all")
    write(root / "nomaps", shard_size=10, keep=())
    write(root / "superpixels", shard_size=10, modality=PerRowMaps())
    return root


@pytest.fixture(scope="module")
def summary(folders) -> Summary:
    return summarize(folders / "shards", names=COLUMNS, n_boot=100)


def assert_same(a: Summary, b: Summary) -> None:
    for name in TENSORS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and torch.equal(x.nan_to_num(-9), y.nan_to_num(-9)), name
    assert a.names == b.names and a.notes == b.notes and a.to_json() == b.to_json()


def test_the_planted_features_rank_first_with_their_signs(summary):
    assert summary.classes.tolist() == [0, 1] and summary.count.tolist() == [12, 12] and summary.n_rows == N
    table = summary.table(k=2)
    assert [(r["class"], r["rank"], r["name"]) for r in table] == [
        (0, 1, "age"),
        (0, 2, table[1]["name"]),
        (1, 1, "debt"),
        (1, 2, "late"),
    ]
    assert table[0]["mean"] > 1 and table[2]["mean"] > 1 and table[3]["mean"] < -1
    assert table[1]["mean_abs"] < 0.1  # the next feature of class 0 is noise
    assert (
        summary.mean_abs[0].argmax() == 0
        and summary.mean_abs[1, [2, 4]].min() > 10 * summary.mean_abs[1, [0, 1, 3, 5]].max()
    )
    assert all(r["count"] == 12 for r in table)


def test_the_intervals_hold_the_means(summary):
    assert bool((summary.low <= summary.mean_abs).all() and (summary.mean_abs <= summary.high).all())
    assert bool((summary.high > summary.low).all())
    assert bool((summary.mean_abs >= summary.mean.abs()).all() and (summary.std >= 0).all())


def test_a_rerun_is_bit_identical_and_another_seed_differs(folders, summary):
    assert_same(summarize(folders / "shards", names=COLUMNS, n_boot=100), summary)
    other = summarize(folders / "shards", names=COLUMNS, n_boot=100, generator=1)
    assert torch.equal(other.mean_abs, summary.mean_abs) and not torch.equal(other.low, summary.low)


def test_streaming_over_shards_equals_one_shard(folders, summary):
    many, one = load_results(folders / "shards"), load_results(folders / "one")
    assert len(many.entries) == 5 and len(one.entries) == 1
    assert torch.equal(many.coef, one.coef)  # explain_dataset: the results do not depend on the sharding
    for other in (summarize(one, names=COLUMNS, n_boot=100), summarize(many.load(), names=COLUMNS, n_boot=100)):
        for name in ("mean_abs", "mean", "std"):
            torch.testing.assert_close(getattr(other, name), getattr(summary, name), rtol=1e-12, atol=1e-14)
        for name in ("low", "high", "count", "rows", "classes", "dots", "dot_features"):
            assert torch.equal(getattr(other, name), getattr(summary, name)), name


def test_the_bootstrap_equals_a_slow_reference():
    g = torch.Generator().manual_seed(3)
    s = torch.rand(9, 4, generator=g, dtype=torch.float64)
    m = torch.randint(1, 3, (9,), generator=g).double()
    idx = torch.randint(0, 9, (50, 9), generator=torch.Generator().manual_seed(11))  # the same index tensor
    slow = torch.stack([s[idx[b]].sum(0) / m[idx[b]].sum() for b in range(50)])
    torch.testing.assert_close(boot_means(s, m, 9, 50, 11), slow, rtol=1e-12, atol=0)


def test_the_bootstrap_is_the_same_in_chunks(monkeypatch):
    s, m = torch.rand(9, 4, dtype=torch.float64), torch.ones(9, dtype=torch.float64)
    whole = boot_means(s, m, 9, 50, 5)
    monkeypatch.setattr("torchlime.dataset._summarize.CHUNK", 27)  # 3 resamples per index tensor
    assert torch.equal(boot_means(s, m, 9, 50, 5), whole)


def test_the_summary_interval_is_the_reference_percentile_interval(folders, summary):
    coef, target = load_results(folders / "shards").coef[:, 0], load_results(folders / "shards").target[:, 0]
    for c in (0, 1):
        s = coef[target == c].double().abs()  # the class's rows, in order: one pair each
        idx = torch.randint(0, 12, (100, 12), generator=torch.Generator().manual_seed(_seed(0, f"class {c}")))
        slow = torch.stack([s[idx[b]].mean(0) for b in range(100)])
        q = torch.quantile(slow, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
        torch.testing.assert_close(summary.low[c], q[0], rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(summary.high[c], q[1], rtol=1e-12, atol=1e-15)


def test_several_targets_per_row_count_for_their_classes(folders):
    s = summarize(folders / "all", n_boot=20)
    assert s.classes.tolist() == [0, 1] and s.count.tolist() == [N, N] and s.rows.tolist() == [N, N]
    assert s.order(2)[0, 0] == 0 and sorted(s.order(2)[1].tolist()) == [2, 4]
    pooled = summarize(folders / "all", n_boot=20, by_class=False)
    assert pooled.classes.tolist() == [-1] and pooled.count.tolist() == [2 * N] and pooled.rows.tolist() == [N]
    assert pooled.table(1)[0]["class"] is None


def test_superpixels_are_refused_with_the_reason_and_the_remedy(folders):
    with pytest.raises(ValueError, match="superpixels of different images are not the same features") as err:
        summarize(folders / "superpixels")
    assert 'segments="grid"' in str(err.value) and "`results`" in str(err.value)
    with pytest.raises(ValueError, match="superpixels"):
        pick(folders / "superpixels", 2)


def test_without_maps_equal_counts_are_taken_with_a_warning(folders, summary):
    with pytest.warns(UserWarning, match="no feature maps"):
        s = summarize(folders / "nomaps", names=COLUMNS, n_boot=100)
    assert any("no feature maps" in n for n in s.notes)
    torch.testing.assert_close(s.mean_abs, summary.mean_abs, rtol=1e-12, atol=1e-14)


def test_a_budget_subsamples_the_bootstrap_rows_and_says_so(folders, summary):
    s = summarize(folders / "shards", names=COLUMNS, n_boot=100, max_floats=10 * F)
    assert s.bootstrap_rows == 10 and s.n_rows == N and "subsample of 10 of the 24 rows" in s.notes[0]
    torch.testing.assert_close(s.mean_abs, summary.mean_abs, rtol=1e-12, atol=1e-14)
    assert s.count.tolist() == [12, 12]


def test_table_json_and_save(summary, tmp_path):
    rows = summary.table(k=3)
    assert len(rows) == 6 and [r["rank"] for r in rows] == [1, 2, 3, 1, 2, 3]
    assert all(a["mean_abs"] >= b["mean_abs"] for a, b in zip(rows, rows[1:]) if a["class"] == b["class"])
    data = json.loads(summary.save(tmp_path / "s.json").read_text())
    assert data["format"] == "torchlime.summary/1" and data["names"] == COLUMNS and data["classes"] == [0, 1]
    assert len(data["mean_abs"]) == 2 and len(data["mean_abs"][0]) == F and data["n_boot"] == 100
    assert math.isclose(data["mean_abs"][1][2], float(summary.mean_abs[1, 2]))


def test_pick_runs_sp_lime_over_the_folder(folders):
    res = load_results(folders / "shards")
    picked = pick(folders / "shards", 3)
    assert picked.tolist() == res.index[submodular_pick(res.coef[:, :, :F], 3)].tolist()
    assert picked.tolist() == pick(res.load(), 3).tolist()
    with pytest.raises(ValueError, match="at most `max_floats` = 10 coefficients"):
        pick(res, 2, max_floats=10)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"names": ["a"]}, ValueError, r"`names` must hold one name per feature \(6\), got 1"),
        ({"names": "abcdef"}, TypeError, "`names` must be a sequence"),
        ({"n_boot": 0}, ValueError, "n_boot"),
        ({"generator": -1}, ValueError, "`generator` must be an int seed >= 0, got -1"),
        ({"generator": 0.5}, TypeError, "`generator` must be an int seed >= 0"),
        ({"by_class": 1}, TypeError, "`by_class` must be a bool"),
    ],
)
def test_bad_arguments_are_named(folders, kwargs, error, message):
    with pytest.raises(error, match=message):
        summarize(folders / "shards", **kwargs)


def test_results_of_another_kind_are_refused():
    with pytest.raises(TypeError, match="`results` must be a result folder"):
        summarize(torch.zeros(3, 6))


def test_the_pictures_are_red_and_blue_by_sign(summary):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from torchlime._util import colours as _colours

    fig = summary.plot_bars(k=2)
    bars = fig.axes[1].patches  # class 1: "late" (blue, below), "debt" (red, on top)
    assert [to_hex(b.get_facecolor()) for b in bars] == [_colours.BLUE_HEX, _colours.RED_HEX]
    assert fig.legends[0].get_title().get_text() == _colours.LEGEND
    plt.close(fig)
    fig = summary.plot_beeswarm(k=2)
    dots = fig.axes[1].collections[0]
    x = dots.get_offsets()[:, 0]
    colours = [to_hex(c) for c in dots.get_facecolors()]
    assert len(x) == 24 and all((c == _colours.RED_HEX) == (v > 0) for c, v in zip(colours, x))
    again = summary.plot_beeswarm(k=2)
    assert (again.axes[1].collections[0].get_offsets() == dots.get_offsets()).all()  # deterministic jitter
    plt.close("all")


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")
def test_images_on_a_grid_are_summarized_and_superpixels_refused(tmp_path):
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 3))
    images = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    call = dict(call=torchlime.Call(n_samples=32), progress=False, shard_size=2)
    explain_dataset(model, images, tmp_path / "grid", modality=torchlime.Images(segments="grid", n_segments=16), **call)
    assert summarize(tmp_path / "grid", n_boot=10).mean_abs.shape[1] == 16
    explain_dataset(model, images, tmp_path / "slic", modality=torchlime.Images(n_segments=8), **call)
    remedy = r'superpixels of different images are not the same features; explain with a fixed grid \(segments="grid"\)'
    with pytest.raises(ValueError, match=remedy):
        summarize(tmp_path / "slic")
