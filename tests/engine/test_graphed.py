"""``accelerate="cuda_graphs"`` on the CPU: the capture and replay plumbing, through a recording stand-in.

``tests.helpers.graphs.RecordingBackend`` captures by running the stages' Python once and replays by running
it again on the same (refreshed) static buffers, so these tests check what does not need a GPU: the key (a
new shape or setting captures anew, the same replays), the refresh of the static inputs (a later call's
explanation equals its eager call's bits), the returned tensors not being the graph's buffers, every
fallback reason, the cache's weak key and its use from two threads. ``test_graphed_cuda.py`` replays real
CUDA graphs.
"""

from __future__ import annotations

import gc
import re
import threading
from typing import Iterator

import pytest
import torch
from torch import nn

import torchlime
from torchlime.engine import graphed
from torchlime.engine.run_record import RunRecord
from torchlime.engine.signature import MAX_ENTRIES, Unwalkable, walk
from torchlime.stages.fixed_cost import columns
from torchlime.stages.weighting import ExponentialKernel
from torchlime.targets import Similarity

from tests.helpers.graphs import RecordingBackend

FIELDS = ("coef", "intercept", "score", "local_pred", "target")


@pytest.fixture
def backend() -> Iterator[RecordingBackend]:
    """The stand-in, installed for one test, with an empty cache."""
    rec = RecordingBackend()
    old = graphed.set_backend(rec)
    graphed.GRAPHS.clear()
    yield rec
    graphed.set_backend(old)
    graphed.GRAPHS.clear()


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))


def _image(model: nn.Module, x: torch.Tensor, seed: int, **kw: object) -> torchlime.Explanation:
    opts: dict[str, object] = {"segments": "grid", "n_segments": 16, "n_samples": 48, "generator": seed, **kw}
    return torchlime.explain_image(model, x, **opts)  # type: ignore[arg-type]


def _same(a: torchlime.Explanation, b: torchlime.Explanation) -> None:
    for name in FIELDS:
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_the_second_call_captures_and_later_calls_replay_the_eager_bits(backend: RecordingBackend) -> None:
    net = _net()
    torch.manual_seed(1)
    modes = []
    for i in range(4):  # a new input and seed every call: the static buffers must be refreshed
        x = torch.rand(2, 3, 16, 16)
        fast = _image(net, x, i, accelerate="cuda_graphs", return_samples=True)
        _same(fast, _image(net, x, i, return_samples=True))
        modes.append(fast.run.cuda_graph)
    assert modes == ["warm-up", "captured", "replayed", "replayed"]
    assert (backend.captures, backend.replays) == (1, 3)


def test_returned_tensors_are_not_the_graphs_buffers(backend: RecordingBackend) -> None:
    net, x = _net(), torch.rand(1, 3, 16, 16)
    runs = [_image(net, x + i, i, accelerate="cuda_graphs", return_samples=True) for i in range(3)]
    kept = [(r.outputs.clone(), r.samples.clone(), r.coef.clone()) for r in runs]
    _image(net, x - 1, 9, accelerate="cuda_graphs", return_samples=True)  # another replay
    for r, (outputs, samples, coef) in zip(runs, kept):
        assert torch.equal(r.outputs, outputs) and torch.equal(r.samples, samples) and torch.equal(r.coef, coef)
    assert [r.run.cuda_graph for r in runs] == ["warm-up", "captured", "replayed"]


def test_a_new_shape_or_setting_captures_anew(backend: RecordingBackend) -> None:
    net = _net()
    calls = [
        (torch.rand(1, 3, 16, 16), {}),
        (torch.rand(2, 3, 20, 20), {}),  # another batch and image size
        (torch.rand(1, 3, 16, 16), {"n_samples": 32}),  # another N
        (torch.rand(1, 3, 16, 16), {"target": 2}),  # given labels are baked into the graph
        (torch.rand(1, 3, 16, 16), {"batch_size": 16}),  # another chunk
    ]
    for x, kw in calls:
        modes = [_image(net, x, 0, accelerate="cuda_graphs", **kw).run.cuda_graph for _ in range(3)]
        assert modes == ["warm-up", "captured", "replayed"], kw
    assert backend.captures == len(calls)
    assert len(graphed.GRAPHS) == len(calls)


def test_the_weights_are_read_at_each_replay(backend: RecordingBackend) -> None:
    net, x = _net(), torch.rand(1, 3, 16, 16)
    for step in range(3):  # a training step in place between calls (the probe's case)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.1 * (step + 1))
        _same(_image(net, x, 0, accelerate="cuda_graphs"), _image(net, x, 0))


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"n_samples": "auto"}, "n_samples='auto' chooses its rounds on the host"),
        ({"kernel": ExponentialKernel(width="auto")}, "width='auto' reads the samples on the host"),
        ({"segments": None}, r"segments made from the data \(slic\)"),
        ({"batch_size": "measure"}, "batch_size='measure' times its chunks on the host"),
    ],
)
def test_calls_that_need_the_host_run_eagerly_and_say_why(
    backend: RecordingBackend, kw: dict[str, object], why: str
) -> None:
    net, x = _net(), torch.rand(1, 3, 16, 16)
    exp = _image(net, x, 0, accelerate="cuda_graphs", **kw)
    assert exp.run.cuda_graph is not None and exp.run.cuda_graph.startswith("eager: ")
    assert re.search(why, exp.run.cuda_graph)
    assert len(graphed.GRAPHS) == 0  # no entry: its next call runs eagerly too


