"""The chunk-size policy (``torchlime.stages.forward.chunking``): a rule by default (the same chunks, and
bits, on every call), a timed search on request (cached; its rows run again at the chosen size), bounded
by memory, and coefficients that never depend on it. Timings come from a fake clock, so the tests are
exact."""

from __future__ import annotations

import pytest
import torch

from torchlime import Accelerated, explain
from torchlime.stages.forward import chunking

from tests.helpers import grid_labels


class Clocked(torch.nn.Module):
    """A model whose calls cost ``cost(n)`` seconds on a fake clock; records every size it sees."""

    def __init__(self, clock: list, cost=lambda n: 0.002 + 1e-4 * n + (n > 64) * 1e-4 * n) -> None:
        super().__init__()
        self.clock, self.cost = clock, cost
        self.lin = torch.nn.Linear(16, 3)
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(x.shape[0])
        self.clock[0] += self.cost(x.shape[0])
        return self.lin(x.flatten(1))


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    chunking.clear_cache()
    monkeypatch.setattr(chunking.time, "perf_counter", lambda: now[0])
    yield now
    chunking.clear_cache()


def data(b=2):
    return torch.rand(b, 1, 4, 4, generator=torch.Generator().manual_seed(0)), grid_labels(4, 4, 2, 4).view(1, 1, 4, 4)


def test_measures_then_keeps_the_fastest_size(clock):
    model = Clocked(clock)
    x, f = data()
    exp = explain(model, x, f, n_samples=2000, batch_size="measure")
    # each size warms up once and is timed three times, doubling until two doublings in a row do not
    # lower the time per row by > 2 % (128 and 256 are slower per row than 64)
    assert model.sizes[:20] == [4] * 4 + [8] * 4 + [16] * 4 + [32] * 4 + [64] * 4
    assert model.sizes[20:28] == [128] * 4 + [256] * 4 and set(model.sizes[28:-1]) == {64}
    measured = 4 * (4 + 8 + 16 + 32 + 64 + 128 + 256)
    assert sum(model.sizes) == 2 * 2000 + measured  # measured rows run again at 64; every kept row once
    assert exp.run.batch_size == 64
    model.sizes.clear()
    again = explain(model, x, f, n_samples=2000, batch_size="measure")  # cached: no measurement
    assert set(model.sizes[:-1]) == {64}
    assert torch.equal(again.coef, exp.coef)  # measured rows never reach the result


def test_smallest_size_within_two_percent_of_the_fastest(clock):
    model = Clocked(clock, cost=lambda n: 1e-3 * n + (0.0 if n >= 16 else 5e-3))  # flat from 16 on
    x, f = data()
    explain(model, x, f, n_samples=500, batch_size="measure")
    assert chunking._CACHE[next(iter(chunking._CACHE))].best == 16


def test_one_disturbed_timing_does_not_choose_the_size(clock):
    """A busy machine adds time to some calls: the fastest of a size's timed calls counts, so a
    single slow call of 8, 16 and 32 (the machine busy elsewhere) does not end the search at 4."""
    seen: dict[int, int] = {}

    def cost(n: int) -> float:
        seen[n] = seen.get(n, 0) + 1
        return 0.002 + 1e-4 * n + (n > 64) * 1e-4 * n + (0.05 if n in (8, 16, 32) and seen[n] == 2 else 0.0)

    model = Clocked(clock, cost=cost)
    x, f = data()
    exp = explain(model, x, f, n_samples=2000, batch_size="measure")
    assert exp.run.batch_size == 64


def test_measured_calls_equal_the_fixed_chosen_size_bit_for_bit(clock):
    model = Clocked(clock)
    x, f = data(1)
    first = explain(model, x, f, n_samples=40, batch_size="measure")
    later = explain(model, x, f, n_samples=40, batch_size="measure")
    fixed = explain(model, x, f, n_samples=40, batch_size=first.run.batch_size)
    assert torch.equal(first.coef, later.coef) and torch.equal(first.coef, fixed.coef)


