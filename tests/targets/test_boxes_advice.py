"""``Boxes`` says why its coefficients are 0: given boxes that no unperturbed detection matches are named in one
``UserWarning`` per call, with the detector's detection count and its own score threshold as the usual cause
(torchvision's ``box_score_thresh``); its pictures name the box they draw.

The detectors are small fakes returning torchvision's list of dicts: ``Thresholded`` drops its detections scored
under its own ``box_score_thresh``, as a torchvision detector with random weights does with every box."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchlime
from torchlime.targets import Boxes

HALVES = torch.arange(64).view(1, 1, 8, 8) // 32  # 2 features: the top and the bottom half
IMAGES = torch.rand(2, 1, 8, 8, generator=torch.Generator().manual_seed(0)) + 1
BOX = [0.0, 0.0, 4.0, 4.0]


class Thresholded:
    """One box over the top-left quarter, scored 0.01 x its brightness (random weights: a low score), kept when
    the score reaches ``box_score_thresh`` (torchvision's default: 0.05)."""

    def __init__(self, box_score_thresh: float = 0.05) -> None:
        self.box_score_thresh = box_score_thresh

    def __call__(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        scores = x[:, :, :4, :4].mean((1, 2, 3)) * 0.01
        out = []
        for s in scores:
            keep = (s >= self.box_score_thresh).view(1)
            boxes, labels = torch.tensor([BOX])[keep], torch.tensor([3])[keep]
            out.append({"boxes": boxes, "labels": labels, "scores": s.view(1)[keep]})
        return out


def empty(x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """A detector that detects nothing."""
    return [{"boxes": torch.zeros(0, 4), "labels": torch.zeros(0, dtype=torch.long), "scores": torch.zeros(0)}] * len(x)


def boxes_warnings(model, target: Boxes) -> tuple[list[str], torchlime.Explanation]:
    """The Boxes warnings of one call (the quality warning of its flat scores left out), and the explanation."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp = torchlime.explain(model, IMAGES, HALVES, target=target, n_samples=32)
    return [str(w.message) for w in caught if str(w.message).startswith("Boxes:")], exp


@pytest.mark.parametrize("model", [empty, Thresholded()], ids=["no-detections", "own-threshold"])
def test_given_boxes_no_detection_matches_are_named_once_per_call(model):
    found, exp = boxes_warnings(model, Boxes(boxes=[BOX, [4.0, 4.0, 8.0, 8.0]], labels=[3, 3]))
    assert len(found) == 1  # one warning for the 4 unmatched (image, box) pairs
    assert found[0].startswith("Boxes: box 0 of 2 (0, 0, 4, 4), label 3, of image 0 (the detector returned 0 ")
    assert "box 0 of 2 (0, 0, 4, 4), label 3, of image 1" in found[0] and " and 1 more matched no detection" in found[0]
    assert "fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None, box_score_thresh=0.0)" in found[0]
    assert not exp.coef.any()  # what the warning explains


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # box 1: flat
def test_the_detectors_own_threshold_at_zero_explains_the_box():
    named = r"box 1 of 2 \(4, 4, 8, 8\), any label, of image 0 \(the detector returned 1 detection on it\)"
    with pytest.warns(UserWarning, match=named):
        torchlime.explain(Thresholded(0.0), IMAGES, HALVES, target=Boxes(boxes=[BOX, [4, 4, 8, 8]]), n_samples=32)
    found, exp = boxes_warnings(Thresholded(0.0), Boxes(boxes=[BOX]))
    assert found == [] and bool(exp.coef[:, 0, 0].gt(0).all())  # the top half holds the box: it supports it


def test_no_detection_to_explain_names_the_count_and_the_detectors_threshold():
    with pytest.raises(ValueError, match=r"returned 0 detections on the 2 unperturbed images: .*box_score_thresh=0\.0"):
        torchlime.explain(Thresholded(), IMAGES, HALVES, target=Boxes(score_threshold=0.001), n_samples=16)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_pictures_name_the_box(plt):
    from matplotlib.figure import Figure

    from torchlime.image.viz import plot_image_explanation
    from torchlime.image.viz_boxes import plot_boxes

    boxes = [torch.tensor([BOX, [4.0, 4.0, 8.0, 8.0]]), torch.tensor([BOX])]  # image 1: 1 box and a padded target
    labels = [torch.tensor([3, 1]), torch.tensor([3])]
    exp = torchlime.explain(Thresholded(0.0), IMAGES, HALVES, target=Boxes(boxes=boxes, labels=labels), n_samples=32)
    fig = plot_image_explanation(exp, IMAGES, index=0, target_index=1, class_names=["a", "b", "c", "d"])
    caption, flag = fig.get_suptitle().split("\n")  # box 1 matches nothing: its fit is flagged too
    assert caption == "box 1 of 2: (4, 4, 8, 8), b" and flag.startswith("unreliable fit: ")
    assert [(p.get_x(), p.get_width()) for p in fig.axes[2].patches] == [(4 * 32 - 0.5, 4 * 32)]  # drawn 32x

    def caption_of(**kw: int) -> str:
        return plot_image_explanation(exp, IMAGES, **kw).get_suptitle().partition("\n")[0]

    assert caption_of(index=1) == "box 0 of 1: (0, 0, 4, 4), label 3"
    assert caption_of(index=1, target_index=1) == "target 1: padding (image 1 has 1 box)"
    plain = torchlime.explain(lambda x: x.flatten(1)[:, :3], IMAGES, HALVES, n_samples=16)
    assert plot_image_explanation(plain, IMAGES).get_suptitle() == ""  # no box: no title
    assert isinstance(plot_boxes(exp, IMAGES, index=0), Figure)
