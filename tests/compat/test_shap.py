"""``torchlime.compat.shap.KernelExplainer``: shap's own KernelExplainer scenarios (its
tests/explainers/test_kernel.py), with the installed shap as the oracle where it is there.

Wherever shap enumerates every coalition (2^M - 2 <= nsamples) the two compute the same numbers and must agree
to rounding; where coalitions are drawn, the draws differ, so models additive in the features (exact with any
draws) are compared to rounding and other models by their error against the exact values.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import pytest
import torch

from torchlime.compat.shap import KernelExplainer

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore:X does not have valid feature names")


@pytest.fixture
def shap():
    return pytest.importorskip("shap", reason="shap is a test extra: pip install shap")


def sigm(x):
    return 1 / (1 + np.exp(-x))


def nonlinear(x):
    return np.sin(x[:, 0]) * x[:, 1] + x[:, 2] ** 2 - x[:, 3] * x[:, 4]


def two_outputs(x):
    return np.stack([nonlinear(x), 2 * x[:, 0] - x[:, 2] * x[:, 1]], 1)


def data(n_bg=20, n_x=4, m=5, seed=0):
    rs = np.random.RandomState(seed)
    return rs.normal(size=(n_bg, m)), rs.normal(size=(n_x, m))


# ------------------------------------------------------------------ shap's scenarios, shap as the oracle
@pytest.mark.parametrize("m", [4, 10])
def test_null_model(shap, m):
    """shap's test_null_model(_small): a model that returns zeros explains nothing (M=10 draws coalitions)."""
    ours = KernelExplainer(lambda x: np.zeros(x.shape[0]), np.ones((2, m)), seed=0)
    assert np.sum(np.abs(ours.explain(np.ones((1, m)), nsamples=100))) < 1e-8
    assert ours.expected_value == shap.KernelExplainer(lambda x: np.zeros(x.shape[0]), np.ones((2, m))).expected_value


def test_linear_corollary_1(shap):
    """shap's test_linear: values = coef * (x - mean background) for a linear model, third feature 0."""
    x = np.random.RandomState(0).normal(size=(200, 3))
    f = lambda v: v[:, 0] + 2.0 * v[:, 1]  # noqa: E731
    phi = KernelExplainer(f, x)(x, l1_reg="num_features(2)", silent=True).values
    np.testing.assert_allclose(phi, (x - x.mean(0)) * np.array([1.0, 2.0, 0.0]), rtol=1e-9, atol=1e-12)
    theirs = shap.KernelExplainer(f, x).shap_values(x[:10], l1_reg="num_features(2)", silent=True)
    np.testing.assert_allclose(phi[:10], theirs, atol=1e-10)


@pytest.mark.parametrize("l1_reg", [False, "num_features(10)", "num_features(2)", "aic", "bic", 0.01])
def test_nonlinear_exact_enumeration_equals_shap(shap, l1_reg):
    """M=5: every coalition is evaluated, so shap and torchlime agree to rounding, for every ``l1_reg``."""
    bg, x = data()
    ours = KernelExplainer(nonlinear, bg).shap_values(x, l1_reg=l1_reg, silent=True)
    theirs = shap.KernelExplainer(nonlinear, bg).shap_values(x, l1_reg=l1_reg, silent=True)
    assert ours.shape == theirs.shape == (4, 5) and ours.dtype == theirs.dtype == np.float64
    np.testing.assert_allclose(ours, theirs, atol=1e-10)
    if isinstance(l1_reg, str) and l1_reg.startswith("num_features(2"):
        assert ((ours != 0).sum(1) == 2).all()


def test_multi_output_shapes_and_expected_value(shap):
    bg, x = data()
    ours, theirs = KernelExplainer(two_outputs, bg), shap.KernelExplainer(two_outputs, bg)
    a, b = ours.shap_values(x, silent=True), theirs.shap_values(x, silent=True)
    assert a.shape == b.shape == (4, 5, 2)
    np.testing.assert_allclose(a, b, atol=1e-10)
    assert isinstance(ours.expected_value, np.ndarray) and ours.expected_value.shape == (2,)
    np.testing.assert_allclose(ours.expected_value, theirs.expected_value, atol=1e-12)
    assert ours.explain(x[:1]).shape == theirs.explain(x[:1]).shape == (5, 2)
    # one output as (n, 1): shap keeps the output axis
    col = lambda v: nonlinear(v)[:, None]  # noqa: E731
    assert (
        KernelExplainer(col, bg).shap_values(x, silent=True).shape
        == shap.KernelExplainer(col, bg).shap_values(x, silent=True).shape
        == (4, 5, 1)
    )
    single = KernelExplainer(nonlinear, bg)
    assert isinstance(single.expected_value, float)
    assert single.expected_value == pytest.approx(shap.KernelExplainer(nonlinear, bg).expected_value, abs=1e-12)


