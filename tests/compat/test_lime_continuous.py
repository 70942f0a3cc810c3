"""``LimeTabularExplainer(discretize_continuous=False)``: lime's undiscretised explanation, on torchlime.

lime samples every continuous column as ``N(0, 1) · scale + mean`` (or ``+ the row's value`` with
``sample_around_instance``), categorical columns by training frequency, calls ``predict_fn`` once on
all rows, weighs them by the euclidean distance of the scaled rows, and fits its surrogate on the
scaled values ``(x - mean) / scale`` (categorical: "same value as the row"). These tests hold the
layer to lime itself, to the truth of linear models, and to its own reproducibility and errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn", reason="scikit-learn is a test extra: pip install -e '.[test]'")
pytest.importorskip("lime", reason="lime is a test extra: pip install -e '.[test]'")

import inspect  # noqa: E402

import lime.lime_tabular  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from torchlime.compat.lime import LimeTabularExplainer  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")
RNG = np.random.RandomState(0)
TRAIN = RNG.randn(400, 3) * [1.0, 2.0, 0.5] + [3.0, -1.0, 10.0]
SLOPE = np.array([1.0, 0.5, -2.0])


def linear(rows):
    return rows @ SLOPE


def both(train, **kw):
    """lime's explainer and the layer's, with the same arguments."""
    kw = dict(dict(discretize_continuous=False, random_state=1), **kw)
    return lime.lime_tabular.LimeTabularExplainer(train, **kw), LimeTabularExplainer(train, **kw)


def weights(exp, label=1):
    return dict(exp.as_map()[label])


class Rows:
    """A function that records the rows it is called with and returns ``fn`` of them."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, rows):
        self.calls.append(np.array(rows, copy=True))
        return self.fn(rows)


def test_linear_model_weights_are_the_scaled_coefficients_as_lime_finds_them():
    """On f(x) = a·x the surrogate's weight of column f is a_f · std_f (lime fits on scaled rows)."""
    truth = SLOPE * TRAIN.std(0)
    theirs, ours = both(TRAIN, mode="regression", feature_names=["a", "b", "c"])
    row = TRAIN[0]
    got = ours.explain_instance(row, linear, num_features=3, num_samples=5000)
    want = theirs.explain_instance(row, linear, num_features=3, num_samples=5000)
    mine, lime_w = weights(got), weights(want)
    np.testing.assert_allclose([mine[f] for f in range(3)], truth, rtol=0.01)
    np.testing.assert_allclose([mine[f] for f in range(3)], [lime_w[f] for f in range(3)], rtol=0.01)
    assert got.score > 0.999 and want.score > 0.999
    assert got.local_pred[0] == pytest.approx(linear(row), rel=1e-3)  # the fit at the scaled row
    assert got.intercept[1] == pytest.approx(linear(TRAIN.mean(0)), rel=1e-3)  # at scaled 0: the mean
    assert sorted(n for n, _ in got.as_list()) == ["a", "b", "c"]  # plain names, as lime's
    assert got.as_list() == sorted(got.as_list(), key=lambda nw: -abs(nw[1]))
    assert got.predicted_value == pytest.approx(linear(row)) and got.min_value < got.max_value


def test_predict_fn_gets_all_rows_at_once_and_row_zero_is_the_instance():
    fn = Rows(linear)
    exp = LimeTabularExplainer(TRAIN, mode="regression", discretize_continuous=False, random_state=0)
    exp.explain_instance(TRAIN[5], fn, num_samples=3000)
    assert len(fn.calls) == 1 and fn.calls[0].shape == (3000, 3) and fn.calls[0].dtype == np.float64
    rows = fn.calls[0]
    np.testing.assert_array_equal(rows[0], TRAIN[5])
    np.testing.assert_allclose(rows[1:].mean(0), TRAIN.mean(0), atol=4 * TRAIN.std(0).max() / np.sqrt(3000))
    np.testing.assert_allclose(rows[1:].std(0), TRAIN.std(0), rtol=0.05)
    chunked = Rows(linear)  # torchlime's batch_size: the same rows, in several calls
    again = LimeTabularExplainer(TRAIN, mode="regression", discretize_continuous=False, random_state=0)
    again.explain_instance(TRAIN[5], chunked, num_samples=3000, batch_size=1000)
    assert [len(c) for c in chunked.calls] == [1000, 1000, 1000]
    np.testing.assert_array_equal(np.concatenate(chunked.calls), rows)


