"""Deletion and insertion reproduced for every modality: images with a fused normalisation, spectrograms,
time-frequency waveforms and tokens (deleted or replaced), each against a reference that perturbs one
input at a time with plain loops; the first and last points against the explanation's own rows."""

from __future__ import annotations

import pytest
import torch

from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.image import explain_image
from torchlime.metrics import deletion, insertion, label_flip
from torchlime.stages.perturb.fills import gaussian_blur
from torchlime.text import Infiller, explain_tokens

from tests.helpers import grid_labels
from tests.helpers.text import CLS, MASK, PAD, SEP, PositionBag, ToyMLM, batch_with_padding


def order_of(coef_row: list[float], n: int) -> list[int]:
    return sorted(range(n), key=lambda f: (-coef_row[f], f))


def reference(exp, score_hidden, reveal: bool) -> dict:
    """{(b, t): [score after hiding the top 0..F_b features]} (insertion: all but the top k hidden)."""
    out = {}
    for b in range(exp.coef.shape[0]):
        n = int(exp.n_features[b])
        for t in range(exp.coef.shape[1]):
            order = order_of(exp.coef[b, t].tolist(), n)
            out[b, t] = [
                score_hidden(b, order[k:] if reveal else order[:k], int(exp.target[b, t])) for k in range(n + 1)
            ]
    return out


def check(exp, model, inputs, score_hidden, atol=1e-5):
    for reveal, fn in ((False, deletion), (True, insertion)):
        res = fn(model, inputs, exp, return_curves=True)
        for (b, t), ys in reference(exp, score_hidden, reveal).items():
            assert res.curves[b, t, : len(ys)].tolist() == pytest.approx(ys, abs=atol), (fn.__name__, b, t)
    return deletion(model, inputs, exp, return_curves=True).curves


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(16, 4),
        )

    def forward(self, x):
        return self.net(x)