def test_default_rule_no_timing_the_same_chunks_every_call(clock):
    x, f = data()
    sizes = []
    for _ in range(2):
        chunking.clear_cache()  # whatever was cached: the rule does not read the cache
        model = Clocked(clock)
        exp = explain(model, x, f, n_samples=3000)
        sizes.append(model.sizes)
    # 16 float32 values a row: 16 MiB holds far more rows than MAX_CHUNK, so 6000 rows in 2 calls
    assert sizes[0] == sizes[1] == [chunking.MAX_CHUNK, 6000 - chunking.MAX_CHUNK]
    assert exp.run.batch_size == chunking.MAX_CHUNK and not chunking._CACHE[next(iter(chunking._CACHE))].per_row


def test_default_rule_bounds_a_chunk_by_its_input_bytes():
    assert chunking.row_bytes(((3, 224, 224), "torch.float32", False, True)) == 3 * 224 * 224 * 4
    assert chunking.row_bytes(("tokens", 128)) == 128 * 4
    assert chunking.row_bytes(((4,), "torch.float64")) == 32
    big = chunking.ChunkPlan(lambda v: v, ((3, 224, 224), "torch.float32"), torch.device("cpu"), None)
    assert big.next_size(10_000) == (16, "run")  # 16 MiB / 588 KiB = 27 -> a power of two
    tiny = chunking.ChunkPlan(lambda v: v, ((4,), "torch.float64"), torch.device("cpu"), None)
    assert tiny.next_size(5001) == (chunking.MAX_CHUNK, "run") and tiny.next_size(5) == (5, "run")


def test_a_tabular_first_call_makes_as_many_model_calls_as_its_rows_need():
    """lime's iris scenario: 5000 samples of 4 columns through a function (a forest's predict_proba)."""
    calls = []

    def forest(rows):
        calls.append(rows.shape[0])
        return torch.stack((rows.sum(1), -rows.sum(1)), 1)

    x = torch.rand(1, 4, dtype=torch.float64)
    chunking.clear_cache()
    first = explain(forest, x, torch.arange(4).view(1, 4), n_samples=5000, target=0)
    assert calls == [4096, 5000 - 4096]
    later = explain(forest, x, torch.arange(4).view(1, 4), n_samples=5000, target=0)
    assert torch.equal(first.coef, later.coef)


@pytest.mark.parametrize("value", [0, -3, 2.5, "fast", True])
def test_bad_batch_size_is_refused_by_name(value):
    x, f = data()
    with pytest.raises((TypeError, ValueError), match="`batch_size`"):
        explain(torch.nn.Flatten(), x, f, n_samples=10, batch_size=value)


