"""Stage 3's fill (``torchlime.stages.perturb.fills``): every named fill against a direct computation, on
images, spectrograms, waveforms and complex STFTs; reproducible from the key; errors."""

from __future__ import annotations

import pytest
import torch

from torchlime.stages.perturb.fills import (
    NAMES,
    Blur,
    FillContext,
    feature_mean,
    gaussian_blur,
    resolve_baseline,
    signal_dims,
)
from torchlime.stages.sampling import make_key


def context(x: torch.Tensor, labels: torch.Tensor, seed: int = 0) -> FillContext:
    n = int(labels.max()) + 1
    return FillContext(
        labels,
        n,
        signal_dims(tuple(x.shape), tuple(labels.shape)),
        make_key(seed, x.device),
        torch.arange(x.shape[0], device=x.device),
    )


def spectrograms(device) -> tuple[torch.Tensor, torch.Tensor]:
    """(2, 3, 16, 12) with a different level per clip, and a (1, 1, 16, 12) grid map."""
    x = torch.rand(2, 3, 16, 12, device=device) + torch.tensor([0.0, 1.0], device=device).view(2, 1, 1, 1)
    labels = torch.arange(16 * 12, device=device).view(1, 1, 16, 12) // 24
    return x, labels


def test_signal_dims_follow_the_feature_map():
    assert signal_dims((2, 3, 32, 32), (2, 1, 32, 32)) == (2, 3)  # images: per colour channel
    assert signal_dims((2, 129, 63), (1, 129, 63)) == (1, 2)  # spectrograms
    assert signal_dims((2, 2, 8000), (1, 1, 8000)) == (2,)  # stereo waveforms
    assert signal_dims((2, 5), (1, 1)) == (1,)  # no varying dim: all of them


@pytest.mark.parametrize("name", NAMES)
def test_named_fills(name, device):
    x, labels = spectrograms(device)
    ctx = context(x, labels)
    a = resolve_baseline(name, x, ctx)
    assert a.shape == x.shape and a.dtype == x.dtype and a.device == x.device
    assert torch.equal(a, resolve_baseline(name, x, ctx))  # reproducible from the key
    per = lambda f: f(x.flatten(2), dim=2).view(2, 3, 1, 1).expand_as(x)  # noqa: E731
    if name == "zero":
        assert (a == 0).all()
    elif name == "min":
        assert torch.equal(a, per(torch.amin))
    elif name == "max":
        assert torch.equal(a, per(torch.amax))
    elif name == "signal_mean":
        torch.testing.assert_close(a, per(torch.mean))
    elif name == "mean":  # each feature's own mean, per channel
        for f in range(int(labels.max()) + 1):
            cell = labels[0, 0] == f
            torch.testing.assert_close(a[..., cell], x[..., cell].mean(-1, keepdim=True).expand_as(a[..., cell]))
    elif name == "noise":
        assert (a >= 0).all() and (a <= per(torch.amax)).all() and a.std() > 0.1
        assert not torch.equal(a, resolve_baseline(name, x, context(x, labels, seed=1)))
    elif name == "shuffle":  # the same values per channel, in another order
        assert torch.equal(a.flatten(2).sort(-1).values, x.flatten(2).sort(-1).values)
        assert not torch.equal(a, x)
        assert not torch.equal(a, resolve_baseline(name, x, context(x, labels, seed=1)))
    else:  # blur: smoother, same mean level
        assert a.diff(dim=-1).abs().mean() < 0.5 * x.diff(dim=-1).abs().mean()
        torch.testing.assert_close(a.mean((2, 3)), x.mean((2, 3)), atol=0.05, rtol=0)


def test_random_fills_depend_on_the_input_index_not_the_batch():
    x, labels = spectrograms("cpu")
    ctx = context(x, labels)
    both = resolve_baseline("noise", x, ctx)
    second = resolve_baseline(
        "noise", x[1:], FillContext(labels, ctx.n_columns, ctx.signal_dims, ctx.key, torch.tensor([1]))
    )
    assert torch.equal(both[1:], second)


def test_signal_mean_of_integer_inputs_is_taken_in_float64_as_mean_is():
    x = torch.tensor([[[[0, 255], [1, 2]]]], dtype=torch.uint8)
    labels = torch.tensor([[[[0, 0], [1, 1]]]])
    ctx = context(x, labels)
    got = resolve_baseline("signal_mean", x, ctx)
    assert got.dtype == torch.uint8 and got.unique().tolist() == [64]  # 258 / 4, truncated like "mean"
    assert torch.equal(resolve_baseline("mean", x, ctx), torch.tensor([[[[127, 127], [1, 1]]]], dtype=torch.uint8))
    big = torch.tensor([[2**60 + 1, 2**60 + 3]])  # beyond float64's integers: min and max stay exact
    two = context(big, torch.tensor([[0, 1]]))
    assert resolve_baseline("min", big, two).tolist() == [[2**60 + 1] * 2]