@pytest.fixture(scope="module")
def iris_svm():
    sklearn_svm = pytest.importorskip("sklearn.svm")
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split

    iris = load_iris()
    x_train, x_test, y_train, _ = train_test_split(iris.data, iris.target, test_size=0.1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svm = sklearn_svm.SVC(kernel="rbf", probability=True, random_state=0).fit(x_train, y_train)
    return svm, x_train, x_test, iris.feature_names


def test_front_page_model_agnostic_logit(shap, iris_svm):
    """shap's test_front_page_model_agnostic and test_kernel_shap_with_call_method: iris SVM, logit link."""
    svm, x_train, x_test, _ = iris_svm
    ours = KernelExplainer(svm.predict_proba, x_train, link="logit", nsamples=100)
    theirs = shap.KernelExplainer(svm.predict_proba, x_train, link="logit")
    a, b = ours.shap_values(x_test, silent=True), theirs.shap_values(x_test, nsamples=100, silent=True)
    np.testing.assert_allclose(a, b, atol=1e-9)
    np.testing.assert_allclose(ours.expected_value, theirs.expected_value, atol=1e-12)
    np.testing.assert_allclose(sigm(a.sum(1) + ours.expected_value), svm.predict_proba(x_test), rtol=1e-9)


def test_call_returns_an_explanation_shaps_plots_take(shap, iris_svm):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    svm, x_train, x_test, names = iris_svm
    explainer = KernelExplainer(svm.predict_proba, x_train, feature_names=names, link="logit")
    exp = explainer(x_test[:3], silent=True)
    assert isinstance(exp, shap.Explanation)
    assert exp.values.shape == (3, 4, 3) and exp.base_values.shape == (3, 3) and exp.feature_names == names
    np.testing.assert_array_equal(exp.data, x_test[:3])
    shap.plots.waterfall(exp[0, :, 1], show=False)
    shap.plots.bar(exp[:, :, 1], show=False)
    plt.close("all")
    theirs = shap.KernelExplainer(svm.predict_proba, x_train, link="logit")(x_test[0], silent=True)
    mine = explainer(x_test[0], silent=True)  # one row: shap's shapes, (4, 3) values and base values
    assert mine.values.shape == theirs.values.shape and mine.base_values.shape == theirs.base_values.shape
    np.testing.assert_allclose(mine.values, theirs.values, atol=1e-9)


def test_dataframe_background_and_rows(shap):
    """shap's test_kernel_shap_with_dataframe(_explanation): a linear regression on a DataFrame."""
    pd = pytest.importorskip("pandas")
    linear = pytest.importorskip("sklearn.linear_model")
    rs = np.random.RandomState(3)
    df = pd.DataFrame(rs.random((10, 3)), columns=list("abc"))
    y = df.eval("a - 2 * b + 3 * c") + rs.normal(0.0, 0.1, 10)
    model = linear.LinearRegression().fit(df.to_numpy(), y)
    ours = KernelExplainer(model.predict, df)
    exp = ours(df, silent=True)
    assert exp.feature_names == ["a", "b", "c"] and isinstance(exp.data, np.ndarray)
    np.testing.assert_allclose(exp.values, shap.KernelExplainer(model.predict, df)(df, silent=True).values, atol=1e-10)
    np.testing.assert_allclose(exp.values, (df.to_numpy() - df.to_numpy().mean(0)) * model.coef_, atol=1e-10)
    np.testing.assert_allclose(ours.shap_values(df.iloc[0], silent=True), exp.values[0], atol=1e-12)  # a Series


def test_torch_module_on_tensors(shap, device):
    """A torch module gets tensors on its device; shap (numpy only) explains the same net through numpy."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(device)
    bg, x = torch.randn(10, 6), torch.randn(3, 6)
    seen = []
    net.register_forward_pre_hook(lambda mod, args: seen.append(args[0].device))
    ours = KernelExplainer(net, bg).shap_values(x.to(device), silent=True)
    assert {d.type for d in seen} == {torch.device(device).type} and ours.shape == (3, 6, 2)

    def numpy_net(v):
        with torch.no_grad():
            return net(torch.as_tensor(v, dtype=torch.float32, device=device)).double().cpu().numpy()

    theirs = shap.KernelExplainer(numpy_net, bg.numpy()).shap_values(x.numpy(), silent=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_kmeans_summary_weights(shap):
    bg, x = data(n_bg=40)
    summary = shap.kmeans(bg, 5)
    ours = KernelExplainer(nonlinear, summary).shap_values(x, silent=True)
    theirs = shap.KernelExplainer(nonlinear, summary).shap_values(x, silent=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-10)


def test_bool_rows_random_forest(shap):
    """shap's test_explainer_non_number_dtype (bool): M=8, every coalition evaluated."""
    ensemble = pytest.importorskip("sklearn.ensemble")
    rng = np.random.default_rng(45479)
    x = rng.choice([True, False], size=(15, 8))
    rf = ensemble.RandomForestClassifier(n_estimators=10, random_state=0).fit(x, rng.choice([0.0, 1.0], size=15))
    ours = KernelExplainer(rf.predict_proba, x)(x[:5], silent=True).values
    np.testing.assert_allclose(ours, shap.KernelExplainer(rf.predict_proba, x)(x[:5], silent=True).values, atol=1e-10)


def test_features_equal_to_the_background_get_zero(shap):
    """Features equal to every background row are left out, as shap leaves them out (M=1 and M=0 included)."""
    bg = np.array([[1.0, 2.0, 3.0, 4.0]])
    x = np.array([[1.0, 2.0, 0.0, 5.0], [1.0, 9.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])

    def f(v):
        return v[:, 0] * v[:, 2] + v[:, 1] * v[:, 3] ** 2

    a = KernelExplainer(f, bg).shap_values(x, silent=True)
    np.testing.assert_allclose(a, shap.KernelExplainer(f, bg).shap_values(x, silent=True), atol=1e-12)
    assert a[0, :2].tolist() == [0.0, 0.0] and a[1].tolist()[::2] == [0.0, 0.0] and not a[2].any()


# ------------------------------------------------------------------ drawn coalitions
def test_drawn_coalitions_additive_model_is_exact(shap):
    """M=12 at nsamples=300: coalitions are drawn, and an additive model's values are still exact."""
    rs = np.random.RandomState(1)
    coef, bg, x = rs.normal(size=12), rs.normal(size=(8, 12)), rs.normal(size=(3, 12))
    f = lambda v: v @ coef  # noqa: E731
    ours = KernelExplainer(f, bg, seed=0).shap_values(x, nsamples=300, l1_reg=False, silent=True)
    np.testing.assert_allclose(ours, (x - bg.mean(0)) * coef, atol=1e-10)
    again = KernelExplainer(f, bg, seed=0).shap_values(x, nsamples=300.0, l1_reg=False, silent=True)  # as shap takes it
    assert np.array_equal(again, ours)
    theirs = shap.KernelExplainer(f, bg).shap_values(x, nsamples=300, l1_reg=False, silent=True)
    np.testing.assert_allclose(ours, theirs, atol=1e-10)


def test_drawn_coalitions_error_like_shaps(shap):
    """A nonlinear model at M=10, nsamples=300: the error against the exact values is shap's size."""
    bg, x = data(n_bg=8, n_x=3, m=10, seed=2)
    f = lambda v: np.tanh(v @ np.linspace(-1, 1, 10)) + v[:, 0] * v[:, 1]  # noqa: E731
    exact = shap.KernelExplainer(f, bg).shap_values(x, nsamples=2**10 - 2, l1_reg=False, silent=True)
    np.testing.assert_allclose(KernelExplainer(f, bg).shap_values(x, nsamples=2000, silent=True, l1_reg=False), exact)
    ours = KernelExplainer(f, bg, seed=0).shap_values(x, nsamples=300, l1_reg=False, silent=True)
    np.random.seed(0)
    theirs = shap.KernelExplainer(f, bg).shap_values(x, nsamples=300, l1_reg=False, silent=True)
    err, shap_err = np.abs(ours - exact).mean(), np.abs(theirs - exact).mean()
    assert 0 < err < 3 * shap_err + 1e-3


@pytest.mark.parametrize("link", ["identity", "logit"])
def test_efficiency_constraint(link):
    bg, x = data(m=12)
    f = lambda v: sigm(nonlinear(v))  # noqa: E731
    ours = KernelExplainer(f, bg, link=link, seed=3)
    phi = ours.shap_values(x, nsamples=200, silent=True)
    linked = np.log(f(x) / (1 - f(x))) if link == "logit" else f(x)
    np.testing.assert_allclose(phi.sum(1) + ours.expected_value, linked, atol=1e-10)


def test_seeds():
    bg, x = data(m=8)
    run = lambda **kw: KernelExplainer(nonlinear, bg, **kw).shap_values(x, nsamples=100, silent=True)  # noqa: E731
    five = run(seed=5)
    np.testing.assert_array_equal(five, run(random_state=5))
    assert not np.array_equal(five, run(seed=6))
    np.random.seed(7)
    first = run()
    np.random.seed(7)
    np.testing.assert_array_equal(first, run())  # numpy's global generator, as shap


def test_chunks_do_not_change_the_values_and_inputs_stay():
    bg, x = data(m=8)
    bg0, x0 = bg.copy(), x.copy()
    whole = KernelExplainer(two_outputs, bg, seed=1).shap_values(x, nsamples=120, silent=True)
    rows = KernelExplainer(two_outputs, bg, seed=1, batch_size=16).shap_values(x, nsamples=120, silent=True)
    np.testing.assert_allclose(whole, rows, atol=1e-12)
    np.testing.assert_array_equal(bg, bg0)
    np.testing.assert_array_equal(x, x0)


# ------------------------------------------------------------------ without shap, and bad inputs
def test_works_without_shap(monkeypatch):
    monkeypatch.setitem(sys.modules, "shap", None)  # `import shap` now raises ImportError
    module = importlib.reload(importlib.import_module("torchlime.compat.shap"))
    bg, x = data()
    explainer = module.KernelExplainer(nonlinear, bg)
    assert explainer.shap_values(x, silent=True).shape == (4, 5)
    with pytest.raises(ImportError, match="pip install shap"):
        explainer(x)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda e, x: e.shap_values(x[:, :4]), ValueError, "`X` must be"),
        (lambda e, x: e.shap_values(x, l1_reg="rank(3)"), ValueError, "`l1_reg`"),
        (lambda e, x: e.shap_values(x, l1_reg="num_features(0)"), ValueError, "`l1_reg`"),
        (lambda e, x: e.shap_values(x, nsamples=0), ValueError, "`nsamples`"),
        (lambda e, x: e.shap_values(x, nsamples="many"), ValueError, "`nsamples`"),
        (lambda e, x: e.shap_values(x, seed="a"), TypeError, "`seed`"),
        (lambda e, x: e.shap_values(np.array([["a"] * 5])), TypeError, "`X`"),
    ],
)
def test_bad_call_arguments(call, error, words):
    bg, x = data()
    with pytest.raises(error, match=words):
        call(KernelExplainer(nonlinear, bg), x)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(link="probit"), ValueError, "`link`"),
        (dict(link=3), TypeError, "`link`"),
        (dict(model=3), TypeError, "`model`"),
        (dict(data=np.zeros(5)), ValueError, "`data`"),
        (dict(data="rows"), TypeError, "`data`"),
        (dict(colour="red"), TypeError, "colour"),
        (dict(batch_size=0), ValueError, "`batch_size`"),
        (
            dict(model=lambda v: np.zeros((v.shape[0], 2)) if v.shape[0] == 20 else np.zeros(v.shape[0])),
            ValueError,
            "`model`",
        ),
    ],
)
def test_bad_constructor_arguments(kwargs, error, words):
    bg, x = data()
    args = dict(model=nonlinear, data=bg) | kwargs
    with pytest.raises(error, match=words):
        explainer = KernelExplainer(args.pop("model"), args.pop("data"), **args)
        explainer.shap_values(x, silent=True)  # the last case: an output width that changes after the background
