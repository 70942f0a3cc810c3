"""SMILE kernels: two-sample statistics against scipy (and a slow NumPy Kuiper), per-channel distances,
max-normalised weights end to end through ``torchlime.explain``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import torchlime
from torchlime.engine.registry import resolve_kernel
from torchlime.methods.smile import STATISTICS, SmileKernel, anderson_standardize, channel_samples, two_sample_distance

from tests.helpers import SegmentLinear, grid_labels

stats = pytest.importorskip("scipy.stats")  # optional: skip, not a collection error


def kuiper_reference(x: np.ndarray, y: np.ndarray) -> float:
    """Kuiper's V = sup(F - G) + sup(G - F), the ECDFs evaluated by counting at every pooled value."""
    up = down = 0.0
    for t in np.concatenate([x, y]):
        f, g = np.mean(x <= t), np.mean(y <= t)
        up, down = max(up, f - g), max(down, g - f)
    return up + down


def scipy_statistic(x: np.ndarray, y: np.ndarray, name: str) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # p-value approximations
        if name == "wasserstein":
            return stats.wasserstein_distance(x, y)
        if name == "ks":
            return stats.ks_2samp(x, y).statistic
        if name == "kuiper":
            return kuiper_reference(x, y)
        if name == "cvm":
            return stats.cramervonmises_2samp(x, y).statistic
        return stats.anderson_ksamp([x, y], variant="midrank").statistic


def ours(x: np.ndarray, y: np.ndarray, name: str, device="cpu") -> float:
    d = two_sample_distance(torch.tensor(x, device=device)[None], torch.tensor(y, device=device)[None], name)
    if name == "anderson":
        d = anderson_standardize(d, len(x), len(y))
    return float(d)


def samples(rng: np.random.Generator, ties: bool, equal: bool):
    n = int(rng.integers(2, 40))
    m = n if equal else int(rng.integers(2, 40))
    if ties:  # few distinct values: many ties within and across the samples
        return rng.integers(0, 5, n).astype(float), rng.integers(0, 5, m).astype(float)
    return rng.normal(size=n), rng.normal(0.4, 1.3, size=m)


@pytest.mark.parametrize("name", STATISTICS)
@pytest.mark.parametrize("ties", [False, True], ids=["no_ties", "ties"])
def test_parity_with_scipy(name, ties):
    rng = np.random.default_rng(STATISTICS.index(name) + 10 * ties)
    checked = 0
    for trial in range(120):
        x, y = samples(rng, ties, equal=trial % 2 == 0)
        if len(np.unique(np.concatenate([x, y]))) < 2:
            continue  # anderson_ksamp needs two distinct values
        assert ours(x, y, name) == pytest.approx(scipy_statistic(x, y, name), abs=1e-9, rel=1e-9)
        checked += 1
    assert checked > 100


def test_float32_close_to_scipy():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(4, 300)), rng.normal(0.2, 1.0, size=(4, 250))
    for name in STATISTICS:
        d = two_sample_distance(torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32), name)
        assert d.dtype == torch.float32
        if name == "anderson":
            d = anderson_standardize(d.double(), 300, 250)
        ref = [
            scipy_statistic(x[i].astype(np.float32).astype(float), y[i].astype(np.float32).astype(float), name)
            for i in range(4)
        ]
        np.testing.assert_allclose(d.double().numpy(), ref, rtol=1e-5, atol=1e-6)


