"""``stages.fixed_cost``: profiler ranges only under a profiler, and the cache of shape-only work."""

from __future__ import annotations

import gc
import threading

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torchlime.image import explain_image
from torchlime.stages.fixed_cost import ShapeCache, derived, profiling, record_function

from tests.helpers import grid_labels
from tests.helpers.ops import count_ops

STAGES = {"torchlime::prepare", "torchlime::plan", "torchlime::masks", "torchlime::model", "torchlime::fit"}


class Tiny(torch.nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


def _call(model=None):
    image = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    labels = grid_labels(32, 32, 4, 4)
    return explain_image(model or Tiny(), image, segments=labels, target=0, n_samples=64, batch_size=16)


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
def test_no_profiler_range_without_a_profiler():
    assert not profiling()
    with count_ops() as counter:
        _call()
    assert counter.n_ranges == 0, dict(counter.ranges)


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
def test_the_stages_ranges_under_a_profiler():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        assert profiling()
        with count_ops() as counter:
            _call()
    assert STAGES <= set(counter.ranges), dict(counter.ranges)
    assert STAGES <= {e.name for e in prof.events()}
    assert not profiling()


def test_record_function_is_the_profilers_range_when_one_listens():
    with count_ops() as counter:
        with record_function("torchlime::test"):
            pass
    assert counter.n_ranges == 0
    with profile(activities=[ProfilerActivity.CPU]), count_ops() as counter:
        with record_function("torchlime::test"):
            pass
    assert dict(counter.ranges) == {"torchlime::test": 1}


def test_the_cache_keeps_computes_once_and_forgets_the_dead():
    cache: ShapeCache[list[int]] = ShapeCache(size=3)
    calls = []

    def make(v):
        def f():
            calls.append(v)
            return [v]

        return f

    owner = torch.zeros(1)
    first = cache.get(owner, "a", make(1))
    assert cache.get(owner, "a", make(2)) is first and calls == [1]
    assert cache.get(None, "a", make(3)) == [3]  # no owner: another entry
    other = torch.zeros(1)
    assert cache.get(other, "a", make(4)) == [4]  # another owner, the same key: another entry
    assert len(cache) == 3
    del other
    gc.collect()
    assert len(cache) == 2  # its entry died with it
    for k in range(5):  # least recently used first out, at most 3
        cache.get(None, k, make(10 + k))
    assert len(cache) == 3
    assert cache.get(owner, "a", make(5)) == [5]  # evicted: computed again


def test_an_owner_dying_while_the_cache_is_locked_does_not_deadlock():
    """The garbage collector may free an owner (and run its weak reference's callback) inside ``find`` or
    ``put`` of the same thread, which hold the lock: the callback must not wait for it."""
    cache: ShapeCache[int] = ShapeCache()
    owner = torch.zeros(1)
    cache.put(owner, "k", 1)

    def die_under_the_lock():
        nonlocal owner
        with cache._lock:
            del owner  # the callback runs here, in this thread, with the lock held

    worker = threading.Thread(target=die_under_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the dead owner's callback waited for the lock its own thread holds"
    assert len(cache) == 0  # forgotten at the next use


def test_the_cache_under_two_threads():
    cache: ShapeCache[int] = ShapeCache(size=8)
    owners = [torch.zeros(1) for _ in range(4)]
    errors = []

    def work(seed):
        try:
            for i in range(2000):
                k = (seed * 7 + i) % 12
                owner = owners[k % 4]
                assert cache.get(owner, k, lambda k=k: k * k) == k * k
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) <= 8


def _same(a, b):
    """Two explanations equal bit for bit, each with its own tensors."""
    for name in ("coef", "intercept", "score", "local_pred", "target", "features", "n_features"):
        x, y = getattr(a, name), getattr(b, name)
        assert torch.equal(x, y) and x.dtype == y.dtype, name
        assert x.data_ptr() != y.data_ptr() or x.numel() == 0, name  # a copy, not the same memory


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
@pytest.mark.parametrize("segments", ["given", "grid"])
def test_a_cached_call_equals_the_first(segments):
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    seg = grid_labels(32, 32, 4, 4) if segments == "given" else "grid"

    def call():
        return explain_image(Tiny(), images, segments=seg, target=0, n_samples=48, batch_size=16, n_segments=16)

    first, second = call(), call()
    _same(first, second)
    with count_ops() as counter:
        call()
    assert "sort" not in counter.ops  # the map is not relabelled again


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
def test_a_map_written_in_place_is_relabelled_again():
    x = torch.rand(2, 12, generator=torch.Generator().manual_seed(4))
    feats = torch.arange(12).view(1, 12) // 2  # 6 features

    def call():
        from torchlime import explain

        return explain(lambda v: v.sum(1, keepdim=True), x, feats, n_samples=32)

    assert call().coef.shape[-1] == 6
    feats.floor_divide_(2)  # 3 features now
    again = call()
    assert again.coef.shape[-1] == 3 and torch.equal(again.features[0], torch.arange(12) // 4)
    x[0, 0] = float("nan")  # the inputs are still checked when the map is known
    with pytest.raises(ValueError, match="finite"):
        call()


def test_inference_tensors_are_not_kept_by_their_values():
    """An inference tensor has no version: a map made in inference mode is relabelled every call."""
    from torchlime import explain

    x = torch.rand(2, 12, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        feats = torch.arange(12).view(1, 12) // 2
        first = explain(lambda v: v.sum(1, keepdim=True), x, feats, n_samples=32)
        feats.floor_divide_(3)  # 2 features now, unseen by any version counter
        again = explain(lambda v: v.sum(1, keepdim=True), x, feats, n_samples=32)
    assert first.coef.shape[-1] == 6 and again.coef.shape[-1] == 2


def test_derived_results_are_kept_while_their_tensors_live_unchanged():
    counts, rows = torch.tensor([3, 2]), torch.tensor([0, 1, 1])
    made = []

    def take():
        made.append(1)
        return counts[rows]

    first = derived("test-take", take, rows, counts)
    assert derived("test-take", take, rows, counts) is first and len(made) == 1  # kept
    assert derived("test-other", take, rows, counts) is not first  # another function of the same tensors
    counts.add_(1)  # a write into a tensor the entry holds: made again, from the new values
    assert derived("test-take", take, rows, counts).tolist() == [4, 3, 3] and len(made) == 3
    with torch.inference_mode():
        frozen = torch.tensor([1, 2])
    assert derived("test-take", lambda: frozen * 2, frozen) is not derived("test-take", lambda: frozen * 2, frozen)
