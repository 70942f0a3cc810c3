"""Explanation: heatmap, top features, device moves, save/load, image pictures."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from torchlime import Explanation, explain
from torchlime.image.viz import image_and_mask

from tests.helpers import SegmentLinear, grid_labels


@pytest.fixture
def exp_and_images():
    labels = grid_labels(12, 12, 2, 3)
    model = SegmentLinear(labels, 6, n_out=4)
    x = torch.rand(2, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    return explain(model, x, labels.view(1, 1, 12, 12), target="top2", n_samples=64, return_samples=True), x


def test_heatmap_paints_coefficients(exp_and_images):
    exp, x = exp_and_images
    h = exp.heatmap()
    assert h.shape == (2, 2, 3, 12, 12)
    lab = exp.features[0, 0]
    for f in range(6):
        assert torch.all(h[0, 1, :, lab == f] == exp.coef[0, 1, f])
    assert exp.heatmap(1).shape == (2, 3, 12, 12)


def test_top_features(exp_and_images):
    exp, _ = exp_and_images
    idx, val = exp.top_features(3)  # by |weight| unless told otherwise
    assert idx.shape == (2, 2, 3)
    assert torch.all(val.abs()[..., :-1] >= val.abs()[..., 1:])
    assert torch.equal(val, exp.coef.gather(-1, idx))
    assert torch.equal(idx, exp.top_features(3, by="abs")[0])
    idx_val, val_val = exp.top_features(6, by="value")
    assert torch.all(val_val[..., :-1] >= val_val[..., 1:])
    assert torch.equal(val_val, exp.coef.gather(-1, idx_val))
    with pytest.raises(ValueError, match="`by` must be 'value', 'abs' or 't', got 'rank'"):
        exp.top_features(2, by="rank")


def test_save_load_roundtrip(exp_and_images, tmp_path):
    exp, _ = exp_and_images
    path = tmp_path / "e.pt"
    exp.save(path)
    back = Explanation.load(path)
    for name in ("coef", "intercept", "score", "local_pred", "target", "features", "samples", "outputs", "weights"):
        assert torch.equal(getattr(back, name), getattr(exp, name))
    assert back.input_shape == exp.input_shape
    assert back.meta["n_samples"] == 64


def test_to_device(exp_and_images, device):
    exp, _ = exp_and_images
    moved = exp.to(device)
    assert moved.coef.device.type == device.type and moved.samples.device.type == device.type
    assert exp.coef.device.type == "cpu"


def test_image_and_mask_like_lime(exp_and_images):
    exp, x = exp_and_images
    out, mask = image_and_mask(x, exp, k=2, hide_rest=True)
    assert out.shape == x.shape and mask.shape == (2, 12, 12)
    top = exp.top_features(2, by="value")[0][:, 0]  # lime's positive_only: the most supporting features
    for b in range(2):
        expect = torch.zeros(12, 12, dtype=torch.long)
        for f in top[b]:
            if exp.coef[b, 0, f] > 0:
                expect[exp.features[b, 0] == f] = 1
        assert torch.equal(mask[b], expect)
        assert torch.all(out[b][:, mask[b] == 0] == 0)
    _, both = image_and_mask(x, exp, positive_only=False, k=6)
    assert set(both.unique().tolist()) <= {-1, 0, 1}
    swapped = image_and_mask(exp, x, positive_only=False, k=6)  # plot_image_explanation's order
    assert torch.equal(swapped[1], both)


def test_plot_index_out_of_range_is_named(exp_and_images):
    pytest.importorskip("matplotlib")
    from torchlime.image.viz import plot_image_explanation

    exp, x = exp_and_images
    with pytest.raises(IndexError, match=r"`index` must be an int in \[-2, 2\) for an explanation of 2 image"):
        plot_image_explanation(exp, x, index=5)
    plot_image_explanation(exp, x, index=torch.tensor(1))  # a 0-d index, as a label tensor gives it


def test_picture_is_written(exp_and_images, tmp_path):
    pytest.importorskip("matplotlib")
    from torchlime.image.viz import save_image_explanation

    exp, x = exp_and_images
    path = save_image_explanation(exp, x, tmp_path / "p.png", index=1, truth=torch.zeros(12, 12, dtype=torch.bool))
    assert path.stat().st_size > 1000


def test_indexing_gives_the_explanations_of_single_inputs_and_slices():
    x = torch.rand(3, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    labels = grid_labels(8, 8, 2, 2)
    exp = explain(
        SegmentLinear(labels, 4), x, labels.view(1, 1, 8, 8), n_samples=64, target="top2", return_samples=True
    )
    flags = {"low_r2": [[1, 0], [2, 1]]}  # flags of inputs 1 and 2
    exp = dataclasses.replace(exp, run=dataclasses.replace(exp.run, quality=flags, samples_used=[64, 63, 62]))
    assert len(exp) == 3 and exp == exp and exp != exp[0:3]  # identity, not tensor comparison
    one = exp[-1]
    assert len(one) == 1 and torch.equal(one.coef, exp.coef[2:]) and torch.equal(one.samples, exp.samples[2:])
    assert one.run.quality["low_r2"] == [[0, 1]] and "low_r2" in one.run.unreliable and one.run.samples_used == [62]
    part = exp[:2]
    assert torch.equal(part.outputs, exp.outputs[:2]) and part.run.quality["low_r2"] == [[1, 0]]
    assert exp[0].run.unreliable is None and exp[0].perturbation is None
    assert part.meta["quality"] == part.run.quality and part.meta["samples_used"] == [64, 63]  # the rendering
    with pytest.raises(IndexError, match=r"`key` must be in \[-3, 3\) for an explanation of 3 input\(s\), got 3"):
        exp[3]
    with pytest.raises(ValueError, match="step 1, got step 2"):
        exp[::2]
    with pytest.raises(TypeError, match="`key` must be an int or a slice, got str"):
        exp["0"]
    with pytest.raises(IndexError, match=r"`key` selects no input: slice\(3, None, None\) of an explanation of 3"):
        exp[3:]  # an explanation of no input has nothing to show, save or measure


def test_to_the_same_device_spelled_otherwise_keeps_the_record(exp_and_images):
    exp, _ = exp_and_images
    assert exp.to("cpu:0").perturbation is exp.perturbation
    assert exp[np.int64(1)].coef.shape[0] == 1


def test_a_slice_saves_only_its_own_rows(exp_and_images, tmp_path):
    exp, _ = exp_and_images
    exp[0].save(tmp_path / "one.pt")
    exp.save(tmp_path / "all.pt")
    assert (tmp_path / "one.pt").stat().st_size < (tmp_path / "all.pt").stat().st_size


def test_an_explanation_pickles_and_deep_copies(tmp_path):
    """Pickled and deep-copied with its pending standard errors computed, a file's extra entries kept read-only."""
    import copy
    import pickle

    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    exp = explain(net, torch.randn(3, 6), torch.arange(6).view(1, 6), n_samples=200)
    assert exp.coef_se_record.value is None  # pending
    for other in (pickle.loads(pickle.dumps(exp)), copy.deepcopy(exp)):
        assert torch.equal(other.coef, exp.coef) and torch.equal(other.coef_se, exp.coef_se)
        assert other.se_method == exp.se_method == "design" and other.meta == exp.meta
    exp.save(tmp_path / "e.pt")
    loaded = Explanation.load(tmp_path / "e.pt")
    again = pickle.loads(pickle.dumps(loaded))
    assert dict(again.stored) == dict(loaded.stored) and again.meta == loaded.meta
    with pytest.raises(TypeError):
        loaded.stored["x"] = 1  # read-only
