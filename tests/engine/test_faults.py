"""Faults found by probing the package as a user would: each test failed before its fix.

Nothing of the caller's is touched, every fault is named (argument, expected, got), memory is
bounded by the chunk, not by samples x features."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from torchlime import Call, Explanation, explain
from torchlime.audio import explain_spectrogram, explain_waveform
from torchlime.image import explain_image
from torchlime.integrations.probe import ProbeExplainer
from torchlime.text import explain_tokens

from tests.helpers import grid_labels


class InPlace(torch.nn.Module):
    """A model that writes into its input (``relu_``, ``mul_``), or the same without doing so."""

    def __init__(self, in_place: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.in_place = in_place

    def forward(self, x):
        x = x.mul_(2.0).relu_() if self.in_place else (x * 2.0).relu()
        return self.conv(x).mean((2, 3))


@pytest.mark.parametrize("kernel", ["lime", "captum"])  # mask-space and input-space distances
def test_models_writing_into_their_input(kernel):
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    before = x.clone()
    f = grid_labels(16, 16, 4, 4).view(1, 1, 16, 16)
    plain = explain(InPlace(False), x, f, n_samples=100, kernel=kernel, batch_size=32)
    writes = explain(InPlace(True), x, f, n_samples=100, kernel=kernel, batch_size=32)
    assert torch.equal(x, before)  # the caller's tensor is untouched
    torch.testing.assert_close(writes.coef, plain.coef)
    img = explain_image(InPlace(True), x, segments=grid_labels(16, 16, 4, 4), n_samples=50)
    assert torch.equal(x, before) and torch.isfinite(img.coef).all()


@pytest.mark.parametrize(
    "call, error, match",
    [
        (
            lambda: explain(torch.nn.Identity(), torch.zeros(0, 4), torch.zeros(1, 4, dtype=torch.long)),
            ValueError,
            r"`inputs` must hold at least one input \(B >= 1\), got shape \(0, 4\)",
        ),
        (
            lambda: explain_image(torch.nn.Identity(), torch.zeros(0, 3, 8, 8)),
            ValueError,
            r"`images` must not be empty, got shape \(0, 3, 8, 8\)",
        ),
        (
            lambda: explain_spectrogram(torch.nn.Identity(), torch.zeros(0, 16, 10)),
            ValueError,
            r"`specs` must hold at least one input \(B >= 1\), got shape \(0, 16, 10\)",
        ),
        (
            lambda: explain_waveform(torch.nn.Identity(), torch.zeros(0, 1000), sample_rate=8000),
            ValueError,
            r"`waves` must hold at least one input \(B >= 1\), got shape \(0, 1000\)",
        ),
        (
            lambda: explain_tokens(torch.nn.Identity(), torch.zeros(0, 6, dtype=torch.long), mask_id=1),
            ValueError,
            r"`input_ids` must hold at least one input \(B >= 1\), got shape \(0, 2, 6\)",
        ),
        (
            lambda: explain_spectrogram(lambda s: s.mean((1, 2)), torch.rand(1, 16, 10), sample_rate=0),
            ValueError,
            r"`sample_rate` must be finite and > 0, got 0.0",
        ),
        (
            lambda: explain_spectrogram(lambda s: s.mean((1, 2)), torch.rand(1, 16, 10), sample_rate=-8000),
            ValueError,
            r"`sample_rate` must be finite and > 0, got -8000.0",
        ),
    ],
)
def test_named_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_explanation_errors(tmp_path):
    exp = explain(
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)),
        torch.rand(2, 1, 4, 4),
        grid_labels(4, 4, 2, 2).view(1, 1, 4, 4),
        n_samples=32,
    )
    with pytest.raises(IndexError, match=r"`target_index` must be in \[0, 1\) for an explanation of 1 target"):
        exp.heatmap(5)
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match=r"`path` must be a file written by Explanation.save.*holds \['weights'\]"):
        Explanation.load(tmp_path / "other.pt")
    text = repr(exp)
    assert text.startswith("Explanation of 2 input(s) of shape (1, 4, 4): 1 target(s) and 4 features each")
    assert "tensor(" not in text and len(text.splitlines()) == 5  # the last: coef_se


def test_probe_history_is_bounded_and_can_be_sunk():
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
    sunk = []
    probe = ProbeExplainer(
        net,
        torch.rand(1, 1, 4, 4),
        grid_labels(4, 4, 2, 2).view(1, 1, 4, 4),
        every=1,
        call=Call(n_samples=16),
        max_history=3,
        sink=lambda step, exp: sunk.append(step),
    )
    for step in range(7):
        probe.maybe_explain(step)
    assert [s for s, _ in probe.history] == [4, 5, 6] and sunk == list(range(7))
    with pytest.raises(ValueError, match="`max_history` must be >= 1, got 0"):
        ProbeExplainer(net, torch.rand(1, 1, 4, 4), grid_labels(4, 4, 2, 2).view(1, 1, 4, 4), max_history=0)


def test_memory_is_bounded_by_the_chunk_not_by_samples_times_features():
    """500 000 samples x 64 features: the old engine held ~13 bytes per sample and feature (over
    400 MB); the streamed fit holds the scores (4 bytes per sample) and one chunk."""
    code = textwrap.dedent("""
        import resource, torch
        from torchlime import explain
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 2)
        x = torch.rand(1, 64)
        start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        exp = explain(model, x, torch.arange(64).view(1, 64), n_samples=500_000, batch_size=4096)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start
        print(grew, float(exp.score.min()))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    grew_kib, r2 = proc.stdout.split()
    assert int(grew_kib) < 150 * 1024, f"peak memory grew by {int(grew_kib) // 1024} MiB"
    assert float(r2) > 0.99  # a linear model is explained exactly
