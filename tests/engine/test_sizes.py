"""Calls whose whole-kept arrays exceed the memory are refused up front, naming the argument.

``n_samples=10**12`` used to reach the allocator at every door (a 3.6 TiB request whose message named no
argument); ``torchlime.engine.sizes.check_sizes`` now adds up the outputs (B, S, T), the fit's normal
equations and, with ``return_samples``, the masks and weights with host arithmetic, once per call when the
feature map is known, and refuses what exceeds the device's or the machine's memory before any sample is
made (so these tests are instant). A call that fits is not changed.
"""

from __future__ import annotations

import types

import pytest
import torch

import torchlime
from torchlime.engine import sizes
from torchlime.engine.sizes import SizeError, check_sizes, format_bytes, memory_limit
from torchlime.image import explain_image
from torchlime.series import explain_series
from torchlime.text import explain_tokens

from tests.helpers import grid_labels

HUGE = 10**12


class Recorded(torch.nn.Module):
    """A linear model that counts its calls."""

    def __init__(self, width: int, classes: int = 3) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(width, classes)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.lin(x.float().flatten(1))


def _image(model: Recorded, **kw: object) -> object:
    return explain_image(model, torch.rand(1, 3, 8, 8), segments=grid_labels(8, 8, 2, 2).view(1, 1, 8, 8), **kw)


def _tokens(model: Recorded, **kw: object) -> object:
    ids = torch.randint(5, 50, (2, 8))
    return explain_tokens(lambda input_ids: model(input_ids.float()), ids, mask_id=0, **kw)


def _series(model: Recorded, **kw: object) -> object:
    return explain_series(model, torch.rand(2, 2, 16), segments="window_channel", n_windows=4, **kw)


def _tensor(model: Recorded, **kw: object) -> object:
    return torchlime.explain(model, torch.rand(2, 6), torch.arange(6).view(1, 6), **kw)


@pytest.mark.parametrize(
    "door, width",
    [(_tensor, 6), (_image, 192), (_tokens, 8), (_series, 32)],
    ids=["explain", "image", "tokens", "series"],
)
def test_every_door_refuses_absurd_n_samples_before_the_model_runs(door, width):
    model = Recorded(width)
    with pytest.raises(SizeError, match=r"^`n_samples`=1000000000000 needs \d+\.\d TiB for the outputs and the fit "):
        door(model, n_samples=HUGE)
    assert model.calls == 0
    with pytest.raises(ValueError, match=r"S=1000000000000, F=\d+, T=1\), more than this machine's .* of memory"):
        door(model, n_samples=HUGE, return_samples=True)  # a SizeError is a ValueError
    assert model.calls == 0


def test_kept_samples_and_named_targets_count():
    model = Recorded(6)
    with pytest.raises(SizeError, match=r"for masks, outputs, weights and the fit \(B=2, S=1000000000000, F=6, T=2\)"):
        _tensor(model, n_samples=HUGE, return_samples=True, target=[[0, 2]])  # the same two classes for both
    with pytest.raises(SizeError, match=r"T=1\)"):
        _tensor(model, n_samples=HUGE, target=[0, 2])  # one class per input
    x = torch.rand(2, 6)
    with pytest.raises(SizeError, match=r"T=3\)") as info:
        torchlime.explain(model, x, torch.arange(6).view(1, 6), n_samples=HUGE, target=torch.zeros(2, 3).long())
    assert info.value.argument == "n_samples" and info.value.value == HUGE and info.value.needed > info.value.limit
    assert model.calls == 0


def test_features_that_dominate_are_named(monkeypatch):
    monkeypatch.setattr(sizes, "memory_limit", lambda device: (2**20, "a 1.0 MiB device"))
    model = Recorded(1024)
    x, features = torch.rand(1, 1024), torch.arange(1024).view(1, 1024)
    with pytest.raises(
        SizeError, match=r"^the number of features F=1024 needs 8\.0 MiB .* more than a 1\.0 MiB device"
    ):
        torchlime.explain(model, x, features, n_samples=16)
    assert model.calls == 0


def test_the_bytes_and_the_limit(monkeypatch):
    b, s, f, t = 2, 1000, 10, 3
    needed = b * s * t * 4 + b * f * (f + t) * 8
    monkeypatch.setattr(sizes, "memory_limit", lambda device: (needed, "the test's limit"))
    check_sizes(b, s, f, t, device=torch.device("cpu"))  # exactly the limit: allowed
    with pytest.raises(SizeError, match=rf"needs {format_bytes(needed + b * s * t * 4)}"):
        check_sizes(b, s, f, t, device=torch.device("cpu"), score_bytes=8)
    with pytest.raises(SizeError, match=r"^`target` with T=5000 targets per input needs .*; explain fewer targets"):
        check_sizes(1, 10, 2, 5000, device=torch.device("cpu"))
    with pytest.raises(SizeError, match=r"^`num_samples`=12 needs .*; use fewer samples or explain fewer inputs"):
        check_sizes(b, s, f, t, device=torch.device("cpu"), keep_samples=True, argument="num_samples", value=12)
    monkeypatch.setattr(sizes, "memory_limit", lambda device: None)  # not known: the allocator decides
    check_sizes(1, HUGE, 10, device=torch.device("cpu"))


def test_memory_limit_of_cuda_meta_and_the_host(monkeypatch):
    assert memory_limit(torch.device("meta")) is None
    host = memory_limit(torch.device("cpu"))
    assert host is not None and host[0] > 2**26 and host[1].startswith("this machine's ")
    props = types.SimpleNamespace(total_memory=80 * 2**30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    assert memory_limit(torch.device("cuda:1")) == (80 * 2**30, "cuda:1's 80.0 GiB of memory")


def test_physical_memory_without_sysconf(monkeypatch):
    def missing(name: str) -> int:
        raise ValueError(f"unrecognized configuration name {name!r}")

    monkeypatch.setattr(sizes.os, "sysconf", missing)
    monkeypatch.setitem(__import__("sys").modules, "psutil", None)  # psutil absent too
    sizes._physical_memory.cache_clear()
    try:
        assert sizes._physical_memory() is None and memory_limit(torch.device("cpu")) is None
    finally:
        sizes._physical_memory.cache_clear()


def test_format_bytes():
    assert [format_bytes(n) for n in (0, 1023, 1024, 3 * 2**30 // 2, 4 * 10**12, 2**60)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 GiB",
        "3.6 TiB",
        "1024.0 PiB",
    ]


def test_a_call_that_fits_is_unchanged(monkeypatch):
    x, features = torch.rand(2, 6), torch.arange(6).view(1, 6)
    model = Recorded(6)
    before = torchlime.explain(model, x, features, n_samples=64, generator=0).coef
    monkeypatch.setattr(sizes, "memory_limit", lambda device: None)  # no check at all
    assert torch.equal(torchlime.explain(model, x, features, n_samples=64, generator=0).coef, before)