def test_coefficients_do_not_depend_on_the_chunk(clock):
    model = Clocked(clock)
    x, f = data(3)
    runs = [explain(model, x, f, n_samples=700, batch_size=b, return_samples=True) for b in (1, 7, 64, 2100)]
    runs.append(explain(model, x, f, n_samples=700, return_samples=True))  # the measured sizes
    for r in runs[1:]:  # the same masks; outputs and coefficients up to the model's own batch effects
        assert torch.equal(r.samples, runs[0].samples)
        torch.testing.assert_close(r.outputs, runs[0].outputs, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(r.coef, runs[0].coef, rtol=1e-5, atol=1e-6)


def test_fixed_sizes_are_kept(clock):
    model = Clocked(clock)
    x, f = data()
    explain(model, x, f, n_samples=100, batch_size=30)
    assert model.sizes == [30] * 6 + [20]
    inner = Clocked(clock)
    explain(Accelerated(inner, chunk_size=16), x, f, n_samples=100)
    assert set(inner.sizes) <= {16, 8}


class Fails(torch.nn.Module):
    """Raises ``error`` for chunks larger than ``limit`` rows."""

    def __init__(self, limit: int, error: Exception) -> None:
        super().__init__()
        self.limit, self.error = limit, error
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(16, 3)
        self.sizes: list[int] = []

    def forward(self, x):
        self.sizes.append(x.shape[0])
        if x.shape[0] > self.limit:
            raise self.error
        return self.lin(x.flatten(1))


def test_device_out_of_memory_halves_and_keeps_finished_rows():
    x, f = data()
    plain = explain(Fails(10_000, RuntimeError()), x, f, n_samples=200, batch_size=64)
    model = Fails(20, torch.OutOfMemoryError("fake: out of memory"))
    with pytest.warns(RuntimeWarning) as record:
        exp = explain(model, x, f, n_samples=200, batch_size=64)
    assert [str(w.message) for w in record][:2] == [
        "out of memory with a chunk of 64 samples; retrying with 32 (finished samples are kept)",
        "out of memory with a chunk of 32 samples; retrying with 16 (finished samples are kept)",
    ]
    assert model.sizes[:3] == [64, 32, 16] and sum(s for s in model.sizes if s <= 20) == 400
    torch.testing.assert_close(exp.coef, plain.coef)


class OutOfMemoryAbove(Clocked):
    """A ``Clocked`` model (cheaper per row the larger the chunk: the search keeps doubling) that runs
    out of device memory above ``limit`` rows; it stops a runaway search after ``max_calls`` calls."""

    def __init__(self, clock: list, limit: int, max_calls: int = 500) -> None:
        super().__init__(clock, cost=lambda n: 0.01 + 1e-5 * n)
        self.limit, self.max_calls = limit, max_calls

    def forward(self, x):
        if len(self.sizes) >= self.max_calls:
            raise AssertionError(f"the chunk-size search never ends: {self.max_calls} calls, sizes {self.sizes[-8:]}")
        if x.shape[0] > self.limit:
            self.sizes.append(x.shape[0])
            raise torch.OutOfMemoryError("CUDA out of memory")
        return super().forward(x)


def test_out_of_memory_while_measuring_ends_the_search(clock):
    """The search was doubling (4, 8, ..., 64, 128) when 128 rows ran out of memory: the search ends
    at 64 at most, with one warning, instead of trying 128 again and again."""
    model = OutOfMemoryAbove(clock, limit=100)
    x, f = data()
    with pytest.warns(RuntimeWarning) as record:
        exp = explain(model, x, f, n_samples=2000, batch_size="measure")
    assert [str(w.message) for w in record] == [
        "out of memory with a chunk of 128 samples; retrying with 64 (finished samples are kept)"
    ]
    assert model.sizes.count(128) == 1 and max(s for s in model.sizes if s != 128) == 64
    assert len(model.sizes) < 120 and exp.run.batch_size == 64
    entry = next(iter(chunking._CACHE.values()))
    assert entry.best == 64 and entry.ceiling == 64
    model.sizes.clear()
    explain(model, x, f, n_samples=2000, batch_size="measure")  # cached: no measurement, no out-of-memory
    assert set(model.sizes[:-1]) == {64}


def test_candidate_sizes_stay_under_the_ceiling(clock):
    plan = chunking.ChunkPlan(Clocked(clock), (), torch.device("cpu"), None)
    plan.entry.per_row.update({4: 1.0, 8: 0.5, 16: 0.25})
    assert plan._candidate() == 32
    plan.entry.ceiling = 16
    assert plan._candidate() <= 16


def test_other_errors_are_never_taken_for_out_of_memory():
    x, f = data()
    model = Fails(0, RuntimeError("DefaultCPUAllocator: not enough memory: you tried to allocate ... out of memory"))
    with pytest.raises(RuntimeError, match="DefaultCPUAllocator"):
        explain(model, x, f, n_samples=50, batch_size=8)
    assert model.sizes == [8]  # re-raised at once, no halving


@pytest.mark.parametrize(
    "value, error, match",
    [
        (
            "half",
            TypeError,
            r"`max_memory` must be None, a number of bytes \(int\) or a fraction in \(0, 1\] "
            r"\(float\), got str 'half'",
        ),
        (0, ValueError, r"`max_memory` in bytes must be >= 1, got 0"),
        (1.5, ValueError, r"`max_memory` as a fraction must be in \(0, 1\], got 1.5"),
        (True, TypeError, r"`max_memory` must be None"),
    ],
)
def test_max_memory_errors(value, error, match):
    x, f = data()
    with pytest.raises(error, match=match):
        explain(torch.nn.Flatten(), x, f, max_memory=value)


@pytest.mark.cuda
def test_peak_memory_within_the_budget_on_cuda(cuda):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 10),
    ).to(cuda)
    images = torch.rand(4, 3, 128, 128, device=cuda)
    chunking.clear_cache()
    cap = 2 << 30
    exp = explain(
        model, images, grid_labels(128, 128, 8, 8).view(1, 1, 128, 128).to(cuda), n_samples=2000, max_memory=cap
    )
    assert 0 < exp.run.peak_memory <= cap


