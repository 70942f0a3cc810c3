"""The perturbation record (``torchlime.stages.perturb.record``): other masks perturbed exactly as the
explanation's own samples were, for every modality."""

from __future__ import annotations

import pytest
import torch

from torchlime import explain
from torchlime.audio import explain_waveform
from torchlime.image import explain_image
from torchlime.text import Infiller, explain_tokens

from tests.helpers import forward_order, grid_labels
from tests.helpers.text import CLS, MASK, SEP, PositionBag, Recorder, ToyMLM, batch_with_padding


@pytest.fixture(autouse=True)
def full_length_rows(monkeypatch):
    """These tests check deletion itself on full-length rows in their own order (packing by length:
    tests/text/test_delete_packing.py)."""
    from torchlime.text._tokens import Tokens

    monkeypatch.setattr(Tokens, "_pack_rows", False)


class Seen(torch.nn.Module):
    """Records every batch it sees; scores = the mean of each row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[torch.Tensor] = []

    def forward(self, x):
        self.rows.append(x.detach().clone())
        return x.reshape(x.shape[0], -1).float().mean(1, keepdim=True)


def replay(exp, model_rows):
    """The engine's rows in (B·S) order, and the same rows rebuilt from the explanation's masks."""
    b, s = exp.samples.shape[:2]
    seen = torch.cat(model_rows)[forward_order(b, s).flatten()]
    return seen, exp.perturbation.rows(exp.samples)


def test_images_with_fill_normalisation_and_fixed_elements():
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    f = grid_labels(8, 8, 2, 2).view(1, 1, 8, 8).clone()
    f[..., 0, :] = -1
    net = Seen()
    exp = explain(net, x, f, n_samples=20, baseline="mean", normalize=((0.5,) * 3, (0.2,) * 3), return_samples=True)
    seen, again = replay(exp, net.rows)
    assert torch.equal(seen, again)
    assert exp.perturbation.adapt(net) is net


def test_deleted_tokens_and_the_adapter():
    ids, attn = batch_with_padding()
    rec = Recorder(PositionBag())
    exp = explain_tokens(
        rec, ids, attention_mask=attn, special_ids=[CLS, SEP], mode="delete", n_samples=30, return_samples=True
    )
    seen_ids, _ = rec.perturbed(3, 30)
    packed = exp.perturbation.rows(exp.samples)
    assert torch.equal(packed[:, 0], seen_ids)
    out = exp.perturbation.adapt(rec)(packed[:4])
    assert out.shape == (4, 3)


def test_waveform_cells_through_the_inverse_stft():
    waves = torch.randn(2, 2000, generator=torch.Generator().manual_seed(1)) * 0.3
    net = Seen()
    exp = explain_waveform(
        net, waves, sample_rate=8000, segments="time_frequency", n_fft=256, n_samples=16, return_samples=True
    )
    seen, _ = replay(exp, net.rows)  # the audio the model heard
    spec_rows = exp.perturbation.rows(exp.samples)  # masked STFTs
    assert spec_rows.is_complex() and spec_rows.shape[0] == 32
    wrapper = exp.perturbation.adapt(net)  # the inverse STFT, then the model
    net.rows.clear()
    wrapper(spec_rows)
    torch.testing.assert_close(net.rows[0], seen, atol=1e-5, rtol=1e-5)


def test_single_protocol_cannot_be_reused_and_bad_masks():
    ids, attn = batch_with_padding()
    exp = explain_tokens(
        PositionBag(),
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode="infill",
        mask_id=MASK,
        infill=Infiller(ToyMLM(), protocol="single", synonym_threshold=None),
        n_samples=20,
    )
    with pytest.raises(ValueError, match="single-mask infill protocol"):
        exp.perturbation.rows(torch.ones(3, 2, int(exp.n_features.max()), dtype=torch.bool))
    img = explain_image(
        lambda v: v.mean((1, 2, 3)), torch.rand(1, 3, 16, 16), segments="grid", n_segments=100, n_samples=10
    )
    with pytest.raises(ValueError, match=r"`masks` must be bool \(1, M, 100\)"):
        img.perturbation.rows(torch.ones(1, 2, 5, dtype=torch.bool))
    assert img.to("cpu").perturbation is img.perturbation  # the same device: kept
    assert img.to("meta").perturbation is None  # another device: dropped