def test_sample_around_instance_centres_the_samples_on_the_row_as_lime():
    """Around the row: the rows centre on it, and a curved model's local slope changes, as lime's does."""
    row = TRAIN[0] + [2.0, 0.0, 0.0]  # column 0 two std above its mean

    def curved(rows):
        return rows[:, 0] ** 2 + rows[:, 1]

    found = {}
    for around in (False, True):
        fn = Rows(curved)
        theirs, ours = both(TRAIN, mode="regression", sample_around_instance=around)
        got = weights(ours.explain_instance(row, fn, num_features=3, num_samples=5000))
        want = weights(theirs.explain_instance(row, curved, num_features=3, num_samples=5000))
        centre = row if around else TRAIN.mean(0)
        np.testing.assert_allclose(fn.calls[0][1:].mean(0), centre, atol=0.1)
        assert got[0] == pytest.approx(want[0], rel=0.05)
        assert got[1] == pytest.approx(want[1], rel=0.1) and got[1] == pytest.approx(TRAIN[:, 1].std(), rel=0.1)
        found[around] = got[0]
    assert found[True] == pytest.approx(2 * row[0] * TRAIN[:, 0].std(), rel=0.05)  # d/dx0 x0² · std at the row
    assert abs(found[True] - found[False]) > 0.5
    info = ours.explain_instance(row, curved, num_samples=200).result.info
    assert info.sampling == "gaussian_instance"


def test_categorical_columns_are_drawn_by_frequency_and_read_as_same_value():
    rng = np.random.RandomState(2)
    train = np.c_[rng.randn(600, 2), rng.choice([0.0, 1.0, 2.0], 600, p=[0.5, 0.3, 0.2])]

    def proba(rows):
        z = rows[:, 0] - rows[:, 1] + 1.5 * (rows[:, 2] == 1) - (rows[:, 2] == 2)
        p = 1 / (1 + np.exp(-z))
        return np.c_[1 - p, p]

    kw = dict(categorical_features=[2], categorical_names={2: ["red", "green", "blue"]}, feature_names=["x", "y", "c"])
    theirs, ours = both(train, **kw)
    fn = Rows(proba)
    row = np.array([0.2, -0.1, 1.0])
    got = ours.explain_instance(row, fn, num_features=3, num_samples=5000)
    want = theirs.explain_instance(row, proba, num_features=3, num_samples=5000)
    drawn = fn.calls[0][1:, 2]
    freq = [np.mean(train[:, 2] == v) for v in (0, 1, 2)]
    np.testing.assert_allclose([np.mean(drawn == v) for v in (0, 1, 2)], freq, atol=0.03)
    assert dict(got.as_list()).keys() == dict(want.as_list()).keys() == {"x", "y", "c=green"}
    assert dict(got.as_list())["c=green"] > 0
    np.testing.assert_allclose(
        [weights(got)[f] for f in range(3)], [weights(want)[f] for f in range(3)], rtol=0.15, atol=0.01
    )
    assert got.score == pytest.approx(want.score, abs=0.03)


def test_same_seed_same_bits_other_seed_other_bits():
    def run(seed, **kw):
        ex = LimeTabularExplainer(TRAIN, mode="regression", discretize_continuous=False, random_state=seed, **kw)
        e = ex.explain_instance(TRAIN[3], lambda r: np.tanh(linear(r) / 5), num_features=2, num_samples=500)
        return e.as_map(), e.score, e.intercept, float(e.local_pred[0])

    assert run(7) == run(7)
    assert run(7, sample_around_instance=True) == run(7, sample_around_instance=True)
    assert run(7)[0] != run(8)[0]
    ex = LimeTabularExplainer(TRAIN, mode="regression", discretize_continuous=False)  # numpy's global seed
    np.random.seed(3)
    first = ex.explain_instance(TRAIN[3], linear, num_samples=300).as_map()
    np.random.seed(3)
    assert ex.explain_instance(TRAIN[3], linear, num_samples=300).as_map() == first


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    keep = (y == 3) | (y == 8)
    x, y = x[keep].astype(float), (y[keep] == 8).astype(int)
    # scikit-learn >= 1.8 spells the L1 penalty l1_ratio=1 (``penalty`` is deprecated there)
    l1 = dict(l1_ratio=1.0) if "deprecated" in str(inspect.signature(LogisticRegression)) else dict(penalty="l1")
    clf = LogisticRegression(solver="liblinear", C=0.0063, **l1).fit(x, y)
    return x, clf, set(np.flatnonzero(clf.coef_[0]).tolist())


