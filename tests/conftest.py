"""Shared fixtures: device / dtype parameters and small deterministic models."""
from __future__ import annotations

import pytest
import torch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.fixture(params=DEVICES)
def device(request) -> torch.device:
    """CPU always; CUDA when available (skips cleanly otherwise)."""
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    return torch.device(request.param)


@pytest.fixture(params=[torch.float32, torch.float64], ids=["float32", "float64"])
def dtype(request) -> torch.dtype:
    """The floating dtypes every stage supports; float32 is the default everywhere."""
    return request.param


@pytest.fixture
def cuda() -> torch.device:
    """Skip unless a CUDA device exists."""
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    return torch.device("cuda")
