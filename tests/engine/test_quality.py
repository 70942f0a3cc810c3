"""The quality check in every explanation (``torchlime.engine.quality``): flags, thresholds, one warning."""

from __future__ import annotations

import warnings

import pytest
import torch

from torchlime import explain
from torchlime.engine.quality import MIN_OUTPUT_STD, UnreliableExplanationWarning

from tests.helpers import SegmentLinear, grid_labels
from tests.helpers.syncs import count_syncs

LABELS = grid_labels(8, 8, 2, 4)


def data():
    return torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0)), LABELS.view(1, 1, 8, 8)


def run(model, **kw):
    x, f = data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp = explain(model, x, f, n_samples=300, **kw)
    return exp, [w for w in caught if issubclass(w.category, UnreliableExplanationWarning)]


def test_saturated_softmax_is_flagged_once_and_logits_are_not():
    model = SegmentLinear(LABELS, 8, n_out=4)
    big = lambda v: model(v) + torch.tensor([50.0, 0, 0, 0])  # noqa: E731 - class 0 always certain
    exp, caught = run(big, softmax=True)
    assert len(caught) == 1 and "outputs barely vary" in str(caught[0].message)
    assert "explain logits" in exp.run.unreliable
    assert sorted({b for b, _ in exp.run.quality["saturated"]}) == [0, 1, 2]
    assert exp.run.quality["thresholds"]["min_output_std"] == MIN_OUTPUT_STD
    clean, caught = run(model)
    assert caught == [] and clean.run.unreliable is None and clean.run.quality["saturated"] == []


def test_output_unrelated_to_the_features_is_a_poor_fit():
    def noise(v):  # a score that ignores the features: a hash of the input
        return torch.sin(v.flatten(1).sum(1, keepdim=True) * 1e3)

    exp, caught = run(noise)
    assert len(caught) == 1 and exp.run.quality["poor_fit"]
    assert "weighted R² below" in exp.run.unreliable


def test_a_narrow_kernel_leaves_too_few_effective_samples():
    exp, caught = run(SegmentLinear(LABELS, 8), kernel=0.01)
    assert len(caught) == 1 and exp.run.quality["few_samples"] == [[0], [1], [2]]
    assert "fewer effective samples (Kish) than features" in exp.run.unreliable


@pytest.mark.parametrize("front", ["image"])
def test_the_demo_flags_its_saturated_image(front):
    from torchlime.demo.image_data import make_images
    from torchlime.demo.image_models import load_demo_model
    from torchlime.image import explain_image

    images, _, _ = make_images(4, seed=2026)  # image 0: a 'plus' the model is certain of
    with pytest.warns(UnreliableExplanationWarning) as record:
        exp = explain_image(load_demo_model(), images, n_segments=40, n_samples=300, softmax=True, baseline="mean")
    assert len(record) == 1 and exp.run.quality["saturated"]


def test_advice_follows_the_cause():
    """softmax=False is suggested only where softmax=True was asked; features outnumbering samples get
    'fewer features', not 'more samples'; inputs of a data set are named by their data-set index too."""
    x, f = data()
    flat = lambda v: torch.zeros(v.shape[0], 2)  # noqa: E731 - logits that never move
    with pytest.warns(UnreliableExplanationWarning) as caught:
        exp = explain(flat, x, f, n_samples=50)
    text = str(caught[0].message)
    assert "outputs barely vary" in text and "softmax=False" not in text and "ignores these features" in text
    pixels = torch.arange(3 * 8 * 8).view(1, 3, 8, 8)  # 192 per-pixel features for 100 samples
    with pytest.warns(UnreliableExplanationWarning, match="192 features for 100 samples .*use fewer, larger features"):
        explain(SegmentLinear(LABELS, 8), x, pixels, n_samples=100, kernel=0.05)
    with pytest.warns(UnreliableExplanationWarning, match=r"input\(s\) \[0, 1, 2\] \(data-set index \[40, 41, 42\]\)"):
        exp = explain(flat, x, f, n_samples=50, index=torch.tensor([40, 41, 42]))
    assert exp.run.quality["saturated"]


@pytest.mark.parametrize("shape", [(5, 3), (300, 300)], ids=["read_along", "too_many_to_read_along"])
def test_flags_read_in_one_go_match_nonzero(shape, monkeypatch):
    """``Flags.read`` brings the counts, the scalars and (for small flags) every set index in one read;
    ``report`` gives the same quality either way, and reads the device again only for large flags."""
    from torchlime.engine import quality as q

    g = torch.Generator().manual_seed(3)
    flags = q.Flags(
        torch.rand(shape, generator=g) < 0.3,
        torch.rand(shape, generator=g) < 0.1,
        torch.rand(shape[0], generator=g) < 0.5,
    )
    values, counts, where = flags.read(torch.tensor(7), torch.tensor([2]))
    assert values == [7, 2] and counts == flags.counts().tolist()
    expected = [f.nonzero().tolist() for f in flags]
    small = sum(f.numel() for f in flags) <= q.READ_FLAGS_MAX
    assert where == (expected if small else None)
    ours = q.report(flags, counts, where=where)
    assert ours == q.report(flags, counts)
    assert [ours[0][n] for n in ("saturated", "poor_fit", "few_samples")] == expected
    with count_syncs() as ops:
        q.report(flags, counts, where=where)
    assert len(ops) == (0 if small else 6)  # large: nonzero and tolist, per flag
