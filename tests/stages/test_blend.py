"""Stage 3 (``torchlime.stages.perturb.blend``): chunks of perturbed inputs against a row-by-row reference, in
every format the model may want, never aliasing the caller's tensors."""

from __future__ import annotations

import pytest
import torch

from torchlime.stages.forward.model import InputFormat
from torchlime.stages.perturb.blend import Chunk, Normalize, gather_rows, perturb_rows


def reference(x, base, index, masks, rows):
    """Row by row, element by element through the mask: obviously correct."""
    out = []
    for r, b in enumerate(rows.tolist()):
        keep = masks[r][index[b if index.shape[0] > 1 else 0].expand(x.shape[1:])]
        out.append(torch.where(keep, x[b], base[b]))
    return torch.stack(out)


def case(device, dtype=torch.float32, c=9, fixed=False):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 3, 6, 5, generator=g).to(device=device, dtype=dtype)
    base = torch.rand(3, 3, 6, 5, generator=g).to(device=device, dtype=dtype)
    index = torch.randint(0, 4, (3, 1, 6, 5), generator=g).to(device)
    masks = (torch.rand(c, 4 + fixed, generator=g) > 0.5).to(device)
    if fixed:
        index[:, :, 0] = 4
        masks[:, 4] = True
    rows = torch.randint(0, 3, (c,), generator=g).to(device)
    return x, base, index, masks, rows


@pytest.mark.parametrize("fixed", [False, True])
def test_matches_reference(device, dtype, fixed):
    x, base, index, masks, rows = case(device, dtype, fixed=fixed)
    out = perturb_rows(x, base, index, Chunk(masks, rows, rows * 0 + 1, 0, -1))
    assert out.dtype == dtype and out.shape == (9, 3, 6, 5)
    assert torch.equal(out, reference(x, base, index, masks, rows))
    if fixed:  # elements outside every feature always keep the input
        assert torch.equal(out[:, :, 0], x[rows][:, :, 0])


def test_one_input_per_chunk_is_broadcast_not_gathered(device):
    x, base, index, masks, _ = case(device)
    rows = torch.full((9,), 2, device=device)
    chunk = Chunk(masks, rows, rows, 2, 2)
    assert gather_rows(x, chunk).shape[0] == 1
    assert torch.equal(perturb_rows(x, base, index, chunk), reference(x, base, index, masks, rows))


def test_formats_normalise_cast_and_layout(device):
    x, base, index, masks, rows = case(device)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    chunk = Chunk(masks, rows, rows, 0, -1)
    out = perturb_rows(x, base, index, chunk, fmt=InputFormat(torch.bfloat16, True), normalize=Normalize(mean, std))
    want = (reference(x, base, index, masks, rows) - torch.tensor(mean, device=device).view(1, 3, 1, 1)) / torch.tensor(
        std, device=device
    ).view(1, 3, 1, 1)
    assert out.dtype == torch.bfloat16 and out.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out, want.to(torch.bfloat16))


def test_token_ids_and_complex_spectra(device):
    ids = torch.arange(12, device=device).view(2, 6)
    index = torch.tensor([[0, 0, 1, 1, 2, 2]], device=device)
    masks = torch.tensor([[True, False, True], [False, True, True]], device=device)
    rows = torch.tensor([1, 0], device=device)
    out = perturb_rows(ids, torch.full_like(ids, -1), index, Chunk(masks, rows, rows, 0, -1))
    assert out.tolist() == [[6, 7, -1, -1, 10, 11], [-1, -1, 2, 3, 4, 5]]
    spec = torch.randn(2, 6, dtype=torch.complex64, device=device)
    out = perturb_rows(spec, torch.zeros_like(spec), index, Chunk(masks, rows, rows, 0, -1))
    assert out.dtype == torch.complex64 and torch.equal(out[0, :2], spec[1, :2]) and (out[0, 2:4] == 0).all()


def test_never_aliases_or_modifies_the_inputs(device):
    x, base, index, _, _ = case(device)
    before = x.clone()
    rows = torch.zeros(1, dtype=torch.long, device=device)
    out = perturb_rows(x, base, index, Chunk(torch.ones(1, 4, dtype=torch.bool, device=device), rows, rows, 0, 0))
    assert torch.equal(out[0], x[0])
    out.mul_(0)  # a model writing into its input
    assert torch.equal(x, before)