@pytest.mark.cuda
def test_default_rule_on_cuda_probes_then_runs_the_same_chunks_every_call(cuda):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(5)
    )
    model = net.to(cuda)
    model(torch.rand(1, 3, 32, 32, device=cuda))
    sizes: list[list[int]] = []
    hook = model.register_forward_pre_hook(lambda m, a: sizes[-1].append(a[0].shape[0]))
    images = torch.rand(2, 3, 32, 32, device=cuda)
    f = grid_labels(32, 32, 4, 4).view(1, 1, 32, 32).to(cuda)
    runs = []
    for forget in (True, True, False):  # a first call twice, then a later one (the probe remembered)
        if forget:
            chunking.clear_cache()
        sizes.append([])
        runs.append(explain(model, images, f, n_samples=6000))
    hook.remove()
    assert sizes[0] == sizes[1] and sizes[0][:2] == [chunking.PROBE] * 2  # warm-up, then measured
    assert sizes[2] == sizes[0][2:]  # no probe: the same kept chunks
    rest = sizes[0][2:-1]
    assert rest and len(set(rest)) == 1 and rest[0] & (rest[0] - 1) == 0 and rest[0] <= chunking.CUDA_MAX_ROWS
    assert torch.equal(runs[0].coef, runs[1].coef) and torch.equal(runs[0].coef, runs[2].coef)


@pytest.fixture
def fake_cuda(monkeypatch):
    """The CUDA memory API the chunk plan reads, faked: 80 GB free, a peak of ``peak[0]`` bytes per chunk row
    (more in the first chunk)."""
    peak = [17e6]
    sizes: list[int] = []
    cuda = torch.cuda
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (80 * 10**9, 80 * 10**9))
    for name in ("memory_reserved", "memory_allocated"):
        monkeypatch.setattr(cuda, name, lambda device=None: 0)
    for name in ("synchronize", "reset_peak_memory_stats"):
        monkeypatch.setattr(cuda, name, lambda device=None: None)
    # the first chunk also allocates 2 GB a row once (a library's workspace): measured, rows would look 100x heavier
    monkeypatch.setattr(
        cuda, "max_memory_allocated", lambda device=None: int((peak[0] + 2e9 * (len(sizes) == 1)) * sizes[-1])
    )
    chunking.clear_cache()
    yield peak, sizes
    chunking.clear_cache()


def _chunks(plan: chunking.ChunkPlan, n_rows: int, sizes: list[int]) -> list[tuple[int, str]]:
    """The (size, phase) of every chunk of a call of ``n_rows`` rows, rows of a non-"run" chunk run again."""
    seen, start = [], 0
    while start < n_rows:
        size, phase = plan.next_size(n_rows - start)
        sizes.append(size)
        with plan.run(size, phase):
            pass
        seen.append((size, phase))
        start += size if phase == "run" else 0
    return seen


def test_cuda_probe_runs_once_per_model_and_its_rows_again(fake_cuda):
    """The first call probes 16 rows twice (the second measures), then runs every row at the rule's size; a
    later call has the same chunks without the probes (so the same bits, and no synchronisation for them)."""
    peak, sizes = fake_cuda
    model, cuda = torch.nn.Identity(), torch.device("cuda")
    first = _chunks(chunking.ChunkPlan(model, ("t",), cuda, None), 2500, sizes)
    later = _chunks(chunking.ChunkPlan(model, ("t",), cuda, None), 2500, sizes)
    runs = [(1024, "run"), (1024, "run"), (452, "run")]  # 17 MB a row: the plain 1024-row cap
    probes = [(chunking.PROBE, "probe")] * 2  # the first warms up, the second measures
    assert first == [*probes, *runs] and later == runs
    peak[0] = 60e3  # another model (an audio CNN's light rows) is probed for itself
    other = _chunks(chunking.ChunkPlan(torch.nn.Flatten(), ("t",), cuda, None), 2500, sizes)
    assert other == [*probes, (2500, "run")]
    few = _chunks(chunking.ChunkPlan(torch.nn.ReLU(), ("t",), cuda, None), 10, sizes)
    assert few == [(10, "run")]  # a call of a few rows is one chunk, probed or not


