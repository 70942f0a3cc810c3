"""SLIC's colour conversion (``torchlime.image._lab``): bit-identical to kornia's ``rgb_to_lab`` on every
device, with its constants made once per device and dtype (no tensor from Python data after the first call)."""

from __future__ import annotations

import pytest
import torch

from torchlime.image._lab import rgb_to_lab

from tests.helpers.syncs import count_syncs

kornia = pytest.importorskip("kornia")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 3, 16, 16), (2, 2, 3, 4, 4), (0, 3, 4, 4)])
def test_bit_identical_to_kornia(device, dtype, shape):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.rand(shape, generator=g, dtype=dtype)
    x.view(-1)[: x.numel() // 8] = 0.02  # the linear part of sRGB and the cube root's linear tail
    x = x.to(device)
    ours, theirs = rgb_to_lab(x), kornia.color.rgb_to_lab(x)
    assert ours.dtype == theirs.dtype == dtype and ours.shape == theirs.shape
    assert torch.equal(ours, theirs)


def test_white_black_and_constants_made_once():
    white, black = rgb_to_lab(torch.ones(1, 3, 2, 2)), rgb_to_lab(torch.zeros(1, 3, 2, 2))
    torch.testing.assert_close(white[:, 0], torch.full((1, 2, 2), 100.0))
    torch.testing.assert_close(white[:, 1:], torch.zeros(1, 2, 2, 2), atol=1e-2, rtol=0)  # kornia's rounded matrix
    torch.testing.assert_close(black, torch.zeros(1, 3, 2, 2), atol=1e-4, rtol=0)
    uploads: list[str] = []
    with count_syncs(uploads), torch.inference_mode():
        rgb_to_lab(torch.rand(1, 3, 4, 4))
    assert uploads == []
    x = torch.rand(1, 3, 4, 4, requires_grad=True)  # constants made in inference mode still serve autograd
    rgb_to_lab(x).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