def test_complex_fills_keep_phase_or_bound_magnitude():
    spec = torch.stft(torch.randn(2, 2000), 256, 64, window=torch.hann_window(256), return_complex=True)
    labels = torch.zeros(1, spec.shape[1], spec.shape[2], dtype=torch.long)
    labels[..., 5:] = 1
    ctx = context(spec, labels)
    mean = resolve_baseline("signal_mean", spec, ctx)
    assert mean.is_complex() and torch.allclose(mean.angle(), spec.angle(), atol=1e-4)
    torch.testing.assert_close(mean.abs(), spec.abs().mean((1, 2), keepdim=True).expand_as(spec), rtol=1e-4, atol=1e-6)
    noise = resolve_baseline("noise", spec, ctx)
    assert (noise.abs() <= spec.abs().amax((1, 2), keepdim=True) * (1 + 1e-5)).all()
    fmean = resolve_baseline("mean", spec, ctx)
    torch.testing.assert_close(fmean[:, :, 5:], spec[:, :, 5:].mean((1, 2), keepdim=True).expand_as(spec[:, :, 5:]))
    assert torch.equal(resolve_baseline(0.0, spec, ctx), torch.zeros_like(spec))


def test_signed_waveform_noise_and_light_blur():
    wave = torch.randn(2, 400)
    labels = (torch.arange(400) // 40).view(1, 400)
    ctx = context(wave, labels)
    assert resolve_baseline("noise", wave, ctx).min() < 0
    light, heavy = Blur(2.0)(wave, ctx), Blur()(wave, ctx)  # sigma 2 vs 400 / 16 = 25 samples
    assert heavy.std() < light.std() < wave.std()


def test_feature_mean_broadcasts_over_channels():
    x = torch.tensor([[[1.0, 3.0, 5.0], [10.0, 30.0, 50.0]]])  # (1, 2 channels, 3)
    labels = torch.tensor([[[0, 0, 1]]])
    assert feature_mean(x, labels, 2).tolist() == [[[2.0, 2.0, 5.0], [20.0, 20.0, 50.0]]]


def test_feature_mean_sums_in_float64():
    """Sums of float32 values are accumulated in float64 (CUDA's scatter_add_ adds in no fixed order:
    float32 sums would vary in the last bit between runs), so the mean is the float32 rounding of
    the exact mean: 2**24 + 1 + 1 + 1 summed in float32 loses every 1."""
    x = torch.tensor([[2.0**24, 1.0, 1.0, 1.0, 7.0]])
    labels = torch.tensor([[0, 0, 0, 0, 1]])
    exact = torch.tensor((2.0**24 + 3.0) / 4.0, dtype=torch.float64).float()
    out = feature_mean(x, labels, 2)
    assert out.dtype == torch.float32
    assert out[0, :4].tolist() == [exact.item()] * 4 and out[0, 4].item() == 7.0


def test_gaussian_blur_keeps_constants_and_mass():
    ones = torch.ones(1, 3, 9, 9)
    torch.testing.assert_close(gaussian_blur(ones, 1.5, (2, 3)), ones)
    impulse = torch.zeros(1, 1, 31)
    impulse[..., 15] = 1
    out = gaussian_blur(impulse, 2.0, (2,))
    torch.testing.assert_close(out.sum(), torch.tensor(1.0))
    assert out.argmax() == 15


def test_values_tensors_and_callables():
    x, labels = spectrograms("cpu")
    ctx = context(x, labels)
    assert torch.equal(resolve_baseline(0.5, x, ctx), torch.full_like(x, 0.5))
    one = torch.rand(3, 16, 12)
    assert torch.equal(resolve_baseline(one, x, ctx), one.expand_as(x))
    assert torch.equal(resolve_baseline(lambda t: t * 2, x, ctx), x * 2)
    before = x.clone()
    resolve_baseline("blur", x, ctx)
    assert torch.equal(x, before)  # inputs never modified


@pytest.mark.parametrize(
    "spec, error, match",
    [
        (True, TypeError, r"`baseline` must be a number, a tensor, a callable or one of"),
        ("median", ValueError, r"`baseline` string must be one of \['zero', 'mean'"),
        (torch.zeros(5), ValueError, r"`baseline` of shape \(5,\) does not broadcast to the inputs' shape"),
        (lambda t: 3, TypeError, r"a callable `baseline` must return a tensor, got int 3"),
        (object(), TypeError, r"`baseline` must be a number, a tensor, a callable"),
    ],
)
def test_errors(spec, error, match):
    x, labels = spectrograms("cpu")
    with pytest.raises(error, match=match):
        resolve_baseline(spec, x, context(x, labels))
    with pytest.raises(ValueError, match="`sigma` must be finite and > 0"):
        Blur(-1.0)
