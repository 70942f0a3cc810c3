"""Every call marks its stages as torch.profiler ranges (docs/gpu.md, benchmarks/bench_call_profile.py)."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from torchlime import explain
from torchlime.image import explain_image

STAGES = ("prepare", "plan", "masks", "blend", "model", "rows", "fit", "assemble")


def _ranges(run) -> dict[str, int]:
    """{stage: number of ranges} of one profiled call."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    return {e.key.split("::", 1)[1]: e.count for e in prof.key_averages() if e.key.startswith("torchlime::")}


def test_every_stage_is_a_range_and_the_model_range_counts_the_chunks():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
    calls = []

    def model(x: torch.Tensor) -> torch.Tensor:
        calls.append(x.shape[0])
        return net(x)

    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    seen = _ranges(lambda: explain_image(model, images, n_segments=9, n_samples=64, batch_size=50))
    assert set(seen) == set(STAGES), seen
    assert seen["model"] == len(calls) >= 3, calls  # one range per model call: 2 x 64 rows in chunks of 50
    assert seen["prepare"] == seen["plan"] == seen["assemble"] == 1


def test_ranges_of_a_feature_map_call():
    x = torch.rand(3, 8, generator=torch.Generator().manual_seed(1))
    seen = _ranges(lambda: explain(lambda v: v.sum(1, keepdim=True), x, torch.arange(8).view(1, 8), n_samples=32))
    assert {"prepare", "plan", "model", "fit", "assemble"} <= set(seen), seen