def test_batched_rows_equal_single_rows():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 6, (3, 4, 30), generator=g).double()
    y = torch.randn(3, 4, 30, generator=g, dtype=torch.float64)
    for name in STATISTICS:
        whole = two_sample_distance(x, y, name)
        assert whole.shape == (3, 4)
        each = torch.stack(
            [two_sample_distance(x[i, j : j + 1], y[i, j : j + 1], name)[0] for i in range(3) for j in range(4)]
        ).view(3, 4)
        torch.testing.assert_close(whole, each, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", STATISTICS)
def test_equal_samples_are_at_distance_zero(name):
    x = torch.tensor([[0.0, 1.0, 1.0, 3.0, 2.0]], dtype=torch.float64)
    assert abs(float(two_sample_distance(x, x.flip(-1), name))) < 1e-12


def test_kernel_distances_average_the_channels():
    g = torch.Generator().manual_seed(1)
    inputs = torch.rand(2, 3, 5, 6, generator=g)
    perturbed = torch.where(torch.rand(4, 3, 5, 6, generator=g) < 0.3, 0.0, inputs[torch.tensor([0, 0, 1, 1])])
    rows = torch.tensor([0, 0, 1, 1])
    for name in STATISTICS:
        d = SmileKernel(name).distances(perturbed, inputs, rows)
        assert d.dtype == torch.float32 and d.shape == (4,)
        for r in range(4):
            per = [
                float(
                    two_sample_distance(
                        inputs[rows[r], c].flatten()[None].double(), perturbed[r, c].flatten()[None].double(), name
                    )
                )
                for c in range(3)
            ]
            assert float(d[r]) == pytest.approx(max(0.0, float(np.mean(per))), rel=1e-5, abs=1e-6)
    # 2-D rows (c, H, W) and 1-D rows (c, L) are one channel
    assert channel_samples(torch.zeros(4, 5, 6)).shape == (4, 1, 30)
    assert channel_samples(torch.zeros(4, 7)).shape == (4, 1, 7)
    same = SmileKernel("cvm").distances(inputs[rows], inputs, rows)
    assert torch.equal(same, torch.zeros(4))


def test_normaliser_and_weights():
    k = SmileKernel("ks", width=0.5)
    d = torch.tensor([[0.0, 0.2, 0.4], [0.0, 0.0, 0.0]])
    drawn = torch.tensor([[True, True, True], [True, True, True]])
    scale = k.normaliser(d, drawn)
    assert scale.tolist() == pytest.approx([0.4, 1.0])
    w = k.weigh(d / scale.unsqueeze(1))
    np.testing.assert_allclose(w.numpy(), np.exp(-((d / scale[:, None]).numpy() ** 2) / (2 * 0.25)), rtol=1e-6)
    assert k.normaliser(d, torch.tensor([[True, True, False], [True, True, True]]))[0] == pytest.approx(0.2)


def _perturbed(x, feats, masks):
    """The perturbed inputs (S, C, H, W) of one input for baseline 0 and a (H, W) feature map."""
    keep = masks[:, feats]  # (S, H, W)
    return x.unsqueeze(0) * keep.unsqueeze(1)


@pytest.mark.parametrize("name", STATISTICS)
def test_end_to_end_through_explain(name, device):
    feats = grid_labels(8, 8, 2, 3)
    model = SegmentLinear(feats, 6, n_out=3).to(device)
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(2)).to(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torchlime.engine.quality.UnreliableExplanationWarning)
        exp = torchlime.explain(
            model,
            x,
            feats.view(1, 1, 8, 8).to(device),
            n_samples=48,
            kernel=name,
            baseline=0.0,
            return_samples=True,
            generator=5,
        )
    w = exp.weights.cpu()
    assert torch.equal(w[:, 0], torch.ones(3))
    assert bool(((w > 0) & (w <= 1)).all()) and float(w.min()) < 1
    assert exp.run.kernel == repr(SmileKernel(name))
    for b in range(3):  # the weights from the perturbed inputs rebuilt by hand, distances from scipy
        pert = _perturbed(x[b].cpu().double(), feats, exp.samples[b].cpu())
        d = np.array(
            [
                np.mean(
                    [
                        scipy_statistic(x[b, c].cpu().double().flatten().numpy(), pert[s, c].flatten().numpy(), name)
                        for c in range(3)
                    ]
                )
                for s in range(48)
            ]
        )
        if name == "anderson":  # the kernel uses A²akN: undo scipy's standardisation
            sigma = 1.0 / float(anderson_standardize(torch.tensor(2.0, dtype=torch.float64), 64, 64))
            d = d * sigma + 1.0
        d = np.maximum(d, 0.0)
        d[0] = 0.0
        ref = np.exp(-((d / d.max()) ** 2) / (2 * 0.25**2))
        np.testing.assert_allclose(w[b].double().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_resolve_kernel_names():
    for name in STATISTICS:
        k = resolve_kernel(name)
        assert isinstance(k, SmileKernel) and k.statistic == name and k.space == "input"
    with pytest.raises(ValueError, match=r"`kernel` must be a Kernel, a float width, or one of .*'wasserstein'"):
        resolve_kernel("energy")


def test_errors():
    with pytest.raises(ValueError, match=r"`statistic` must be one of \['wasserstein', .*got 'energy'"):
        SmileKernel("energy")
    with pytest.raises(ValueError, match="`width` must be finite and > 0, got 0.0"):
        SmileKernel("ks", width=0.0)
    with pytest.raises(TypeError, match="`x` must be a torch.Tensor, got list"):
        two_sample_distance([1.0, 2.0], torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"`x` and `y` must have the same leading dims, got \(2, 3\) and \(3, 3\)"):
        two_sample_distance(torch.zeros(2, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"`y` must hold at least 2 values per sample, got shape \(2, 1\)"):
        two_sample_distance(torch.zeros(2, 3), torch.zeros(2, 1))
    with pytest.raises(TypeError, match="`y` must be a real tensor"):
        two_sample_distance(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="SmileKernel needs the perturbed inputs as one"):
        SmileKernel().distances((torch.zeros(2, 3),), torch.zeros(1, 3), torch.zeros(2, dtype=torch.long))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
    feats = torch.arange(16).view(1, 1, 4, 4) // 4
    with pytest.raises(ValueError, match="normalises by all of an input's distances: it needs an int n_samples"):
        torchlime.explain(model, torch.rand(2, 1, 4, 4), feats, n_samples="auto", kernel="ks")