def test_digits_l1_model_r2_and_recall_as_lime(digits):
    """The LIME paper's faithfulness check on a few digits: recall of the model's pixels and R² as lime's."""
    x, clf, used = digits
    assert 5 <= len(used) <= 10
    theirs, ours = both(x[40:])
    scores: dict = {"lime": [], "ours": []}
    recall: dict = {"lime": [], "ours": []}
    for row in x[:4]:
        for name, ex in (("lime", theirs), ("ours", ours)):
            exp = ex.explain_instance(row, clf.predict_proba, num_features=10, num_samples=2000)
            scores[name].append(exp.score)
            recall[name].append(len(used & set(weights(exp))) / len(used))
            assert len(exp.as_map()[1]) == 10
    assert np.mean(scores["ours"]) > 0.9
    assert np.mean(scores["ours"]) == pytest.approx(np.mean(scores["lime"]), abs=0.03)
    assert np.mean(recall["ours"]) == pytest.approx(np.mean(recall["lime"]), abs=0.12)


@pytest.mark.parametrize("selection", ["lasso_path", "forward_selection", "highest_weights", "none"])
def test_feature_selections_list_what_they_chose(digits, selection):
    x, clf, used = digits
    ex = LimeTabularExplainer(x[40:], discretize_continuous=False, feature_selection=selection, random_state=0)
    exp = ex.explain_instance(x[0], clf.predict_proba, num_features=5, num_samples=1000)
    listed = exp.as_map()[1]
    if selection == "none":
        assert sorted(f for f, _ in listed) == list(range(64))
    elif selection == "lasso_path":  # the last point of the path with at most K columns: K or fewer
        assert 1 <= len(listed) <= 5 and all(w != 0 for _, w in listed)
    else:
        assert len(listed) == 5 and all(w != 0 for _, w in listed)
    assert len(used & {f for f, _ in listed[:5]}) >= 3  # the model's strongest pixels


def test_top_labels_and_regression_labels_as_lime():
    y = (TRAIN[:, 0] > 3).astype(int) + (TRAIN[:, 1] > 0)
    clf = LogisticRegression().fit(TRAIN, y)
    theirs, ours = both(TRAIN)
    got = ours.explain_instance(TRAIN[1], clf.predict_proba, top_labels=2, num_samples=2000)
    want = theirs.explain_instance(TRAIN[1], clf.predict_proba, top_labels=2, num_samples=2000)
    assert got.top_labels == [int(v) for v in want.top_labels] == got.available_labels()
    assert got.score == pytest.approx(want.score, abs=0.03)  # lime's score: the top label's fit
    reg = LimeTabularExplainer(TRAIN, mode="regression", discretize_continuous=False, random_state=0)
    exp = reg.explain_instance(TRAIN[1], linear, num_features=2, num_samples=500)
    assert exp.local_exp[0] == [(f, -w) for f, w in exp.local_exp[1]] and len(exp.local_exp[1]) == 2


def test_sparse_training_data_as_lime():
    """lime's sparse rows: only the row's non-zero columns vary; the weights as lime's."""
    rng = np.random.RandomState(0)
    x = np.abs(rng.randn(300, 5)) * (rng.rand(300, 5) < 0.5)
    slope = np.array([2.0, -1.0, 0.5, 0.0, 1.0])

    def fn(rows):
        return np.asarray(rows @ slope).ravel()

    rows = Rows(fn)
    theirs, ours = both(sp.csr_matrix(x), mode="regression")
    i = int(np.flatnonzero((x != 0).sum(1) == 2)[0])
    got = ours.explain_instance(sp.csr_matrix(x[i]), rows, num_features=5, num_samples=2000)
    want = theirs.explain_instance(sp.csr_matrix(x[i]), fn, num_features=5, num_samples=2000)
    assert np.all(rows.calls[0][:, x[i] == 0] == 0)
    np.testing.assert_allclose(
        [weights(got)[f] for f in range(5)], [weights(want)[f] for f in range(5)], rtol=0.02, atol=1e-6
    )


