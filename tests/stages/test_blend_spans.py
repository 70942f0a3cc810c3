"""Chunks of several inputs blended span by span (``Chunk.spans``, ``engine.row_spans``): the same
values as gathering every row's input, without the gathered copies."""

from __future__ import annotations

import pytest
import torch

from torchlime.engine.row_spans import MAX_SPANS, input_spans
from torchlime.engine.rows import RowOrder
from torchlime.image import explain_image
from torchlime.kernels import reference
from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import Chunk, Normalize, perturb_rows


@pytest.mark.parametrize(
    "active, s_lo, s_hi", [([0, 1, 2], 0, 5), ([3, 1], 0, 7), ([0, 1, 2, 3], 2, 6), ([5], 0, 9), ([0, 1], 0, 1)]
)
def test_spans_cover_every_row_with_its_input(active, s_lo, s_hi):
    order = RowOrder(active, s_lo, s_hi, torch.device("cpu"))
    for start in range(order.n_rows):
        for stop in range(start + 1, order.n_rows + 1):
            spans = input_spans(order.active, order.refs, order.width, start, stop)
            inputs = order.coords(start, stop)[0]
            if spans is None:  # only for more spans than the limit
                assert stop - start > MAX_SPANS
                continue
            assert [lo for lo, _, _ in spans] == [0] + [hi for _, hi, _ in spans[:-1]]
            assert spans[-1][1] == stop - start and all(lo < hi for lo, hi, _ in spans)
            for lo, hi, b in spans:
                if b >= 0:
                    assert inputs[lo:hi].tolist() == [b] * (hi - lo)
                else:  # only the unperturbed rows, one per input
                    assert start + hi <= order.refs and hi - lo > 1


def test_too_many_spans_are_gathered():
    order = RowOrder(list(range(40)), 0, 3, torch.device("cpu"))  # 2 samples per input after the references
    assert input_spans(order.active, order.refs, order.width, 40, 80) is None
    head = input_spans(order.active, order.refs, order.width, 0, 45)
    assert head == ((0, 40, -1), (40, 42, 0), (42, 44, 1), (44, 45, 2))


def _chunk(device):
    order = RowOrder([0, 1, 2], 0, 6, device)
    b, s, first, last = order.coords(0, order.n_rows)
    masks = torch.rand(b.shape[0], 5, generator=torch.Generator().manual_seed(3)).to(device) > 0.5
    return Chunk(masks, b, s, first, last), input_spans(order.active, order.refs, order.width, 0, order.n_rows)


@pytest.mark.parametrize(
    "fmt, normalize",
    [
        (None, None),
        (InputFormat(torch.bfloat16, True), Normalize((0.4, 0.5, 0.6), (0.2, 0.3, 0.25))),
        (InputFormat(None, True), None),
    ],
)
def test_span_by_span_equals_gathered(device, fmt, normalize, monkeypatch):
    g = torch.Generator().manual_seed(0)
    x, base = torch.rand(2, 3, 3, 8, 6, generator=g).to(device)
    index = torch.randint(0, 5, (3, 1, 8, 6), generator=g).to(device)
    chunk, spans = _chunk(device)
    norm = normalize.on(x) if normalize is not None else None
    gathered = perturb_rows(x, base, index, chunk, fmt=fmt, normalize=norm)
    seen = []
    blend = reference.blend_torch
    monkeypatch.setenv("TORCHLIME_BACKEND", "torch")  # the span-by-span torch blend (the kernel reads rows in place)
    monkeypatch.setattr(reference, "blend_torch", lambda x, *a, **k: seen.append(x.shape[0]) or blend(x, *a, **k))
    by_span = perturb_rows(x, base, index, chunk._replace(spans=spans), fmt=fmt, normalize=norm)
    assert torch.equal(by_span, gathered) and by_span.dtype == gathered.dtype
    assert by_span.is_contiguous(memory_format=torch.channels_last) == gathered.is_contiguous(
        memory_format=torch.channels_last
    )
    assert seen == [3, 1, 1, 1]  # the three unperturbed rows gathered, then each input read as it is


def test_explain_image_reads_each_input_once_per_span(monkeypatch):
    seen = []
    blend = reference.blend_torch
    monkeypatch.setattr(reference, "blend_torch", lambda x, *a, **k: seen.append(x.shape[0]) or blend(x, *a, **k))
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    images = torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    explain_image(model, images, segments="grid", n_segments=4, n_samples=50, batch_size=1000)
    assert seen == [4, 1, 1, 1, 1]  # one chunk of 200 rows: the 4 references, then 49 samples of each input


@pytest.mark.parametrize("block_rows", [1, 2])
@pytest.mark.parametrize("extras", [{}, dict(mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.25))], ids=["plain", "norm"])
def test_blend_torch_writes_into_its_rows_of_a_chunk(block_rows, extras):
    g = torch.Generator().manual_seed(4)
    x, base = torch.rand(2, 1, 3, 8, 6, generator=g)
    labels = torch.randint(0, 5, (1, 1, 4, 6), generator=g).repeat_interleave(2, dim=2)  # rows repeat in pairs
    masks = torch.rand(3, 5, generator=g) > 0.5
    chunk = torch.full((5, 3, 8, 6), float("nan"))
    got = reference.blend_torch(x, base, labels, masks, **extras, block_rows=block_rows, into=chunk[1:4])
    assert got.data_ptr() == chunk[1:4].data_ptr()
    assert torch.equal(chunk[1:4], reference.blend_torch(x, base, labels, masks, **extras))
    assert chunk[0].isnan().all() and chunk[4].isnan().all()
