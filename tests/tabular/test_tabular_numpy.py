"""numpy at the tabular door: ``explain_tabular(rf.predict_proba, X_numpy, ...)`` as lime takes it.

A numpy ``X`` becomes a float32 tensor; a model that is not an ``nn.Module`` is then called with
numpy rows and may return numpy (``explain_text``'s rule for outputs); the explanation is torch.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.tabular import explain_tabular

pytest.importorskip("sklearn")
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")

PLANTED = 3  # the only column the label depends on


def planted(n: int = 600, d: int = 6, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, d) float64, y (n,)): the label is column PLANTED's sign, the other columns noise."""
    x = np.random.RandomState(seed).randn(n, d)
    return x, (x[:, PLANTED] > 0).astype(int)


@pytest.mark.parametrize("make", [lambda: RandomForestClassifier(30, random_state=0), LogisticRegression])
def test_sklearn_predict_proba_on_numpy_rows(make):
    x, y = planted()
    clf = make().fit(x, y)
    seen = []

    def predict_proba(rows):
        seen.append(type(rows))
        return clf.predict_proba(rows)

    rows = x[:6].copy()
    exp = explain_tabular(predict_proba, rows, training_data=x, n_samples=800, generator=0)
    assert np.array_equal(rows, x[:6])  # the caller's array untouched
    assert set(seen) == {np.ndarray}  # the model got numpy, as lime's classifier_fn does
    assert isinstance(exp.coef, torch.Tensor) and exp.coef.dtype == torch.float32 and exp.coef.shape == (6, 1, 6)
    assert exp.coef[:, 0].abs().argmax(1).tolist() == [PLANTED] * 6  # the planted column ranks first
    assert exp.target[:, 0].tolist() == clf.predict(x[:6]).tolist()  # the top class of each row
    again = explain_tabular(clf.predict_proba, rows, training_data=x, n_samples=800, generator=0)
    assert torch.equal(again.coef, exp.coef)  # predict_proba taken as it is


def test_numpy_x_equals_its_float32_tensor():
    x, y = planted(200)
    clf = LogisticRegression().fit(x, y)
    from_numpy = explain_tabular(clf.predict_proba, x[:3], training_data=x, n_samples=300, generator=1)
    as_tensor = explain_tabular(
        lambda t: torch.from_numpy(clf.predict_proba(t.numpy())),
        torch.tensor(x[:3], dtype=torch.float32),
        training_data=x,
        n_samples=300,
        generator=1,
    )
    assert torch.allclose(from_numpy.coef, as_tensor.coef) and torch.equal(from_numpy.target, as_tensor.target)


def test_a_torch_module_gets_tensors_from_numpy_x():
    x, _ = planted(100, 4)
    net = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Softmax(1))
    seen = []
    net.register_forward_pre_hook(lambda module, args: seen.append(type(args[0])))
    exp = explain_tabular(net, x[:2].astype(np.int64), training_data=x, n_samples=50)  # integers taken too
    assert set(seen) == {torch.Tensor} and exp.coef.shape == (2, 1, 4)


class Counting:
    """A model that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return np.stack((np.asarray(x)[:, 0], -np.asarray(x)[:, 0]), 1)


@pytest.mark.parametrize(
    "x,error,match",
    [
        (np.array([["a", "b"], ["c", "d"]]), TypeError, r"`X` must hold numbers .*got ndarray of shape \(2, 2\)"),
        (np.ones(4), ValueError, r"`X` must have shape \(B, D\) .*got shape \(4,\); .*X.reshape\(1, -1\)"),
        (torch.ones(4), ValueError, r"`X` must have shape \(B, D\) .*got shape \(4,\); .*X.unsqueeze\(0\)"),
        (torch.ones(2, 4, dtype=torch.long), TypeError, r"`X` must be a floating tensor .*; convert with X.float\(\)"),
        ([[1.0, 2.0]], TypeError, r"`X` must be a torch.Tensor or a numpy array of numbers \(B, D\), got list"),
    ],
    ids=["strings", "numpy_row", "tensor_row", "long_tensor", "list"],
)
def test_bad_x_refused_before_any_model_call(x, error, match):
    model = Counting()
    with pytest.raises(error, match=match):
        explain_tabular(model, x, training_data=np.random.RandomState(0).randn(20, 4), n_samples=20)
    assert model.calls == 0


def test_numpy_perturbed_rows():
    x, y = planted(200, 4)
    clf = LogisticRegression().fit(x, y)
    given = np.repeat(x[:2, None], 5, 1)
    given[:, 1:, PLANTED] *= -1
    exp = explain_tabular(clf.predict_proba, x[:2], training_data=x, perturbed=given, return_samples=True)
    assert exp.samples.shape == (2, 5, 4) and not exp.samples[:, 1:, PLANTED].any()
