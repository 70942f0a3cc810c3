"""One numpy rule at every door: numpy inputs, feature maps, targets and model outputs are taken; the
explanation is torch; the caller's arrays are never touched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchlime
from torchlime._util.checks import from_numpy

FEATS = torch.arange(16).view(1, 1, 4, 4) // 2


def linear() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))


def test_numpy_inputs_features_and_targets_equal_torch_ones():
    x = np.random.default_rng(0).random((2, 1, 4, 4), dtype=np.float32)
    copy = x.copy()
    ref = torchlime.explain(linear(), torch.from_numpy(x.copy()), FEATS, n_samples=64, target=torch.tensor([1, 2]))
    exp = torchlime.explain(linear(), x, FEATS.numpy(), n_samples=64, target=np.array([1, 2]))  # one per input
    assert isinstance(exp.coef, torch.Tensor) and torch.equal(exp.coef, ref.coef)
    ref = torchlime.explain(linear(), torch.from_numpy(x.copy()), FEATS, n_samples=64, target=[[0, 2]])
    exp = torchlime.explain(linear(), x, FEATS, n_samples=64, target=[[0, 2]])  # the same columns for all
    assert torch.equal(exp.coef, ref.coef) and exp.coef.shape == (2, 2, 8)
    exp = torchlime.explain(linear(), x, FEATS, n_samples=64, target=[np.int64(0), np.int64(2)])  # one per input
    ref = torchlime.explain(linear(), torch.from_numpy(x.copy()), FEATS, n_samples=64, target=torch.tensor([0, 2]))
    assert torch.equal(exp.coef, ref.coef) and exp.coef.shape == (2, 1, 8)
    assert np.array_equal(x, copy)
    one = torchlime.explain(linear(), x, FEATS, n_samples=64, target=np.int64(2))
    assert torch.equal(one.target, torch.tensor([[2], [2]]))


def test_numpy_seeds_indices_and_a_0d_class_are_taken():
    x = torch.rand(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    ref = torchlime.explain(linear(), x, FEATS, n_samples=64, generator=3, index=torch.arange(2), target=1)
    exp = torchlime.explain(linear(), x, FEATS, n_samples=64, generator=np.int64(3), index=np.arange(2), target=1)
    assert torch.equal(exp.coef, ref.coef)
    labels = torch.tensor([1, 2])
    one = torchlime.explain(linear(), x[:1], FEATS, n_samples=64, target=labels[0])  # a 0-d class: labels[i]
    assert one.target.tolist() == [[1]]
    with pytest.raises(TypeError, match="`target`"):
        torchlime.explain(linear(), x[:1], FEATS, n_samples=64, target=torch.tensor(True))


def test_a_0d_input_and_a_complex_output_are_named():
    with pytest.raises(ValueError, match=r"`inputs` must be batched with shape \(B, ...\), got shape \(\)"):
        torchlime.explain(lambda z: z, torch.tensor(1.0), n_samples=16)
    with pytest.raises(ValueError, match=r"model output must be real scores, got torch.complex64"):
        torchlime.explain(lambda z: linear()(z).to(torch.complex64), torch.rand(2, 1, 4, 4), FEATS, n_samples=16)


def test_a_numpy_model_and_sklearn_predict_proba_as_they_are():
    sklearn = pytest.importorskip("sklearn.linear_model")
    rng = np.random.default_rng(0)
    data = rng.normal(size=(300, 5))
    clf = sklearn.LogisticRegression().fit(data, (data[:, 3] > 0).astype(int))
    exp = torchlime.explain(clf.predict_proba, data[:4], torch.arange(5).view(1, 5), n_samples=300, target=1)
    assert exp.coef.abs().argmax(-1).flatten().tolist() == [3, 3, 3, 3]
    numpy_model = lambda v: v.flatten(1).numpy()[:, :3] * 2.0  # noqa: E731 - returns numpy float64
    exp = torchlime.explain(numpy_model, torch.rand(2, 1, 4, 4), FEATS, n_samples=32)
    assert exp.coef.dtype == torch.float32 and torch.isfinite(exp.coef).all()


def test_from_numpy_leaves_other_values_alone():
    assert from_numpy(np.float32(0.5)) == 0.5 and isinstance(from_numpy(np.int64(3)), int)
    strings = np.array(["a", "b"])
    assert from_numpy(strings) is strings and from_numpy("top2") == "top2"
    t = from_numpy(np.array([True, False]))
    assert t.dtype == torch.bool
