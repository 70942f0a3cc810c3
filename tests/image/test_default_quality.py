"""The defaults a new user meets give fits worth looking at: on the embedded model, ``explain_image``
with nothing but ``target`` and ``n_samples`` reaches the floors set from
``benchmarks/results/default_segments_cpu.json`` (median weighted R² >= 0.6, median top-3 coverage of
the planted object >= 0.7), and the segment-count rule is the documented one."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchlime.demo import load_demo_model, make_images
from torchlime.demo.run import HELD_OUT_SEED, coverage
from torchlime.image import explain_image
from torchlime.image._defaults import check_segment_count, default_segments

R2_FLOOR = 0.6
COVERAGE_FLOOR = 0.7


@pytest.fixture(scope="module")
def demo() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    images, labels, evidence = make_images(16, seed=HELD_OUT_SEED)
    return load_demo_model(), images, labels, evidence


@pytest.mark.parametrize("n_samples", [500, 1000])  # the README's quick start, and the engine's default
def test_default_image_explanations_fit_and_find_the_planted_object(demo, n_samples):
    model, images, labels, evidence = demo
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a default call raises no quality warning on this model
        exp = explain_image(model, images, target=labels, n_samples=n_samples, generator=0)
    assert exp.info.n_segments == n_samples // 40 and exp.run.baseline == "mean"
    top, _ = exp.top_features(3, by="value")
    cov = coverage(exp.features, top[:, 0], evidence)
    assert float(exp.score[:, 0].median()) >= R2_FLOOR
    assert float(cov.median()) >= COVERAGE_FLOOR


def test_the_segment_count_rule():
    assert default_segments(1000, 224, 224) == 25
    assert default_segments(500, 64, 64) == 12
    assert default_segments(5000, 224, 224) == 100  # at most 100
    assert default_segments(50, 224, 224) == 8  # at least 8
    assert default_segments(1000, 16, 16) == 4  # segments of at least 8 x 8 pixels on average
    assert default_segments("auto", 64, 64) == 25  # n_samples="auto" counts as 1000
    assert check_segment_count("auto") == "auto" and check_segment_count(7) == 7
    with pytest.raises(ValueError, match=r"`n_segments` must be a positive int or 'auto', got 'many'"):
        check_segment_count("many")
    with pytest.raises(TypeError, match=r"`n_segments` must be an int >= 1, got float"):
        check_segment_count(2.5)


def test_an_explicit_count_and_fill_win_over_the_defaults(demo):
    model, images, labels, _ = demo
    exp = explain_image(model, images[:2], target=labels[:2], n_samples=64, n_segments=12, baseline=0.0)
    assert exp.info.n_segments == 12 and exp.run.baseline == 0.0
