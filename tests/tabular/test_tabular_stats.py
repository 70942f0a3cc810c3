"""Training statistics against lime's: the same bins (quartile, decile, entropy), bin statistics,
levels, frequencies and scaler, on the same training data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime.tabular import entropy_bins, fit_stats, quantile_bins

from tests.helpers.tabular import breast_cancer

discretize = pytest.importorskip("lime.discretize")
lime_tabular = pytest.importorskip("lime.lime_tabular")
datasets = pytest.importorskip("sklearn.datasets")

LIME = {"quartile": "QuartileDiscretizer", "decile": "DecileDiscretizer", "entropy": "EntropyDiscretizer"}


def data(name: str):
    if name == "iris":
        return datasets.load_iris(return_X_y=True)
    if name == "breast_cancer":
        x, y, _ = breast_cancer()
        return x, y
    # 3 classes, rounded values (ties), a constant column and a column with many repeats
    x, y = datasets.make_classification(n_samples=300, n_features=8, n_informative=4, n_classes=3, random_state=1)
    x = np.round(x, 1)
    x[:, 6] = 2.5
    x[:, 7] = np.where(x[:, 7] > 0, 1.0, 0.0)
    return x, y


@pytest.mark.parametrize("name", ["iris", "breast_cancer", "classification"])
@pytest.mark.parametrize("discretizer", ["quartile", "decile", "entropy"])
def test_bins_and_bin_statistics_equal_lime(name, discretizer):
    x, y = data(name)
    ref = getattr(discretize, LIME[discretizer])(x, [], [str(i) for i in range(x.shape[1])], labels=y, random_state=0)
    stats = fit_stats(torch.from_numpy(x), discretizer=discretizer, training_labels=torch.from_numpy(y))
    for f in range(x.shape[1]):
        ours = stats.boundaries[f][stats.boundaries[f].isfinite()].numpy()
        np.testing.assert_array_equal(ours, np.array(ref.mins[f][1:]), err_msg=f"column {f}")
        k = len(ref.means[f])
        assert int(stats.n_levels[f]) == k
        for mine, theirs in (
            (stats.level_mean, ref.means),
            (stats.level_std, ref.stds),
            (stats.level_lo, ref.mins),
            (stats.level_hi, ref.maxs),
        ):
            np.testing.assert_allclose(mine[f, :k].numpy(), np.array(theirs[f]), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(stats.levels(torch.from_numpy(x)).numpy(), ref.discretize(x))


def test_frequencies_scaler_and_categories_equal_lime():
    x, y = datasets.load_iris(return_X_y=True)
    x = np.concatenate((x, (y[:, None] + 3.0) * (np.arange(len(y))[:, None] % 2)), 1)  # a categorical column
    explainer = lime_tabular.LimeTabularExplainer(
        x, categorical_features=[4], discretize_continuous=True, random_state=0
    )
    stats = fit_stats(torch.from_numpy(x), categorical_features=[4])
    for f in range(5):
        values = np.asarray(explainer.feature_values[f], dtype=float)
        freq = explainer.feature_frequencies[f]
        if f == 4:  # the category values themselves
            np.testing.assert_array_equal(stats.values[f, : len(values)].numpy(), values)
            levels = np.arange(len(values))
        else:  # bins: lime lists only the bins that occur
            levels = values.astype(int)
        np.testing.assert_allclose(stats.freq[f, levels].numpy(), freq, rtol=1e-12)
        assert float(stats.freq[f].sum()) == pytest.approx(1.0)
    plain = lime_tabular.LimeTabularExplainer(x, categorical_features=[4], discretize_continuous=False)
    np.testing.assert_allclose(stats.scale[:4].numpy(), plain.scaler.scale_[:4], rtol=1e-12)
    np.testing.assert_allclose(stats.mean[:4].numpy(), plain.scaler.mean_[:4], rtol=1e-12)


def test_levels_of_unseen_categories_and_values_beyond_the_training_range():
    train = torch.tensor([[0.0, 1.0], [1.0, 2.0], [2.0, 1.0], [3.0, 2.0]], dtype=torch.float64)
    stats = fit_stats(train, categorical_features=[1])
    lv = stats.levels(torch.tensor([[-5.0, 2.0], [9.0, 7.0]]))
    assert lv.tolist() == [[0, 1], [3, -1]]  # below the first bin, above the last; an unseen category


def test_constant_column_has_one_boundary_and_unit_scale():
    train = torch.cat((torch.arange(10.0).view(10, 1), torch.full((10, 1), 4.0)), 1)
    stats = fit_stats(train)
    assert stats.boundaries[1][stats.boundaries[1].isfinite()].tolist() == [4.0]
    assert stats.freq[1, :2].tolist() == [1.0, 0.0]
    assert float(stats.scale[1]) == 1.0


def test_quantile_and_entropy_bins_doc_cases():
    b, n = quantile_bins(torch.tensor([[1.0], [1.0], [1.0], [2.0]], dtype=torch.float64), "quartile")
    assert n.tolist() == [2] and b[0, :2].tolist() == [1.0, 1.25]  # duplicates removed as np.unique does
    # a pure column: the tree does not split, lime takes the median
    b, n = entropy_bins(torch.tensor([[1.0], [2.0], [4.0], [8.0]], dtype=torch.float64), torch.zeros(4))
    assert b[0, :1].tolist() == [3.0] and n.tolist() == [1]


def test_stats_on_cuda(cuda):
    x, y = datasets.load_iris(return_X_y=True)
    cpu = fit_stats(torch.from_numpy(x), discretizer="entropy", training_labels=torch.from_numpy(y))
    gpu = fit_stats(torch.from_numpy(x).to(cuda), discretizer="entropy", training_labels=torch.from_numpy(y).to(cuda))
    assert torch.equal(cpu.boundaries, gpu.boundaries.cpu())
    torch.testing.assert_close(cpu.level_mean, gpu.level_mean.cpu())