BAD = [
    (dict(distance_metric="cosine"), ValueError, r"`distance_metric` must be 'euclidean'"),
    (dict(sampling_method="lhs"), ValueError, r"`sampling_method` must be 'gaussian'"),
    (dict(num_samples=1), ValueError, r"`num_samples`"),
    (dict(num_features=0), ValueError, r"`num_features`"),
    (dict(labels=(5,)), ValueError, r"`labels` must be in \[0, 2\)"),
    (dict(labels=("a",)), TypeError, r"`labels` must be ints"),
    (dict(top_labels=-1), ValueError, r"`top_labels` must be >= 0"),
    (dict(batch_size=0), ValueError, r"`batch_size`"),
    (dict(progress="yes"), TypeError, r"`progress` must be True or False, got str"),
    (dict(n_samples=10), TypeError, r"explain_instance\(\) takes lime's arguments .*\['n_samples'\]"),
    (dict(model_regressor=object()), TypeError, r"`model_regressor` object has no batched equivalent"),
    (dict(data_row=np.ones(4)), ValueError, r"`data_row` must have 3 values"),
    (dict(data_row=np.array([1.0, np.nan, 0.0])), ValueError, r"`data_row` must be finite"),
]


@pytest.mark.parametrize("kw,error,match", BAD, ids=[next(iter(k)) + str(i) for i, (k, _, _) in enumerate(BAD)])
def test_bad_arguments_raise_clear_errors_before_predict_fn(kw, error, match):
    calls = []

    def proba(rows):
        calls.append(len(rows))
        return np.tile([0.3, 0.7], (len(rows), 1))

    ex = LimeTabularExplainer(TRAIN, discretize_continuous=False, random_state=0)
    args = dict(dict(data_row=TRAIN[0], predict_fn=proba, num_samples=50), **kw)
    with pytest.raises(error, match=match):
        ex.explain_instance(**args)
    assert calls == ([50] if kw.get("labels") == (5,) else [])  # the classes are known from the first output


def test_bad_predict_fn_outputs_name_predict_fn():
    ex = LimeTabularExplainer(TRAIN, discretize_continuous=False, random_state=0)
    with pytest.raises(ValueError, match=r"`predict_fn` must return \(c, K\) class probabilities"):
        ex.explain_instance(TRAIN[0], lambda r: np.ones(len(r)), num_samples=20)
    with pytest.raises(ValueError, match=r"`predict_fn` returned NaN/inf"):
        ex.explain_instance(TRAIN[0], lambda r: np.full((len(r), 2), np.nan), num_samples=20)
    with pytest.raises(ValueError, match=r"`feature_selection` must be one of"):
        LimeTabularExplainer(TRAIN, discretize_continuous=False, feature_selection="best")


def test_explanation_underneath_is_a_torchlime_explanation():
    exp = LimeTabularExplainer(TRAIN, discretize_continuous=False, random_state=0, feature_names=["a", "b", "c"])
    got = exp.explain_instance(TRAIN[0], lambda r: np.c_[1 - np.tanh(r[:, :1]) ** 2, np.tanh(r[:, :1]) ** 2])
    result = got.result
    assert result.coef.shape == (1, 1, 3) and result.target.tolist() == [[1]]
    assert result.run is None and result.info.sampling == result.meta["tabular"]["sampling"] == "gaussian"
    assert torch.equal(
        result.coef[0, 0, [f for f, _ in got.as_map()[1]]].double(),
        torch.tensor([w for _, w in got.as_map()[1]], dtype=torch.float64),
    )
    assert result.info.feature_labels(0) == ["a", "b", "c"]


@pytest.mark.parametrize("around", [False, True])
def test_design_read_off_the_normals_is_the_scaled_rows(around):
    """The surrogate's data, taken from the draws' normals, equals lime's ``(x - mean) / scale`` of the rows."""
    from torchlime.compat.lime._continuous import gaussian_design, lime_design
    from torchlime.tabular import fit_stats
    from torchlime.tabular.stats import gaussian_draws

    train = np.c_[TRAIN, RNG.choice([0.0, 1.0], len(TRAIN))]
    stats = fit_stats(torch.from_numpy(train), categorical_features=[3])
    values, z = gaussian_draws(stats, torch.from_numpy(train[:2]), 300, 5, around_instance=around)
    want = lime_design(stats, values)
    assert set(want[..., 3].unique().tolist()) <= {0.0, 1.0} and bool((want[:, 0, 3] == 1).all())
    torch.testing.assert_close(gaussian_design(stats, values, z, around).double(), want, rtol=1e-5, atol=1e-5)
