"""``preset="lime"`` against lime's own LimeImageExplainer, fed the very same masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchlime import Ridge, explain

from tests.helpers import grid_labels

lime_image = pytest.importorskip("lime.lime_image")


class SmallNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(32, 7),
        )

    def forward(self, x):
        return self.net(x) * 4


def lime_masks(seed: int, n_samples: int, n_features: int) -> np.ndarray:
    """The masks lime draws: one randint for the segmentation seed, then Bernoulli(1/2), row 0 ones."""
    rs = np.random.RandomState(seed)
    rs.randint(0, high=1000)
    data = rs.randint(0, 2, n_samples * n_features).reshape((n_samples, n_features))
    data[0, :] = 1
    return data


@pytest.mark.parametrize("n_samples", [300])
def test_preset_lime_equals_lime(n_samples):
    model = SmallNet().eval()
    g = torch.Generator().manual_seed(1)
    image = torch.rand(1, 3, 24, 24, generator=g, dtype=torch.float64)
    segments = grid_labels(24, 24, 4, 5)  # 20 superpixels, ids 0..19 like lime expects

    def classifier_fn(batch: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(batch).permute(0, 3, 1, 2).float()
        with torch.no_grad():
            return model(x).softmax(1).double().numpy()

    explainer = lime_image.LimeImageExplainer(random_state=123)
    ref = explainer.explain_instance(
        image[0].permute(1, 2, 0).numpy(),
        classifier_fn,
        segmentation_fn=lambda img: segments.numpy(),
        num_samples=n_samples,
    )

    masks = torch.from_numpy(lime_masks(123, n_samples, 20)).bool().unsqueeze(0)
    ours = explain(
        model,
        image.float(),
        segments.view(1, 1, 24, 24),
        preset="lime",
        softmax=True,
        n_samples=n_samples,
        masks=masks,
        surrogate=Ridge(alpha=1.0, dtype=torch.float64),
    )

    assert ours.target[0].tolist() == ref.top_labels
    for t, label in enumerate(ref.top_labels):
        lime_coef = np.zeros(20)
        for f, w in ref.local_exp[label]:
            lime_coef[f] = w
        np.testing.assert_allclose(ours.coef[0, t].numpy(), lime_coef, atol=2e-6, rtol=1e-4)
        np.testing.assert_allclose(ours.intercept[0, t].item(), ref.intercept[label], atol=2e-6)
    # lime keeps score / local_pred of the last label it fits: the top one
    np.testing.assert_allclose(ours.score[0, 0].item(), ref.score, atol=1e-5)
    np.testing.assert_allclose(ours.local_pred[0, 0].item(), ref.local_pred[0], atol=1e-5)


def test_preset_lime_agrees_with_lime_at_large_n_with_own_masks():
    """Different random streams, same estimator: coefficients agree closely at N=4000."""
    model = SmallNet().eval()
    image = torch.rand(1, 3, 24, 24, generator=torch.Generator().manual_seed(2))
    segments = grid_labels(24, 24, 3, 3)

    def classifier_fn(batch):
        with torch.no_grad():
            return model(torch.from_numpy(batch).permute(0, 3, 1, 2).float()).softmax(1).double().numpy()

    ref = lime_image.LimeImageExplainer(random_state=0).explain_instance(
        image[0].permute(1, 2, 0).double().numpy(),
        classifier_fn,
        segmentation_fn=lambda im: segments.numpy(),
        num_samples=4000,
        top_labels=1,
        batch_size=500,
    )
    ours = explain(model, image, segments.view(1, 1, 24, 24), preset="lime", softmax=True, target=None, n_samples=4000)
    label = ref.top_labels[0]
    lime_coef = np.zeros(9)
    for f, w in ref.local_exp[label]:
        lime_coef[f] = w
    c = ours.coef[0, 0].numpy()
    assert np.corrcoef(c, lime_coef)[0, 1] > 0.98
    np.testing.assert_allclose(c, lime_coef, atol=0.15 * np.abs(lime_coef).max())