def test_images_with_fused_normalisation():
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.25, 0.3)
    images = torch.rand(2, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    segments = torch.stack((grid_labels(12, 12, 2, 2), grid_labels(12, 12, 2, 3)))
    model = ConvNet()
    masks = torch.rand(2, 32, 6, generator=torch.Generator().manual_seed(1)) < 0.5
    masks[:, 0], masks[:, 1] = True, False  # the input itself, then everything hidden
    exp = explain_image(
        model,
        images,
        segments=segments,
        normalize=(mean, std),
        baseline=0.2,
        target="top2",
        n_samples=32,
        masks=masks,
        return_samples=True,
    )
    m, s = torch.tensor(mean).view(3, 1, 1), torch.tensor(std).view(3, 1, 1)

    def score_hidden(b, hidden, target):
        x = images[b].clone()
        lab = segments[b]
        for f in hidden:
            x[:, lab == f] = 0.2
        with torch.no_grad():
            return float(model(((x - m) / s).unsqueeze(0))[0, target])

    curves = check(exp, model, images, score_hidden)
    assert torch.allclose(curves[..., 0], exp.outputs[:, 0], atol=1e-5)  # the unperturbed row
    for b in range(2):
        assert torch.allclose(curves[b, :, int(exp.n_features[b])], exp.outputs[b, 1], atol=1e-5)  # all hidden


def test_spectrograms_with_the_blur_fill():
    specs = torch.rand(2, 16, 12, generator=torch.Generator().manual_seed(2))
    weight = torch.randn(16 * 12, 3, generator=torch.Generator().manual_seed(3))
    model = lambda v: torch.tanh(v.reshape(v.shape[0], -1) @ weight)
    exp = explain_spectrogram(
        model, specs, time_segments=3, freq_segments=2, baseline="blur", target="all", n_samples=64, return_samples=True
    )
    fill = gaussian_blur(specs, 2.0, (1, 2))  # the audio "blur": 2 bins / frames

    def score_hidden(b, hidden, target):
        x = specs[b].clone()
        lab = exp.features[b].reshape(16, 12)
        for f in hidden:
            x[lab == f] = fill[b][lab == f]
        return float(model(x.unsqueeze(0))[0, target])

    curves = check(exp, model, specs, score_hidden)
    assert torch.allclose(curves[..., 0], exp.outputs[:, 0], atol=1e-5)


def test_waveforms_over_stft_cells():
    waves = torch.randn(2, 1000, generator=torch.Generator().manual_seed(4)) * 0.3
    weight = torch.randn(1000, 2, generator=torch.Generator().manual_seed(5)) / 30
    model = lambda v: (v @ weight) ** 2
    exp = explain_waveform(
        model,
        waves,
        sample_rate=8000,
        segments="time_frequency",
        n_fft=64,
        time_segments=3,
        freq_segments=2,
        target="all",
        n_samples=64,
        return_samples=True,
    )
    window = torch.hann_window(64)
    spec = torch.stft(waves, 64, 16, 64, window=window, center=True, return_complex=True)  # (2, 33, 63)

    def score_hidden(b, hidden, target):
        cells = spec[b].clone()
        lab = exp.features[b].reshape(cells.shape)
        for f in hidden:
            cells[lab == f] = 0
        audio = torch.istft(cells, 64, 16, 64, window=window, center=True, length=1000)
        return float(model(audio.unsqueeze(0))[0, target])

    curves = check(exp, model, waves, score_hidden, atol=1e-4)
    assert torch.allclose(curves[..., 0], exp.outputs[:, 0], atol=1e-4)


@pytest.mark.parametrize("mode", ["delete", "replace"])
def test_tokens_deleted_or_replaced(mode):
    ids, attn = batch_with_padding()
    model = PositionBag()
    exp = explain_tokens(
        model,
        ids,
        attention_mask=attn,
        special_ids=[CLS, SEP],
        mode=mode,
        mask_id=MASK,
        target="top2",
        n_samples=64,
        return_samples=True,
    )

    def score_hidden(b, hidden, target):
        lab = exp.features[b].tolist()
        toks = [tok for tok, a in zip(ids[b].tolist(), attn[b].tolist()) if a]
        feats = [f for f, a in zip(lab, attn[b].tolist()) if a]
        if mode == "replace":
            toks = [MASK if f in hidden else tok for tok, f in zip(toks, feats)]
        else:
            toks = [tok for tok, f in zip(toks, feats) if f not in hidden]
        length = ids.shape[1]
        row = torch.tensor(toks + [PAD] * (length - len(toks)))
        mask = torch.tensor([1] * len(toks) + [0] * (length - len(toks)))
        with torch.no_grad():
            return float(model(row.unsqueeze(0), mask.unsqueeze(0))[0, target])

    curves = check(exp, model, ids, score_hidden)
    assert torch.allclose(curves[..., 0], exp.outputs[:, 0], atol=1e-5)
    flips = label_flip(model, ids, exp, k=2)
    assert flips.shape == (3, 2)


def test_single_mask_infill_cannot_be_replayed():
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
        deletion(PositionBag(), ids, exp)


def test_what_the_metrics_can_rebuild_is_recorded():
    specs = torch.rand(2, 16, 12, generator=torch.Generator().manual_seed(2))
    waves = torch.randn(2, 1000, generator=torch.Generator().manual_seed(4)) * 0.3
    spec_model = lambda v: v.reshape(v.shape[0], -1).sum(1, keepdim=True)
    wave_model = lambda v: v.pow(2).sum(-1, keepdim=True)
    blend = explain_spectrogram(spec_model, specs, time_segments=3, freq_segments=2, n_samples=16)
    cells = explain_waveform(
        wave_model,
        waves,
        sample_rate=8000,
        segments="time_frequency",
        n_fft=64,
        time_segments=3,
        freq_segments=2,
        n_samples=16,
    )
    assert blend.run.perturbation == "blend" and cells.run.perturbation == "custom"  # istft wraps the model
    with pytest.raises(ValueError, match="hid its features by its front door's own perturbation"):
        deletion(wave_model, waves, cells.to("meta"))


def test_a_loaded_spectrogram_explanation_hides_with_its_blur(tmp_path):
    from torchlime import Explanation

    specs = torch.rand(2, 16, 12, generator=torch.Generator().manual_seed(2))
    weight = torch.randn(16 * 12, 3, generator=torch.Generator().manual_seed(3))
    model = lambda v: torch.tanh(v.reshape(v.shape[0], -1) @ weight)
    exp = explain_spectrogram(model, specs, time_segments=3, freq_segments=2, baseline="blur", n_samples=32)
    exp.save(tmp_path / "s.pt")
    assert torch.allclose(
        deletion(model, specs, Explanation.load(tmp_path / "s.pt")), deletion(model, specs, exp), atol=1e-6
    )
