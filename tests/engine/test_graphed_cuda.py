"""``accelerate="cuda_graphs"`` on a GPU: replayed CUDA graphs give the eager call's bits (skipped without CUDA).

The CPU tests (``test_graphed.py``) check the key, the refresh and the fallbacks through a stand-in; these
check that a real ``torch.cuda.CUDAGraph`` of the stages after the plan replays the same kernels on the new
inputs: each call's explanation equals the eager call's bit for bit, the second call captures and later
ones replay (counted), a training step in place between calls is seen (the probe's case), and a model
that synchronises the host falls back with the capture's error.
"""

from __future__ import annotations

from typing import Iterator

import pytest
import torch
from torch import nn

import torchlime
from torchlime.accel import CudaGraphBackend, Replayable
from torchlime.engine import graphed

FIELDS = ("coef", "intercept", "score", "local_pred", "target")


class Counted:
    """A captured graph whose replays are counted."""

    def __init__(self, graph: Replayable, backend: Counting) -> None:
        self.graph, self.backend = graph, backend

    def replay(self) -> None:
        """Replay the graph (counted)."""
        self.backend.replays += 1
        self.graph.replay()


class Counting(CudaGraphBackend):
    """CUDA graphs, counting captures and replays."""

    def __init__(self) -> None:
        self.captures = 0
        self.replays = 0

    def capture(self, fn, device):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        self.captures += 1
        return Counted(super().capture(fn, device), self)


@pytest.fixture
def counting(cuda: torch.device) -> Iterator[Counting]:
    """The counting CUDA backend, installed for one test, with an empty cache."""
    backend = Counting()
    old = graphed.set_backend(backend)
    graphed.GRAPHS.clear()
    yield backend
    graphed.set_backend(old)
    graphed.GRAPHS.clear()


def _net(device: torch.device) -> nn.Module:
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)]
    return nn.Sequential(*layers).to(device)


def _image(model: nn.Module, x: torch.Tensor, seed: int, **kw: object) -> torchlime.Explanation:
    opts: dict[str, object] = {"segments": "grid", "n_segments": 49, "n_samples": 500, "generator": seed, **kw}
    return torchlime.explain_image(model, x, **opts)  # type: ignore[arg-type]


def _same(a: torchlime.Explanation, b: torchlime.Explanation) -> None:
    for name in FIELDS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_replays_give_the_eager_bits_and_the_second_call_captures(cuda: torch.device, counting: Counting) -> None:
    net = _net(cuda)
    torch.manual_seed(1)
    modes = []
    for i in range(5):
        x = torch.rand(2, 3, 32, 32, device=cuda)
        fast = _image(net, x, i, accelerate="cuda_graphs", return_samples=True)
        eager = _image(net, x, i, return_samples=True)
        _same(fast, eager)
        assert torch.equal(fast.outputs, eager.outputs) and torch.equal(fast.weights, eager.weights)
        modes.append(fast.run.cuda_graph)
    assert modes == ["warm-up", "captured", "replayed", "replayed", "replayed"]
    assert (counting.captures, counting.replays) == (1, 4)


def test_an_earlier_result_survives_later_replays(cuda: torch.device, counting: Counting) -> None:
    net, x = _net(cuda), torch.rand(1, 3, 32, 32, device=cuda)
    runs = [_image(net, x + 0.1 * i, i, accelerate="cuda_graphs", return_samples=True) for i in range(4)]
    for i, r in enumerate(runs):
        eager = _image(net, x + 0.1 * i, i, return_samples=True)
        _same(r, eager)
        assert torch.equal(r.outputs, eager.outputs)


def test_the_probe_sees_each_training_step(cuda: torch.device, counting: Counting) -> None:
    net = _net(cuda)
    probe_x = torch.rand(2, 3, 32, 32, device=cuda)
    grid = torch.arange(64, device=cuda).view(8, 8).repeat_interleave(4, 0).repeat_interleave(4, 1).view(1, 1, 32, 32)
    call = torchlime.Call(target=3, n_samples=300, generator=0)
    graphs = torchlime.Explainer(accelerate="cuda_graphs")
    fast = torchlime.ProbeExplainer(net, probe_x, grid, explainer=graphs, call=call, every=1)
    eager = torchlime.ProbeExplainer(net, probe_x, grid, explainer=torchlime.Explainer(), call=call, every=1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(4):
        loss = net(torch.rand(4, 3, 32, 32, device=cuda)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()  # the weights change in place: the same memory the graph reads
        _same(fast.explain(step), eager.explain(step))
    assert counting.captures == 1 and counting.replays >= 2


class Syncing(nn.Module):
    """A model that reads a value on the host in its forward: no graph can hold it."""

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.body = _net(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.mean().item()) + 1.0
        return self.body(x) * scale


def test_a_model_that_syncs_falls_back_with_the_capture_error(cuda: torch.device, counting: Counting) -> None:
    model, x = Syncing(cuda), torch.rand(1, 3, 32, 32, device=cuda)
    runs = [_image(model, x, i, accelerate="cuda_graphs") for i in range(3)]
    assert runs[0].run.cuda_graph == "warm-up"
    for r in runs[1:]:
        assert r.run.cuda_graph is not None and r.run.cuda_graph.startswith("eager: the capture raised")
    for i, r in enumerate(runs):
        _same(r, _image(model, x, i))
    assert counting.captures == 1
