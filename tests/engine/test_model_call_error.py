"""A model that raises on torchlime's call: ``ModelCallError`` says what was sent and what the door expects."""

from __future__ import annotations

import sys

import pytest
import torch

import torchlime
from torchlime.image import explain_image
from torchlime.stages.forward.errors import ModelCallError

FEATS = torch.arange(16).view(1, 1, 4, 4) // 2


def conv() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2)
    )


def test_channels_last_images_are_named_with_a_hint():
    x = torch.rand(2, 8, 8, 3)
    before = x.clone()
    with pytest.raises(ModelCallError, match=r"first call .*float32 tensor of shape \(\d+, 8, 8, 3\)") as info:
        torchlime.explain(conv(), x, torch.arange(64).view(1, 8, 8, 1) // 8, n_samples=20)
    text = str(info.value)
    assert "looks like channels" in text and "inputs.permute(0, 3, 1, 2)" in text
    assert "expected input" in text  # the model's own words are kept
    assert isinstance(info.value, RuntimeError) and isinstance(info.value.__cause__, RuntimeError)
    assert torch.equal(x, before)


def test_integer_rows_for_a_float_model():
    lin = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    with pytest.raises(RuntimeError, match=r"rows are int64 while the model computes in float32: pass inputs as"):
        torchlime.explain(lin, torch.randint(0, 3, (2, 1, 4, 4)), FEATS, n_samples=20)


def test_the_front_door_layout_is_named():
    wrong = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(10, 2))  # expects 10 values, gets 3*8*8
    with pytest.raises(ModelCallError, match=r"this front door expects `images` as \(B, C, H, W\)"):
        explain_image(wrong, torch.rand(2, 3, 8, 8), segments="grid", n_segments=4, n_samples=20)


def test_other_exceptions_keep_their_type():
    def boom(x):
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom") as info:
        torchlime.explain(boom, torch.rand(2, 1, 4, 4), FEATS, n_samples=20)
    if sys.version_info >= (3, 11):
        assert any("torchlime: the model raised ValueError on its first call" in n for n in info.value.__notes__)


def test_later_calls_name_their_rows():
    calls = []

    def flaky(x):
        calls.append(x.shape[0])
        if len(calls) > 1:
            raise RuntimeError("device lost")
        return x.flatten(1)[:, :2]

    with pytest.raises(ModelCallError, match=r"on rows 8 and after \(device lost\)"):
        torchlime.explain(flaky, torch.rand(2, 1, 4, 4), FEATS, n_samples=20, batch_size=8)
