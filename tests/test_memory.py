"""auto_batch_size: the probing search (on CPU, with the CUDA check replaced), the cache, errors."""
from __future__ import annotations

import gc

import pytest
import torch

from torchlime import chunking as memory
from torchlime.forward import default_batch_size
from torchlime.chunking import auto_batch_size, clear_cache


class FakeModel(torch.nn.Module):
    """Raises torch.OutOfMemoryError for chunks of more than ``limit`` rows; records every size."""

    def __init__(self, limit: int, message: str = "") -> None:
        super().__init__()
        self.limit = limit
        self.message = message
        self.weight = torch.nn.Parameter(torch.ones(4, 2))
        self.sizes: list[int] = []
        self.modes: list[bool] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sizes.append(x.shape[0])
        self.modes.append(self.training)
        if x.shape[0] > self.limit:
            if self.message:
                raise RuntimeError(self.message)
            raise torch.OutOfMemoryError(f"fake: {x.shape[0]} rows > {self.limit}")
        return x.flatten(1).sum(1, keepdim=True) * self.weight.sum()


@pytest.fixture
def probing(monkeypatch):
    """Probe on CPU: the CUDA check says yes, so the search logic itself runs."""
    clear_cache()
    monkeypatch.setattr(memory, "_on_cuda", lambda device: True)
    yield
    clear_cache()


def rows(n: int) -> torch.Tensor:
    return torch.zeros(n, 4)


def test_doubling_then_bisection(probing):
    model = FakeModel(300)
    assert auto_batch_size(model, rows, "cpu") == 296  # 300 rounded down to a multiple of 8
    assert model.sizes[:4] == [64, 128, 256, 512]  # doubling until the first failure
    assert all(256 <= n <= 512 for n in model.sizes[4:])  # then bisection in the bracket
    assert max(n for n in model.sizes if n <= 300) == 300


def test_start_too_large_halves_first(probing):
    model = FakeModel(20)
    assert auto_batch_size(model, rows, "cpu") == 16
    assert model.sizes[:3] == [64, 32, 16]
    small = FakeModel(5)
    assert auto_batch_size(small, rows, "cpu") == 5  # under 8: not rounded


def test_capped_at_max_size(probing):
    model = FakeModel(10_000)
    assert auto_batch_size(model, rows, "cpu", max_size=1000) == 1000
    assert model.sizes == [64, 128, 256, 512, 1000]
    assert auto_batch_size(FakeModel(10_000), rows, "cpu", start=16, max_size=12) == 8


def test_oom_message_from_runtime_error_counts(probing):
    model = FakeModel(100, message="CUDA out of memory. Tried to allocate 2.00 GiB")
    assert auto_batch_size(model, rows, "cpu") == 96


def test_other_errors_propagate(probing):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        auto_batch_size(FakeModel(10, message="shape mismatch"), rows, "cpu")


def test_single_row_must_fit(probing):
    with pytest.raises(torch.OutOfMemoryError, match="a single row does not fit"):
        auto_batch_size(FakeModel(0), rows, "cpu")


def test_fraction_of_available_memory(probing, monkeypatch):
    model = FakeModel(10_000)
    monkeypatch.setattr(memory, "_available_bytes", lambda device: 1000)
    monkeypatch.setattr(memory, "_peak_bytes", lambda device, base: 10 * model.sizes[-1])
    assert auto_batch_size(model, rows, "cpu", fraction=0.8) == 80  # 10 bytes a row, 800 allowed
    assert auto_batch_size(model, rows, "cpu", fraction=0.5) == 48  # 50 rounded down


def test_probes_in_eval_mode_and_restores_mode(probing):
    model = FakeModel(100).train()
    auto_batch_size(model, rows, "cpu")
    assert model.training and not any(model.modes)


def test_tuple_and_dict_chunks(probing):
    class TwoArgs(FakeModel):
        def forward(self, x, mask):  # type: ignore[override]
            return super().forward(x * mask)

    model = TwoArgs(50)
    assert auto_batch_size(model, lambda n: (rows(n), torch.ones(n, 1)), "cpu") == 48
    model = TwoArgs(50)
    assert auto_batch_size(model, lambda n: {"x": rows(n), "mask": torch.ones(n, 1)}, "cpu") == 48


