"""lime's other names in the compat layer: discretizers, indexed strings, domain mappers, one classifier call."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from torchlime.compat.lime import (
    DecileDiscretizer,
    EntropyDiscretizer,
    IndexedCharacters,
    IndexedString,
    LimeTabularExplainer,
    LimeTextExplainer,
    QuartileDiscretizer,
    StatsDiscretizer,
    TableDomainMapper,
    TextDomainMapper,
)


def _data(n: int = 200, d: int = 4) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.RandomState(0).randn(n, d)
    return x, (x[:, 0] + x[:, 1] > 0).astype(int)


def _proba(x: np.ndarray) -> np.ndarray:
    p = 1 / (1 + np.exp(-(x[:, 0] + 0.5 * x[:, 1])))
    return np.stack([1 - p, p], 1)


@pytest.mark.parametrize(
    "module, name",
    [
        ("discretize", "QuartileDiscretizer"),
        ("discretize", "DecileDiscretizer"),
        ("discretize", "EntropyDiscretizer"),
        ("lime_text", "IndexedString"),
        ("lime_text", "IndexedCharacters"),
        ("lime_text", "LimeTextExplainer"),
        ("lime_tabular", "LimeTabularExplainer"),
        ("lime_image", "LimeImageExplainer"),
        ("explanation", "Explanation"),
        ("wrappers.scikit_image", "SegmentationAlgorithm"),
        ("submodular_pick", "SubmodularPick"),
    ],
)
def test_lime_module_paths(module: str, name: str) -> None:
    mod = importlib.import_module(f"torchlime.compat.lime.{module}")
    assert getattr(mod, name) is getattr(importlib.import_module("torchlime.compat.lime"), name)


@pytest.mark.parametrize("cls", [QuartileDiscretizer, DecileDiscretizer, EntropyDiscretizer])
def test_discretizer_round_trip_stays_in_bins(cls: type) -> None:
    x, y = _data()
    disc = cls(x, [3], ["a", "b", "c", "d"], y, random_state=1)
    binned = disc.discretize(x)
    assert disc.to_discretize == [0, 1, 2] and 3 not in disc.names
    assert np.array_equal(binned[:, 3], x[:, 3])
    back = disc.undiscretize(binned)
    assert np.array_equal(disc.discretize(back), binned)
    assert all(len(disc.names[f]) == len(disc.means[f]) == len(disc.mins[f]) for f in disc.to_discretize)


def test_entropy_discretizer_needs_labels() -> None:
    x, _ = _data()
    with pytest.raises(ValueError, match="`labels`"):
        EntropyDiscretizer(x, [], ["a", "b", "c", "d"])


@pytest.mark.parametrize("cls", [QuartileDiscretizer, DecileDiscretizer, EntropyDiscretizer])
def test_discretizer_random_state_changes_the_explanation(cls: type) -> None:
    x, y = _data()
    names = ["a", "b", "c", "d"]

    def run(seed: int) -> dict:
        disc = cls(x, [], names, y, random_state=seed)
        explainer = LimeTabularExplainer(x, feature_names=names, discretizer=disc, random_state=10)
        return explainer.explain_instance(x[3], _proba, num_samples=300).as_map()

    assert run(10) == run(10)
    assert run(10) != run(20)


def test_tabular_explanation_has_lime_domain_mapper_and_random_state() -> None:
    x, y = _data()
    explainer = LimeTabularExplainer(x, feature_names=["a", "b", "c", "d"], random_state=3)
    exp = explainer.explain_instance(x[0], _proba, num_features=2, num_samples=300)
    assert isinstance(exp.domain_mapper, TableDomainMapper)
    assert exp.random_state is explainer.random_state
    mapped = exp.domain_mapper.map_exp_ids(exp.as_map()[1])
    assert exp.as_list() == [(n, float(w)) for n, w in mapped]
    assert all(("<" in n or ">" in n) for n, _ in exp.as_list())
    assert exp.domain_mapper.feature_values == [f"{v:.2f}" for v in x[0]]


def test_text_explanation_domain_mapper_positions() -> None:
    text = "good movie, good actors, bad plot"
    explainer = LimeTextExplainer(random_state=0)
    exp = explainer.explain_instance(text, lambda t: np.array([[0.2, 0.8] if "good" in s else [0.6, 0.4] for s in t]))
    assert isinstance(exp.domain_mapper, TextDomainMapper)
    assert exp.random_state is explainer.random_state
    named = dict(exp.as_list(positions=True))
    assert "good_0-12" in named
    assert exp.domain_mapper.indexed_string.raw_string() == text


def test_indexed_string_inverse_removing() -> None:
    s = IndexedString("a b a c")
    assert s.num_words() == 3 and s.word(0) == "a"
    assert s.string_position(0).tolist() == [0, 4]
    assert s.inverse_removing([0]) == " b  c"
    occurrences = IndexedString("a b a c", bow=False)
    assert occurrences.num_words() == 4
    assert occurrences.inverse_removing([2]) == "a b UNKWORDZ c"
    chars = IndexedCharacters("abca", bow=False, mask_string="_")
    assert chars.inverse_removing([0, 3]) == "_bc_"
    with pytest.raises(TypeError, match="`raw_string` must be a str"):
        IndexedString(3)  # type: ignore[arg-type]


def test_tabular_predict_fn_is_called_once() -> None:
    x = np.random.RandomState(0).randn(50, 600)
    calls: list[int] = []

    def fn(rows: np.ndarray) -> np.ndarray:
        calls.append(len(rows))
        return _proba(rows)

    LimeTabularExplainer(x, random_state=0).explain_instance(x[0], fn, num_samples=3000)
    assert calls == [3000]
    for n in (5000, 10000):  # lime's default, and beyond the engine's default largest chunk (4096 rows)
        calls.clear()
        LimeTabularExplainer(x[:, :20], random_state=0).explain_instance(x[0, :20], fn, num_samples=n)
        assert calls == [n]


def test_text_classifier_fn_is_called_once() -> None:
    calls: list[int] = []

    def fn(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return np.array([[0.3, 0.7] if "cat" in t else [0.5, 0.5] for t in texts])

    LimeTextExplainer(random_state=0).explain_instance("the cat sat on the mat " * 200, fn, num_samples=3000)
    assert calls == [3000]
    calls.clear()
    LimeTextExplainer(random_state=0).explain_instance("the cat sat on the mat", fn)  # lime's default: 5000
    assert calls == [5000]


def test_segmentation_algorithm_checks_its_arguments() -> None:
    pytest.importorskip("skimage")
    from torchlime.compat.lime import SegmentationAlgorithm

    with pytest.raises(ValueError, match="`algo_type`"):
        SegmentationAlgorithm("watershed")
    seg = SegmentationAlgorithm("quickshift", kernel_size=2, max_dist=20, ratio=0.5, not_a_parameter=1)
    assert "not_a_parameter" not in seg.target_params
    labels = seg(np.random.RandomState(0).rand(16, 16, 3))
    assert labels.shape == (16, 16) and labels.min() == 0


def test_submodular_pick_picks_what_lime_s_picks() -> None:
    lime_sp = pytest.importorskip("lime.submodular_pick", reason="lime is a test extra")
    from torchlime.compat.lime import SubmodularPick

    rows = np.random.RandomState(0).rand(30, 5)
    w = np.random.RandomState(1).randn(5)

    def model(r: np.ndarray) -> np.ndarray:
        p = 1 / (1 + np.exp(-(r - 0.5) @ w * 3))
        return np.stack([1 - p, p], 1)

    picked = []
    for cls in (lime_sp.SubmodularPick, SubmodularPick):  # lime's own pick over this package's explainer
        np.random.seed(0)  # both draw the sample from NumPy's global generator
        sp = cls(LimeTabularExplainer(rows, random_state=0), rows, model, sample_size=10, num_exps_desired=3,
                 num_features=2, num_samples=300)  # fmt: skip
        picked.append((sp.V, [e.as_map() for e in sp.sp_explanations], len(sp.explanations)))
    assert picked[0] == picked[1] and len(picked[1][0]) == 3
    with pytest.raises(ValueError, match="`method` must be 'sample' or 'full'"):
        SubmodularPick(LimeTabularExplainer(rows), rows, model, method="all")


def test_stats_discretizer_bins_are_the_given_ones_as_lime_s():
    lime_discretize = pytest.importorskip("lime.discretize")
    x, _ = _data(50, 3)
    stats = {
        "bins": {0: [-0.5, 0.5], 2: [0.0]},
        "means": {0: [-1.0, 0.0, 1.0], 2: [-0.5, 0.5]},
        "stds": {0: [0.3] * 3, 2: [0.4] * 2},
        "mins": {0: [-3.0, -0.5, 0.5], 2: [-3.0, 0.0]},
        "maxs": {0: [-0.5, 0.5, 3.0], 2: [0.0, 3.0]},
    }
    ours = StatsDiscretizer(x, [1], ["a", "b", "c"], data_stats=stats)
    theirs = lime_discretize.StatsDiscretizer(x, [1], ["a", "b", "c"], data_stats=stats)
    assert ours.names == theirs.names and ours.means == theirs.means
    np.testing.assert_array_equal(ours.discretize(x), theirs.discretize(x))
    with pytest.raises(ValueError, match="`data_stats` must hold 'bins'"):
        StatsDiscretizer(x, [1], ["a", "b", "c"], data_stats={k: v for k, v in stats.items() if k != "bins"})
