"""Host synchronisations per call, counted on the CPU so that CI keeps the count.

A ``TorchDispatchMode`` counts the operations that make the host wait for the device on
CUDA (scalar reads, ``nonzero``, ``unique``, ``bincount``, ``equal``, boolean indexing,
copies to the host) and ``tolist`` / ``numpy`` / ``cpu`` / ``item`` calls are counted at the
Python level. Tensors made from Python data (``torch.tensor`` / ``as_tensor`` of numbers, seen
as ``aten.lift_fresh``) are counted apart: on CUDA each is a blocking host-to-device copy, which
waits for the stream, but a call makes a few of them and only their number per chunk is bounded.
Limits: 5 per ``explain_image`` call with the default SLIC, 2 with a grid or given segments,
none per chunk, of either kind (the counts do not grow with the number of chunks, also with
``normalize=``, whose statistics go to the device once per call). Every tensor made from Python data
comes from ``torchlime._util.upload.upload``, whose copy does not wait for the device (pinned memory,
asynchronous), so on CUDA the uploads add no synchronisation. The
first call on a model and input shape measures the chunk size (which synchronises per
measured chunk), so every count is taken on a second call.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from torchlime import explain
from torchlime.demo.image_data import make_images
from torchlime.demo.image_models import load_demo_model
from torchlime.image import explain_image
from torchlime.methods.adaptive import Adaptive

from tests.helpers import grid_labels
from tests.helpers.syncs import count_syncs


@pytest.fixture(scope="module")
def demo():
    torch.manual_seed(0)
    images, _, _ = make_images(4, seed=2026)
    return load_demo_model(), images


def test_counter_sees_syncs():
    x = torch.arange(6)
    uploads = []
    with count_syncs(uploads) as ops:
        int(x.sum())
        x.nonzero()
        x.tolist()
        x[x > 2]
        x + 1  # no sync
        torch.as_tensor([0.5, 0.25], device=x.device)
        line = inspect.currentframe().f_lineno - 1
        torch.as_tensor(x, dtype=torch.long, device=x.device)  # a tensor already: no copy
    assert len(ops) == 4, ops
    assert uploads == [f"tensor from host data at tests/engine/test_host_syncs.py:{line}"]


#: the only source of tensors made from Python data in a call: ``upload``, whose copy does not wait on CUDA
UPLOAD = "tensor from host data at torchlime/_util/upload.py"
NORM = ((0.5, 0.45, 0.4), (0.25, 0.2, 0.2))


def test_explain_image_default_slic(demo):
    """SLIC's own three (its connectivity pass), the feature count and the last read."""
    model, images = demo
    explain_image(model, images, n_samples=200)  # measures the chunk size for this model and shape
    uploads: list[str] = []
    with count_syncs(uploads) as ops:
        explain_image(model, images, n_samples=200, normalize=NORM)
    assert len(ops) <= 5, ops
    assert all(u.startswith(UPLOAD) for u in uploads), uploads


@pytest.mark.parametrize("segments", ["grid", "given"])
def test_explain_image_grid_or_given_segments(demo, segments):
    """Two reads: the feature count (before the model) and the last one (counts, flags, bad outputs)."""
    model, images = demo
    seg = "grid" if segments == "grid" else grid_labels(64, 64, 6, 6)
    explain_image(model, images, segments=seg, n_samples=200)
    uploads: list[str] = []
    with count_syncs(uploads) as ops:
        explain_image(model, images, segments=seg, n_samples=200, normalize=NORM)
    assert len(ops) <= 2, ops
    assert uploads and all(u.startswith(UPLOAD) for u in uploads), uploads


@pytest.mark.parametrize("normalize", [None, ((0.5, 0.45, 0.4), (0.25, 0.2, 0.2))], ids=["plain", "normalize"])
def test_no_sync_per_chunk(demo, normalize):
    model, images = demo
    seg = grid_labels(64, 64, 6, 6)
    counts = []
    for chunk in (400, 16):  # 2 chunks vs 50 chunks
        uploads = []
        with count_syncs(uploads) as ops:
            explain_image(model, images[:2], segments=seg, n_samples=200, batch_size=chunk, normalize=normalize)
        counts.append((len(ops), len(uploads)))
    assert counts[0] == counts[1] and counts[0][0] <= 3, counts


def test_modality_free_engine_with_a_function_model():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x, feats = torch.rand(3, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 2
    explain(model, x, feats, n_samples=300)
    with count_syncs() as ops:
        explain(model, x, feats, n_samples=300)
    assert len(ops) <= 2, ops


@pytest.mark.cuda
def test_no_stream_synchronisation_per_chunk_on_cuda(cuda, monkeypatch):
    """On a GPU, torch's own sync detector raises on any synchronisation: none may happen while the
    chunks are built, run and stored (after the first call, which measures the chunk size), also with
    ``normalize=`` (its statistics go to the device once per call, not with every chunk)."""
    from torchlime.engine import rows as _run

    model = load_demo_model(cuda)
    images = make_images(4, seed=2026)[0].to(cuda)
    seg = grid_labels(64, 64, 6, 6).to(cuda)
    norm = ((0.5, 0.45, 0.4), (0.25, 0.2, 0.2))
    explain_image(model, images, segments=seg, n_samples=256, normalize=norm)
    real, calls = _run.run_rows, []

    def strict(*args, **kwargs):
        torch.cuda.set_sync_debug_mode("error")
        try:
            calls.append(1)
            return real(*args, **kwargs)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(_run, "run_rows", strict)
    explain_image(model, images, segments=seg, n_samples=256, normalize=norm)
    assert calls == [1]


@pytest.mark.cuda
@pytest.mark.parametrize("segments", ["slic", "given"])
def test_cuda_synchronisations_per_call_within_the_cpu_budget(cuda, segments):
    """torch's own detector counts every synchronisation of a second call on a GPU (copies from pageable
    memory and ``torch.cuda.synchronize`` included): no more than the CPU count above allows."""
    import warnings

    model = load_demo_model(cuda)
    images = make_images(4, seed=2026)[0].to(cuda)
    given = {} if segments == "slic" else dict(segments=grid_labels(64, 64, 6, 6).to(cuda))
    explain_image(model, images, n_samples=256, normalize=NORM, **given)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            explain_image(model, images, n_samples=256, normalize=NORM, **given)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    said = [(f"{w.filename}:{w.lineno}", str(w.message)) for w in caught]
    syncs = [at for at, m in said if "synchroniz" in m and "prototype" not in m]  # not the mode's own notice
    assert len(syncs) <= (5 if segments == "slic" else 2), syncs


def test_the_lime_rule_of_auto_adds_no_host_sync_to_the_rounds():
    """``n_samples="auto"``'s rule (the first round's half fitted again, the movement read each round) synchronises
    as often as the top-k rule over the same rounds: once per round for the host's decision."""
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    x, feats = torch.rand(3, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 2
    counts = {}
    for rule in ("lime", "top_k"):
        settings = Adaptive(start=250, cap=1000, rule=rule)
        explain(model, x, feats, n_samples=settings)
        with count_syncs() as ops:
            explain(model, x, feats, n_samples=settings)
        counts[rule] = len(ops)
    assert counts["lime"] <= counts["top_k"], counts
