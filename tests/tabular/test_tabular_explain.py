"""``explain_tabular``: shapes, determinism, batching, both sampling modes, categorical columns,
readable conditions, the recorded perturbation, and the front door's house rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.tabular import conditions, explain_tabular, fit_stats

from tests.helpers.tabular import SklearnModel, breast_cancer, lime_explain, logistic, one_thread


@pytest.fixture(autouse=True)
def _threads():
    with one_thread():
        yield


def planted(n: int = 600, d: int = 6, seed: int = 0):
    """Training rows and a model that reads columns 1 and 4 only (logistic in them)."""
    g = torch.Generator().manual_seed(seed)
    train = torch.randn(n, d, generator=g, dtype=torch.float64)

    def model(x: torch.Tensor) -> torch.Tensor:
        logit = 3.0 * x[:, 1] - 2.0 * x[:, 4]
        return torch.stack((-logit, logit), 1).softmax(1)

    return train, model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shapes_meta_and_planted_columns(device, dtype):
    train, model = planted()
    x = train[:8].to(device, dtype)
    exp = explain_tabular(
        model,
        x,
        training_data=train.to(device),
        n_samples=800,
        target="all",
        feature_names=list("abcdef"),
        batch_size=1024,
    )
    assert exp.coef.shape == (8, 2, 6) and exp.coef.device.type == device.type
    top2 = exp.top_features(2, by="abs")[0][:, 0].sort(1).values.cpu()
    assert (top2 == torch.tensor([1, 4])).all()
    torch.testing.assert_close(exp.coef[:, 0], -exp.coef[:, 1], atol=1e-5, rtol=1e-4)  # p0 = 1 - p1
    tab = exp.meta["tabular"]
    assert tab["sampling"] == "discretized" and tab["kernel_width"] == pytest.approx(0.75 * 6**0.5)
    assert len(tab["levels"]) == 8 and tab["feature_names"] == list("abcdef")


def test_lime_preset_defaults():
    train, model = planted()
    exp = explain_tabular(model, train[:2], training_data=train, preset="lime", batch_size=2500)
    assert exp.run.n_samples == 5000 and exp.run.surrogate.startswith("Ridge(alpha=1.0")
    assert exp.target[:, 0].tolist() == model(train[:2]).argmax(1).tolist()  # the top class


def test_deterministic_per_seed_and_input_index_not_chunk_or_batch():
    train, model = planted()
    x = train[:5]
    a = explain_tabular(model, x, training_data=train, n_samples=600, generator=3, batch_size=97)
    b = explain_tabular(model, x, training_data=train, n_samples=600, generator=3, batch_size=1000)
    torch.testing.assert_close(a.coef, b.coef, atol=1e-6, rtol=1e-5)
    c = explain_tabular(model, x, training_data=train, n_samples=600, generator=4)
    assert not torch.allclose(a.coef, c.coef)
    # input 3 alone, with its index in the batch, gets the same samples and the same explanation
    alone = explain_tabular(model, x[3:4], training_data=train, n_samples=600, generator=3, index=torch.tensor([3]))
    torch.testing.assert_close(alone.coef[0], a.coef[3], atol=1e-6, rtol=1e-5)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    torch.testing.assert_close(
        explain_tabular(model, x, training_data=train, n_samples=300, generator=g1).coef,
        explain_tabular(model, x, training_data=train, n_samples=300, generator=g2).coef,
    )


@pytest.mark.parametrize("mode", ["discretized", "gaussian", "gaussian_instance"])
def test_samples_agree_with_masks_and_the_recorded_perturbation(mode):
    train, model = planted()
    train = torch.cat((train, torch.randint(0, 3, (train.shape[0], 1), dtype=torch.float64)), 1)
    stats = fit_stats(train, categorical_features=[6])
    x = train[:4]
    exp = explain_tabular(
        lambda r: model(r[:, :6]),
        x,
        training_data=stats,
        n_samples=400,
        return_samples=True,
        discretize_continuous=mode == "discretized",
        sample_around_instance=mode == "gaussian_instance",
    )
    assert exp.meta["tabular"]["sampling"] == mode
    rows = exp.perturbation.rows(exp.samples).view(4, 400, 7)
    assert torch.equal(rows[:, 0], x)  # sample 0: the input itself
    assert torch.equal(stats.levels(rows) == stats.levels(x).unsqueeze(1), exp.samples)
    assert set(rows[..., 6].unique().tolist()) <= {0.0, 1.0, 2.0}  # categories from the training set
    torch.testing.assert_close(
        model(rows.view(-1, 7)[:, :6]).view(4, 400, 2).gather(2, exp.target.view(4, 1, 1).expand(4, 400, 1)).squeeze(2),
        exp.outputs[..., 0].double(),
        atol=1e-6,
        rtol=1e-5,
    )
    if mode == "gaussian_instance":  # centred on the instance: the sample mean is near x
        assert (rows[:, 1:, :6].mean(1) - x[:, :6]).abs().max() < 0.15
    if mode == "gaussian":  # centred on the training mean
        assert (rows[:, 1:, :6].mean(1) - train[:, :6].mean(0)).abs().max() < 0.15


def test_values_stay_in_the_training_bins_range():
    train, model = planted()
    exp = explain_tabular(model, train[:3] * 10, training_data=train, n_samples=300, return_samples=True)
    rows = exp.perturbation.rows(exp.samples).view(3, 300, 6)[:, 1:]
    assert (rows >= train.min(0).values).all() and (rows <= train.max(0).values).all()


def test_conditions_read_like_limes():
    lime_tabular = pytest.importorskip("lime.lime_tabular")
    datasets = pytest.importorskip("sklearn.datasets")
    iris = datasets.load_iris()
    x, y = iris.data, iris.target
    clf = logistic(x, y)
    names = list(iris.feature_names)
    explainer = lime_tabular.LimeTabularExplainer(x, feature_names=names, random_state=0)
    ref = explainer.explain_instance(x[60], clf.predict_proba, labels=(1,), num_features=4, num_samples=500)
    exp = explain_tabular(
        SklearnModel(clf), torch.from_numpy(x[60:61]), training_data=x, feature_names=names, target=1, n_samples=500
    )
    ours = conditions(exp)[0]
    assert {c for c, _ in ours} == {c for c, _ in ref.as_list(label=1)}
    weights = [abs(w) for _, w in ours]
    assert weights == sorted(weights, reverse=True)
    assert conditions(exp, k=2)[0] == ours[:2]
    assert any(" < petal length (cm) <= " in c or "petal length (cm) " in c for c, _ in ours)


def test_categorical_conditions_and_names():
    train = torch.tensor([[0.0, 1.0], [1.0, 2.0], [2.0, 1.0], [3.0, 0.0], [4.0, 2.0]] * 20, dtype=torch.float64)
    model = lambda r: torch.stack((r[:, 1] == 1, r[:, 1] != 1), 1).double()  # noqa: E731
    exp = explain_tabular(
        model, train[:2], training_data=train, categorical_features=[1], n_samples=300, feature_names=["size", "color"]
    )
    named = conditions(exp, categorical_names={1: ["green", "red", "blue"]})
    assert named[0][0][0] == "color=red" and named[1][0][0] == "color=blue"
    assert conditions(exp)[0][0][0] == "color=1"


def test_lime_captured_samples_helper_roundtrip():
    """The lime helper leaves lime's explainer working (its private method is restored)."""
    lime_tabular = pytest.importorskip("lime.lime_tabular")
    x_tr, y_tr, x_te = breast_cancer()
    clf = logistic(x_tr, y_tr)
    explainer = lime_tabular.LimeTabularExplainer(x_tr, random_state=0)
    *_, binary, inverse = lime_explain(explainer, x_te[:1], clf.predict_proba, 50)
    assert binary.shape == inverse.shape == (1, 50, 30) and (binary[:, 0] == 1).all()
    assert np.array_equal(inverse[0, 0], x_te[0])
    explainer.explain_instance(x_te[0], clf.predict_proba, num_samples=20)