def test_cache_per_model_shape_dtype(probing):
    model = FakeModel(300)
    assert auto_batch_size(model, rows, "cpu") == 296
    probes = len(model.sizes)
    assert auto_batch_size(model, rows, "cpu") == 296
    assert len(model.sizes) == probes  # found once
    auto_batch_size(model, lambda n: torch.zeros(n, 8), "cpu")  # other row shape: probes again
    assert len(model.sizes) > probes
    probes = len(model.sizes)
    auto_batch_size(model, lambda n: torch.zeros(n, 4, dtype=torch.float64), "cpu")  # other dtype
    assert len(model.sizes) > probes
    other = FakeModel(300)
    auto_batch_size(other, rows, "cpu")  # other model
    assert other.sizes
    clear_cache()
    probes = len(model.sizes)
    auto_batch_size(model, rows, "cpu")
    assert len(model.sizes) > probes


def test_identity_keys_the_cache_for_fresh_wrappers(probing):
    inner = FakeModel(300)
    first = auto_batch_size(torch.nn.Sequential(inner), rows, "cpu", identity=inner)
    probes = len(inner.sizes)
    again = auto_batch_size(torch.nn.Sequential(inner), rows, "cpu", identity=inner)  # a new wrapper
    assert first == again == 296 and len(inner.sizes) == probes


def test_cache_entry_dies_with_the_model(probing):
    model = FakeModel(300)
    auto_batch_size(model, rows, "cpu")
    assert memory._CACHE
    del model
    gc.collect()
    assert not memory._CACHE


def test_cpu_uses_the_default_rule_without_probing():
    clear_cache()
    model = FakeModel(0)  # would fail any probe
    x = torch.zeros(1, 3, 224, 224)
    got = auto_batch_size(model, lambda n: x.expand(n, -1, -1, -1), "cpu")
    assert got == default_batch_size(x, 4096) and not model.sizes
    assert auto_batch_size(model, lambda n: torch.zeros(n, 2), torch.device("cpu"), max_size=10) == 10


def test_errors():
    model = FakeModel(10)
    with pytest.raises(TypeError, match="`model` must be an nn.Module or a callable, got int 1"):
        auto_batch_size(1, rows, "cpu")
    with pytest.raises(TypeError, match="`make_chunk` must be a callable n -> chunk of n rows, got a tensor"):
        auto_batch_size(model, torch.zeros(2), "cpu")
    with pytest.raises(TypeError, match="`device` must be a torch.device or a string, got int 0"):
        auto_batch_size(model, rows, 0)
    with pytest.raises(ValueError, match="`start` must be >= 1, got 0"):
        auto_batch_size(model, rows, "cpu", start=0)
    with pytest.raises(TypeError, match="`max_size` must be an int >= 1, got float"):
        auto_batch_size(model, rows, "cpu", max_size=10.0)
    with pytest.raises(ValueError, match=r"`fraction` must be in \(0, 1\], got 1.5"):
        auto_batch_size(model, rows, "cpu", fraction=1.5)
    with pytest.raises(ValueError, match="`fraction` must be finite and > 0, got 0.0"):
        auto_batch_size(model, rows, "cpu", fraction=0)
    with pytest.raises(TypeError, match="`make_chunk` must return a tensor.*got str"):
        auto_batch_size(model, lambda n: "rows", "cpu")


# ---- CUDA variant (skipped without a GPU) -----------------------------------------------------

def test_real_probe_on_cuda(cuda):
    clear_cache()
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten()).to(cuda)
    size = auto_batch_size(net, lambda n: torch.rand(n, 3, 32, 32, device=cuda), cuda, max_size=512)
    assert 8 <= size <= 512 and size % 8 == 0
    assert auto_batch_size(net, lambda n: torch.rand(n, 3, 32, 32, device=cuda), cuda, max_size=512) == size
    clear_cache()