def test_a_structured_target_runs_eagerly(backend: RecordingBackend) -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(8, 4))
    x = torch.rand(2, 8)
    opts = dict(target=Similarity(torch.rand(1, 4)), n_samples=32, accelerate="cuda_graphs")
    exp = torchlime.explain(net, x, torch.arange(8).view(1, 8), **opts)  # type: ignore[arg-type]
    assert exp.run.cuda_graph == "eager: a structured target (Similarity) binds to the model's output on the host"


def test_inputs_off_the_backends_device_run_eagerly() -> None:
    old = graphed.set_backend(RecordingBackend(devices=("cuda",)))
    try:
        exp = _image(_net(), torch.rand(1, 3, 16, 16), 0, accelerate="cuda_graphs")
    finally:
        graphed.set_backend(old)
    assert exp.run.cuda_graph == "eager: inputs on cpu: CUDA graphs need a CUDA device"
    assert _image(_net(), torch.rand(1, 3, 16, 16), 0).run.cuda_graph is None  # only with the option


class Failing(RecordingBackend):
    """A backend whose capture raises, like a CUDA capture around a host synchronisation."""

    def capture(self, fn, device):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
        self.captures += 1
        raise RuntimeError("operation not permitted when stream is capturing")


def test_a_capture_that_raises_leaves_its_key_eager() -> None:
    failing = Failing()
    old = graphed.set_backend(failing)
    graphed.GRAPHS.clear()
    try:
        net, x = _net(), torch.rand(1, 3, 16, 16)
        runs = [_image(net, x, i, accelerate="cuda_graphs") for i in range(3)]
        for i, r in enumerate(runs):
            _same(r, _image(net, x, i))
    finally:
        graphed.set_backend(old)
        graphed.GRAPHS.clear()
    reason = "eager: the capture raised RuntimeError: operation not permitted when stream is capturing"
    assert [r.run.cuda_graph for r in runs] == ["warm-up", reason, reason]
    assert failing.captures == 1  # not tried again


def test_a_changed_tensor_the_caller_shares_with_the_graph_runs_eagerly(backend: RecordingBackend) -> None:
    net, x = _net(), torch.rand(1, 3, 16, 16)

    def fill(level: torch.Tensor):  # noqa: ANN202
        return lambda images: images * 0 + level  # a new closure over a new tensor every call

    runs = [_image(net, x, 0, accelerate="cuda_graphs", baseline=fill(torch.tensor(0.1 * i))) for i in range(6)]
    changed = "eager: a tensor the graph reads is the caller's own and changed between calls"
    # captured anew once, then given up for good
    assert [r.run.cuda_graph for r in runs] == ["warm-up", "captured", changed, "captured", changed, changed]
    for i, r in enumerate(runs):
        _same(r, _image(net, x, 0, baseline=fill(torch.tensor(0.1 * i))))
    assert backend.captures == 2


def test_the_record_keeps_the_mode_in_meta(backend: RecordingBackend) -> None:
    exp = _image(_net(), torch.rand(1, 3, 16, 16), 0, accelerate="cuda_graphs")
    assert exp.meta["cuda_graph"] == "warm-up"
    assert RunRecord.from_plain(exp.meta) == exp.run


def test_graphs_are_weak_on_the_model(backend: RecordingBackend) -> None:
    net, x = _net(), torch.rand(1, 3, 16, 16)
    for i in range(3):
        _image(net, x, i, accelerate="cuda_graphs")
    assert len(graphed.GRAPHS) == 1
    del net
    gc.collect()
    assert len(graphed.GRAPHS) == 0


def test_two_threads_share_one_graph(backend: RecordingBackend) -> None:
    net = _net()
    torch.manual_seed(2)
    xs = [torch.rand(1, 3, 16, 16) for _ in range(6)]
    _image(net, xs[0], 0, accelerate="cuda_graphs")  # the warm-up
    results: dict[int, torchlime.Explanation] = {}
    errors: list[BaseException] = []

    def work(ids: range) -> None:
        try:
            for i in ids:
                results[i] = _image(net, xs[i], i, accelerate="cuda_graphs")
        except BaseException as err:  # noqa: BLE001 (reported by the main thread)
            errors.append(err)

    threads = [threading.Thread(target=work, args=(range(k, 6, 2),)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert backend.captures == 1
    for i, exp in results.items():
        _same(exp, _image(net, xs[i], i))


class Slotted:
    """An object whose state is in slots (no instance dict)."""

    __slots__ = ("level", "values")

    def __init__(self, values: torch.Tensor, level: int) -> None:
        self.values, self.level = values, level


def test_walk_reads_slots_closures_and_refuses_huge_plans() -> None:
    values = torch.zeros(3)

    def hook() -> torch.Tensor:
        return values

    sig, tensors = walk({"slotted": Slotted(torch.ones(2), 4), "hook": hook})
    assert [t.shape for t in tensors] == [torch.Size([2]), torch.Size([3])]
    assert 4 in sig and walk({"slotted": Slotted(torch.ones(2), 5), "hook": hook})[0] != sig  # a host value
    with pytest.raises(Unwalkable, match="more than"):
        walk(list(range(MAX_ENTRIES + 10)))


def test_a_capture_keeps_the_cached_tensors_it_reads(backend: RecordingBackend) -> None:
    """A CUDA graph reads cached tensors' memory at every replay: the entry keeps them past their cache."""
    net, x = _net(), torch.rand(2, 3, 16, 16)
    for i in range(2):
        _image(net, x, i, accelerate="cuda_graphs")
    (entry,) = [value for _, value, _ in graphed.GRAPHS._entries.values()]
    indices = columns(2, x.device)  # the passes' 0..B-1, handed out by a cache during the capture
    assert any(kept is indices for kept in entry.kept)