def test_cuda_probe_and_rule_keep_under_the_out_of_memory_ceiling(fake_cuda, monkeypatch):
    """A probe that runs out of memory is retried smaller (not at 16 rows for ever), and a later call's
    chunks stay under the size that ran out of memory."""
    _, sizes = fake_cuda
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    model, cuda = torch.nn.Identity(), torch.device("cuda")
    plan = chunking.ChunkPlan(model, ("t",), cuda, None)
    assert plan.next_size(2500) == (chunking.PROBE, "probe")
    with pytest.warns(RuntimeWarning, match="out of memory with a chunk of 16 samples; retrying with 8"):
        plan.out_of_memory(chunking.PROBE)
    assert plan.next_size(2500) == (8, "probe")
    chunks = _chunks(plan, 2500, sizes)
    assert chunks[:2] == [(8, "probe")] * 2 and {s for s, _ in chunks[2:]} == {8, 4}  # never over 8 rows again
    other = torch.nn.Flatten()  # probed fine, then out of memory at the rule's 1024 rows
    first = chunking.ChunkPlan(other, ("t",), cuda, None)
    assert _chunks(first, 2500, sizes)[2] == (1024, "run")
    later = chunking.ChunkPlan(other, ("t",), cuda, None)
    with pytest.warns(RuntimeWarning, match="retrying with 512"):
        later.out_of_memory(1024)
    assert _chunks(later, 2500, sizes)[0] == (512, "run")
    assert _chunks(chunking.ChunkPlan(other, ("t",), cuda, None), 2500, sizes)[0] == (512, "run")


def test_run_rows_consumes_no_probe_row(fake_cuda):
    """``run_rows`` stores every row once, from its "run" chunk: the probe's outputs are dropped."""
    from torchlime.stages.forward.passes import run_rows

    _, sizes = fake_cuda
    seen, done = [], []
    plan = chunking.ChunkPlan(torch.nn.Identity(), ("t",), torch.device("cuda"), None)
    original = plan.next_size

    def next_size(remaining):
        size, phase = original(remaining)
        sizes.append(size)
        return size, phase

    plan.next_size = next_size  # type: ignore[method-assign]

    def model(x):
        seen.append(x.shape[0])
        return x

    run_rows(
        model,
        lambda a, b: torch.arange(a, b).float().unsqueeze(1),
        lambda o, x, a, b: done.append((a, b, o[:, 0].tolist())),
        40,
        plan,
        torch.device("cpu"),
        torch.float32,
    )
    assert seen == [chunking.PROBE, chunking.PROBE, 40]
    assert done == [(0, 40, [float(i) for i in range(40)])]


@pytest.mark.parametrize(
    ("row_peak", "budget", "rows"),
    [
        (17e6, None, 1024),  # an inception row: the plain cap
        (2**21, None, 1024),  # 2 MiB a row: 1024 rows peak at the light-row bytes
        (2**20, None, 2048),  # lighter: more rows, the chunk still within CUDA_LIGHT_BYTES
        (60e3, None, 8192),  # an audio CNN's row: the row cap
        (60e3, 2**27, 2048),  # the memory budget wins
        (17e6, 2**30, 32),  # a small budget bounds heavy rows too
        (0.0, None, 8192),  # a row that allocates nothing
    ],
)
def test_cuda_rule_gives_light_rows_larger_chunks(row_peak, budget, rows):
    assert chunking.cuda_rule(row_peak, budget) == rows
    assert rows * max(row_peak, 1) <= max(chunking.CUDA_LIGHT_BYTES, chunking.CUDA_MAX_CHUNK * row_peak)
