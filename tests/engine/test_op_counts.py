"""The operator counter of ``tests/helpers/ops.py``: what it counts, what it leaves out, how it splits a call.

The counts are exact on the CPU, so every assertion here is an equality: the counter itself is tested,
not a call's budget.
"""

from __future__ import annotations

import pytest
import torch
from torch.profiler import record_function

from torchlime import _backend
from torchlime.image import explain_image
from torchlime.stages import sampling

from tests.helpers import grid_labels
from tests.helpers.ops import OpCounter, call_ops, count_ops, paused, unpause


def test_counts_a_small_function_exactly():
    """Operators by name; views, metadata, allocations and tensors from Python data left out; ranges apart."""
    with count_ops() as counter:
        x = torch.arange(6.0)  # arange
        y = x.view(2, 3).t().unsqueeze(0)[0]  # views only
        z = (y * 2 + 1).sum()  # mul, add, sum
        x.detach()
        torch.empty(3)
        torch.empty_like(x)
        torch.tensor([1.0, 2.0])  # lift_fresh: a view of the data
        z.to(torch.float64)  # _to_copy
        with record_function("torchlime::test"):
            x.add_(1)  # add_
        x.tolist(), z.item(), x.cpu()  # two host reads and a _local_scalar_dense
    assert dict(counter.ops) == {
        "arange": 1,
        "mul": 1,
        "add": 1,
        "sum": 1,
        "_to_copy": 1,
        "add_": 1,
        "_local_scalar_dense": 1,
    }
    assert counter.total == 7
    assert dict(counter.ranges) == {"torchlime::test": 1} and counter.n_ranges == 1
    assert counter.uploads == 1 and dict(counter.host_reads) == {"tolist": 1, "cpu": 1}
    assert torch.Tensor.tolist.__name__ == "tolist"  # put back


def test_where_names_lines_functions_and_ranges():
    def two_ops(x):
        with record_function("torchlime::inner"):
            return x * 2 + 1

    with count_ops(where=True) as counter:
        two_ops(torch.ones(3))  # ones: outside every range
    assert counter.total == 3
    assert dict(counter.stages) == {"(no range)": 1, "torchlime::inner": 2}
    assert dict(counter.functions) == {
        "tests/engine/test_op_counts.py:test_where_names_lines_functions_and_ranges": 1,
        "tests/engine/test_op_counts.py:two_ops": 2,
    }
    assert sum(counter.lines.values()) == 3 and sum(counter.sites.values()) == 3


class Busy(torch.nn.Module):
    """Many operators and a profiler range of its own."""

    def forward(self, x):
        with record_function("user::inside"):
            for _ in range(10):
                x = torch.sin(x) * 2 + 1
        return x.sum(1, keepdim=True)


def test_the_models_operators_are_not_counted():
    model = Busy()
    with count_ops() as counter:
        wrapped = paused(counter, model)
        assert wrapped is model  # a module gets hooks, not a wrapper: torchlime sees the user's module
        out = wrapped(torch.ones(2, 3))  # nothing: the model's 31 operators and its range
        out + 1  # add
        wrapped(torch.ones(2, 3))
    unpause(model)
    assert dict(counter.ops) == {"ones": 2, "add": 1}
    assert counter.n_ranges == 0 and counter.model_calls == 2 and counter.paused == 0

    with count_ops() as counter:  # the hooks are gone
        model(torch.ones(2, 3))
    assert counter.total == 1 + 10 * 3 + 1

    def function_model(x):
        return (x * 3).sum(1)

    with count_ops() as counter:
        paused(counter, function_model)(torch.ones(2, 3))
    assert dict(counter.ops) == {"ones": 1} and counter.model_calls == 1


def test_a_kernel_door_counts_once():
    """One ``door.<name>`` per call of a kernel door, through ``_backend`` or a module that imported the
    name; its torch reference's operators (about 60 for the hash words) are not counted."""
    key = torch.tensor([1, 2])
    rows = torch.arange(4)
    args = (key, torch.zeros(4, dtype=torch.long), rows, 0, 5)
    with OpCounter() as plain:
        _backend.hash_words(*args)
    assert plain.total > 20  # the reference, counted operator by operator without the doors
    with count_ops() as counter:
        _backend.hash_words(*args)
        sampling.hash_words(*args)  # the name sampling imported
    assert dict(counter.ops) == {"door.hash_words": 2}
    assert sampling.hash_words is _backend.hash_words  # put back

    x, base = torch.rand(1, 3, 4, 4), torch.zeros(1, 3, 4, 4)
    labels = torch.arange(4).repeat_interleave(4).view(1, 1, 4, 4)
    masks = torch.rand(5, 4, generator=torch.Generator().manual_seed(0)) < 0.5
    with count_ops() as counter:
        _backend.blend(x, base, labels, masks)
    assert dict(counter.ops) == {"door.blend": 1}


def test_the_cuda_path_reaches_the_slic_doors():
    """On the CPU, SLIC runs its own torch iterations; ``cuda_path=True`` takes the CUDA path's branch,
    whose assignment and update steps are doors (their references run inside, not counted)."""
    from torchlime.image.segments import slic

    image = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with count_ops() as cpu:
        on_cpu = slic(image, n_segments=16)
    assert not any(name.startswith("door.") for name in cpu.ops)
    with count_ops(cuda_path=True) as cuda:
        on_cuda = slic(image, n_segments=16)
    assert cuda.ops["door.slic_assign"] >= 1 and cuda.ops["door.slic_update"] >= 1
    assert _backend.use_triton(image) is False  # put back
    assert on_cpu.shape == on_cuda.shape == (1, 32, 32)


def test_a_call_splits_into_a_fixed_part_and_a_part_per_chunk():
    """A call of known cost: 2 fixed operators and 3 per chunk of 8 rows."""

    def run(model, n):
        x = torch.zeros(2, 8)
        for _ in range(0, n, 8):
            model(x)
            x = x.add(1).mul(2).neg()
        return x.sum()

    split = call_ops(run, Busy(), n=16, chunk=8, where=True)
    assert (split.fixed, split.per_chunk, split.chunks, split.totals) == (2, 3, (2, 8), (8, 26))
    assert split.model_calls == (2, 8)
    assert split.fixed_by["ops"] == {"zeros": 1, "sum": 1}  # each operator split the same way
    assert split.per_chunk_by["ops"] == {"add": 1, "mul": 1, "neg": 1}


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # a near-free model
def test_an_explain_image_call_is_linear_in_its_chunks():
    """The split of a real call (64x64, given labels, 160 and 640 samples at 32 rows a chunk: both the default
    Sobol design for 64 features) predicts the count at 320 samples: the fixed part and the part per chunk are
    the whole story."""

    class Tiny(torch.nn.Module):
        def forward(self, x):
            return x.mean((2, 3))

    image = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    labels = grid_labels(64, 64, 8, 8)

    def run(model, n):
        return explain_image(model, image, segments=labels, target=0, n_samples=n, batch_size=32, generator=0)

    model = Tiny()
    split = call_ops(run, model, n=160, chunk=32)
    assert split.per_chunk == int(split.per_chunk) and split.per_chunk > 0
    assert split.model_calls == split.chunks
    run(model, 320)  # uncounted, as call_ops does: the first call at a size fills the shape caches
    with count_ops() as counter:
        run(paused(counter, model), 320)
    unpause(model)
    assert counter.total == split.fixed + 10 * split.per_chunk
