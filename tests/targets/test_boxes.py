"""``Boxes``: D-RISE scores of every box in one batched pass, checked against a slow per-sample, per-box
reference, on planted objects, with ragged box counts, a torchvision detector, a YOLO-style decode, its
errors, its host reads and its picture.

The test detector looks at every 8x8 window (stride 4) of a 32x32 image and reports those brighter than
``floor`` on average, scored by that mean and labelled 1 in the left half, 2 in the right: a bright 8x8
square aligned with a window is found with score 1, and hiding (zero-filling) it removes the detection.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import torchlime
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.targets import Boxes

from tests.helpers.syncs import count_syncs

SIZE, WIN, STRIDE, CELL = 32, 8, 4, 8
_starts = torch.arange(0, SIZE - WIN + 1, STRIDE).float()
_y, _x = torch.meshgrid(_starts, _starts, indexing="ij")
WINDOWS = torch.stack((_x.flatten(), _y.flatten(), _x.flatten() + WIN, _y.flatten() + WIN), 1)  # (49, 4)
WINDOW_LABELS = 1 + (WINDOWS[:, 0] >= SIZE // 2).long()
_cells = torch.arange(SIZE) // CELL
#: tests whose shared boxes miss some image's objects (flat scores: the quality and unmatched-box warnings are right)
QUIET = pytest.mark.filterwarnings("ignore::UserWarning")
CELLS = (_cells.view(-1, 1) * (SIZE // CELL) + _cells.view(1, -1)).view(1, 1, SIZE, SIZE)  # 4x4 grid, ids 0..15


class WindowDetector:
    """Bright-window detector (see the module docstring); ``ragged`` keeps only windows above ``floor``,
    else every window is reported (a fixed K = 49, no host reads)."""

    def __init__(self, floor: float = 0.3, ragged: bool = True) -> None:
        self.floor, self.ragged, self.calls = floor, ragged, 0

    def __call__(self, x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        self.calls += 1
        means = torch.nn.functional.avg_pool2d(x.mean(1, keepdim=True), WIN, STRIDE).flatten(1)  # (c, 49)
        boxes, labels = WINDOWS.to(x.device), WINDOW_LABELS.to(x.device)
        if not self.ragged:
            return [{"boxes": boxes, "labels": labels, "scores": m} for m in means]
        keep = means > self.floor
        return [{"boxes": boxes[k], "labels": labels[k], "scores": m[k]} for m, k in zip(means, keep)]


def planted(*squares: tuple[int, int], seed: int = 0, channels: int = 1) -> torch.Tensor:
    """(C, 32, 32): a dim noisy background with bright 8x8 squares at the (x, y) top-left corners."""
    img = 0.1 + 0.05 * torch.rand(channels, SIZE, SIZE, generator=torch.Generator().manual_seed(seed))
    for x, y in squares:
        img[:, y : y + WIN, x : x + WIN] = 1.0
    return img


def square_box(x: int, y: int) -> list[float]:
    return [float(x), float(y), float(x + WIN), float(y + WIN)]


def cell_inside(cell: int, x: int, y: int) -> bool:
    """Whether every pixel of grid cell ``cell`` lies inside the square at (x, y)."""
    inside = torch.zeros(SIZE, SIZE, dtype=torch.bool)
    inside[y : y + WIN, x : x + WIN] = True
    return bool(inside[CELLS[0, 0] == cell].all())


# ----------------------------------------------------------------------------------- (a) slow reference
def slow_drise(detector, image, mask, features, boxes, labels, valid) -> list[float]:
    """One perturbed image rebuilt from its mask (zero fill), the detector called on it alone, and each
    target box's score: max over detections of IoU x same label x score, box by box."""
    from torchvision.ops import box_iou

    pixels = mask[features]  # (H, W) bool
    found = detector((image * pixels)[None])[0]
    scores = []
    for box, label, real in zip(boxes, labels, valid):
        best = 0.0
        if real:
            for k in range(found["boxes"].shape[0]):
                if label < 0 or int(found["labels"][k]) == label:
                    iou = box_iou(torch.tensor([box]), found["boxes"][k : k + 1])[0, 0]
                    best = max(best, float(iou) * float(found["scores"][k]))
        scores.append(best)
    return scores


@pytest.mark.parametrize("given", [False, True], ids=["detected", "given"])
def test_scores_equal_a_slow_per_sample_per_box_reference(given):
    images = torch.stack((planted((0, 0), (16, 12)), planted((24, 16), (4, 20), (12, 0), seed=1)))
    detector = WindowDetector()
    if given:  # boxes given per image, one label left out on purpose: any label matches it
        target = Boxes(
            boxes=[torch.tensor([square_box(16, 12)]), torch.tensor([square_box(24, 16), [2.0, 18, 14, 30]])],
            labels=[torch.tensor([2]), torch.tensor([2, 1])],
        )
    else:
        target = Boxes(score_threshold=0.9)
    exp = torchlime.explain(detector, images, CELLS, target=target, n_samples=32, generator=3, return_samples=True)
    b, s, t = exp.outputs.shape
    assert (b, s) == (2, 32) and exp.samples.shape == (2, 32, 16)
    boxes, labels, valid = exp.run.targets.boxes, exp.target.tolist(), exp.target_valid.tolist()
    if not given:  # the targets are each image's own detections >= 0.9, in the detector's order
        ref = detector(images)
        for i in range(b):
            kept = ref[i]["scores"] >= 0.9
            n = int(kept.sum())
            assert boxes[i][:n] == ref[i]["boxes"][kept].tolist() and labels[i][:n] == ref[i]["labels"][kept].tolist()
            assert valid[i] == [True] * n + [False] * (t - n)
        assert t == 3 and valid[0] == [True, True, False]
    slow = torch.tensor(
        [
            [
                slow_drise(detector, images[i], exp.samples[i, j], exp.features[0, 0], boxes[i], labels[i], valid[i])
                for j in range(s)
            ]
            for i in range(b)
        ]
    )
    torch.testing.assert_close(exp.outputs, slow, atol=1e-5, rtol=0)
    assert exp.outputs[~exp.target_valid.unsqueeze(1).expand(-1, s, -1)].eq(0).all()
    # the same scores and fit whatever the chunk size (chunks that split the unperturbed rows too)
    small = torchlime.explain(
        detector, images, CELLS, target=target, n_samples=32, generator=3, return_samples=True, batch_size=1
    )
    torch.testing.assert_close(small.outputs, exp.outputs, atol=1e-6, rtol=0)
    torch.testing.assert_close(small.coef, exp.coef, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------------- (b) planted objects
def test_one_planted_square_is_covered_by_its_box_top_segments():
    image = planted((16, 12))[None]  # spans cells 6 and 10 (rows 12..20 of column 16..24)
    exp = torchlime.explain(
        WindowDetector(), image, CELLS, target=Boxes(score_threshold=0.9), n_samples=200, generator=0
    )
    assert exp.run.targets.boxes == [[square_box(16, 12)]] and exp.target.tolist() == [[2]]
    top3 = exp.top_features(3, by="abs")[0][0, 0].tolist()
    assert {6, 10} <= set(top3), top3
    assert set(top3[:2]) == {6, 10} and float(exp.score[0, 0]) > 0.9


def test_two_planted_squares_each_box_top_segment_lies_inside_its_own_object():
    squares = [(0, 0), (24, 16)]
    exp = torchlime.explain(
        WindowDetector(), planted(*squares)[None], CELLS, target=Boxes(score_threshold=0.9), n_samples=200, generator=1
    )
    assert exp.run.targets.boxes[0] == [square_box(*sq) for sq in squares]
    assert exp.target.tolist() == [[1, 2]]
    top = exp.top_features(1, by="abs")[0][0, :, 0].tolist()
    assert [cell_inside(c, *sq) for c, sq in zip(top, squares)] == [True, True], top
    assert not cell_inside(top[0], *squares[1]) and not cell_inside(top[1], *squares[0])


# ------------------------------------------------------------------------------------ (c) ragged T
@pytest.mark.parametrize("given", [False, True], ids=["detected", "given"])
def test_ragged_box_counts_are_padded_with_zero_coefficients_and_no_warning(given):
    one, three = [(0, 0)], [(0, 0), (24, 0), (8, 24)]
    images = torch.stack((planted(*one), planted(*three, seed=1)))
    target = (
        Boxes(
            boxes=[torch.tensor([square_box(*sq) for sq in part]) for part in (one, three)],
            labels=[torch.tensor([1]), torch.tensor([1, 2, 1])],
        )
        if given
        else Boxes(score_threshold=0.9)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exp = torchlime.explain(WindowDetector(), images, CELLS, target=target, n_samples=64, generator=2)
    assert not [w for w in caught if issubclass(w.category, UnreliableExplanationWarning)], [
        str(w.message) for w in caught
    ]
    assert exp.target_valid.tolist() == [[True, False, False], [True, True, True]]
    assert exp.target.tolist() == [[1, -1, -1], [1, 2, 1]]
    pad = ~exp.target_valid
    assert torch.equal(exp.coef[pad], torch.zeros(2, 16)) and torch.equal(exp.intercept[pad], torch.zeros(2))
    idx, values = exp.top_features(3)
    assert (idx[pad] == -1).all() and (values[pad] == 0).all() and (idx[~pad] >= 0).all()
    assert exp.run.targets.boxes[0][1:] == [[0.0] * 4] * 2
    assert (exp.score[~pad] > 0.9).all()


# ------------------------------------------------------------------------------- (d) torchvision
@pytest.mark.slow  # ~70 forwards of a detector that resizes to 320 px: 5-20 s on a shared 2-core CPU
def test_a_torchvision_detector_as_it_is_with_given_boxes():
    detection = pytest.importorskip("torchvision.models.detection")
    from torchlime.image import explain_image

    torch.manual_seed(0)
    model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=5).eval()
    images = torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    boxes = [torch.tensor([[10.0, 10, 60, 60]]), torch.tensor([[10.0, 10, 60, 60], [50, 50, 120, 100]])]
    kw = dict(target=Boxes(boxes=boxes), segments="grid", n_segments=16, n_samples=16, generator=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)  # random weights: flat scores are fine
        exp = explain_image(model, images, **kw)
        again = explain_image(model, images, **kw)
    assert exp.coef.shape == (2, 2, 16) and exp.target_valid.tolist() == [[True, False], [True, True]]
    assert all(torch.isfinite(v).all() for v in (exp.coef, exp.intercept, exp.local_pred))
    assert torch.equal(exp.score.isfinite(), exp.target_valid)  # a padded target has no fit to score: NaN
    assert exp.run.targets.boxes[1] == [b.tolist() for b in boxes[1]]
    for name in ("coef", "intercept", "score", "local_pred", "target", "target_valid"):
        torch.testing.assert_close(getattr(exp, name), getattr(again, name), rtol=0, atol=0, equal_nan=True, msg=name)


# ------------------------------------------------------------------------------- (e) decode
def yolo(x: torch.Tensor) -> torch.Tensor:
    """A YOLO-style raw output (rows, K = 49, 4 + C = 2): the window boxes and per-class scores."""
    means = torch.nn.functional.avg_pool2d(x.mean(1, keepdim=True), WIN, STRIDE).flatten(1)  # (c, 49)
    classes = torch.nn.functional.one_hot(WINDOW_LABELS - 1, 2).float() * means.unsqueeze(-1)  # (c, 49, 2)
    return torch.cat((WINDOWS.expand(x.shape[0], -1, -1), classes), -1)


def decode_yolo(out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    cls = out[..., 4:]
    return out[..., :4], cls.argmax(-1) + 1, cls.amax(-1)


@pytest.mark.parametrize("threshold", [0.9, None], ids=["detected", "given"])
def test_decode_reads_a_raw_yolo_tensor_like_the_same_detections_as_dicts(threshold):
    images = torch.stack((planted((0, 0), (16, 12)), planted((24, 16), seed=1)))
    boxes = torch.tensor([square_box(0, 0), square_box(16, 12)])
    kw = dict(n_samples=48, generator=4, return_samples=True)
    make = (lambda **d: Boxes(score_threshold=threshold, **d)) if threshold else (lambda **d: Boxes(boxes=boxes, **d))
    raw = torchlime.explain(yolo, images, CELLS, target=make(decode=decode_yolo), **kw)
    dicts = torchlime.explain(WindowDetector(ragged=False), images, CELLS, target=make(), **kw)
    torch.testing.assert_close(raw.outputs, dicts.outputs, atol=1e-6, rtol=0)
    torch.testing.assert_close(raw.coef, dicts.coef, atol=1e-5, rtol=0)
    assert torch.equal(raw.target, dicts.target) and raw.run.targets == dicts.run.targets


def test_a_scripted_detector_output_losses_then_detections_is_read():
    images = planted((0, 0))[None]
    scripted = lambda x: ({}, WindowDetector()(x))  # noqa: E731 - torch.jit.script(detector) returns this
    a = torchlime.explain(scripted, images, CELLS, target=Boxes(score_threshold=0.9), n_samples=32, generator=0)
    b = torchlime.explain(WindowDetector(), images, CELLS, target=Boxes(score_threshold=0.9), n_samples=32, generator=0)
    assert torch.equal(a.coef, b.coef)


@QUIET
def test_boxes_and_labels_as_python_numbers_or_numpy_equal_tensors():
    np = pytest.importorskip("numpy")
    images = torch.stack((planted((0, 0), (16, 12)), planted((24, 16), seed=1)))
    boxes = [square_box(0, 0), square_box(16, 12)]
    kw = dict(n_samples=32, generator=0)
    ref = torchlime.explain(
        WindowDetector(), images, CELLS, target=Boxes(torch.tensor(boxes), torch.tensor([1, 2])), **kw
    )
    for target in (Boxes(boxes, [1, 2]), Boxes(np.array(boxes), np.array([1, 2]))):
        exp = torchlime.explain(WindowDetector(), images, CELLS, target=target, **kw)
        assert torch.equal(exp.coef, ref.coef) and exp.run.targets == ref.run.targets


# ------------------------------------------------------------------------------- (f) errors
def test_no_detection_above_the_threshold_names_it_and_suggests_boxes():
    with pytest.raises(ValueError, match=r"score_threshold=0\.5 on any image \(best 0\.\d+\); pass boxes="):
        torchlime.explain(WindowDetector(ragged=False), planted()[None], CELLS, target=Boxes(), n_samples=16)


@pytest.mark.parametrize(
    "boxes",
    [torch.zeros(3, 5), torch.zeros(4), torch.zeros(1, 2, 3, 4), [torch.zeros(4)], [], (torch.zeros(2, 4), 3)],
    ids=["T-5", "flat", "4d", "list-of-flat", "empty-list", "not-tensors"],
)
def test_boxes_of_the_wrong_shape_are_refused(boxes):
    with pytest.raises(ValueError, match=r"`boxes` must be \(T, 4\), \(B, T, 4\) or a list of \(T_b, 4\) tensors"):
        Boxes(boxes=boxes)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(boxes=torch.zeros(0, 4)), ValueError, "`boxes` must hold at least one box"),
        (dict(boxes=torch.tensor([[4.0, 0, 0, 4]])), ValueError, r"x2 >= x1 and y2 >= y1"),
        (dict(boxes=torch.tensor([[0.0, 0, float("nan"), 4]])), ValueError, "must be finite"),
        (dict(boxes=torch.zeros(2, 4), labels=torch.tensor([1, 2, 3])), ValueError, r"label per box \(\[2\]"),
        (dict(boxes=torch.zeros(2, 4), labels=torch.tensor([1.0, 2.0])), ValueError, "integer label per box"),
        (dict(boxes=[torch.zeros(1, 4)] * 2, labels=[torch.tensor([1])]), ValueError, r"\(\[1, 1\] boxes"),
        (dict(boxes=torch.zeros(2, 4), labels=torch.tensor([1, -1])), ValueError, "class indices >= 0"),
        (dict(labels=torch.tensor([1])), ValueError, "`labels` needs `boxes`"),
        (dict(score_threshold="0.5"), TypeError, "`score_threshold` must be a number"),
        (dict(score_threshold=True), TypeError, "`score_threshold` must be a number"),
        (dict(decode=3), TypeError, "`decode` must be a callable"),
    ],
)
def test_argument_errors_name_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        Boxes(**kwargs)


def test_given_boxes_are_copied_at_construction():
    boxes, labels = torch.tensor([[0.0, 0, 8, 8]]), torch.tensor([1])
    target = Boxes(boxes=boxes, labels=labels)
    boxes.add_(4)
    labels.fill_(0)  # the caller edits its tensors afterwards: the target keeps what it was given
    assert target.boxes.tolist() == [[0.0, 0, 8, 8]] and target.labels.tolist() == [1]
    assert [p.tolist() for p in target._parts] == [[[0.0, 0, 8, 8]]]


@pytest.mark.parametrize(
    "boxes", [torch.tensor([[[0.0, 0, 8, 8]]] * 3), [torch.tensor([[0.0, 0, 8, 8]])] * 3], ids=["tensor", "list"]
)
def test_per_image_boxes_for_another_batch_are_refused_before_the_model_runs(boxes):
    detector = WindowDetector()
    with pytest.raises(ValueError, match="`boxes` holds boxes of 3 images, not of the 2 explained"):
        torchlime.explain(detector, planted().expand(2, -1, -1, -1), CELLS, target=Boxes(boxes=boxes), n_samples=16)
    assert detector.calls == 0


def test_an_output_that_is_no_detections_asks_for_decode():
    with pytest.raises(ValueError, match="pass decode= for other outputs"):
        torchlime.explain(
            yolo, planted()[None], CELLS, target=Boxes(boxes=torch.tensor([[0.0, 0, 8, 8]])), n_samples=16
        )
    bad = lambda out: (out[..., :4], out[..., 4], out[..., 4:])  # noqa: E731 - scores (c, K, 2): a wrong shape
    with pytest.raises(ValueError, match=r"got shapes \(\d+, 49, 4\), \(\d+, 49\), \(\d+, 49, 2\)"):
        torchlime.explain(yolo, planted()[None], CELLS, target=Boxes(score_threshold=0.9, decode=bad), n_samples=16)


@QUIET
def test_the_callers_tensors_are_never_modified():
    images = torch.stack((planted((0, 0)), planted((24, 16), seed=1)))
    boxes, labels = torch.tensor([[0.0, 0, 8, 8], [24, 16, 32, 24]]), torch.tensor([1, 2])
    per_image = [boxes[:1].clone(), boxes.clone()]
    before = [t.clone() for t in (images, CELLS, boxes, labels, *per_image)]
    for target in (Boxes(boxes=boxes, labels=labels), Boxes(boxes=per_image), Boxes(score_threshold=0.9)):
        torchlime.explain(WindowDetector(), images, CELLS, target=target, n_samples=32)
    after = (images, CELLS, boxes, labels, *per_image)
    assert all(torch.equal(a, b) for a, b in zip(before, after))


# ------------------------------------------------------------------------------- host reads
@pytest.mark.parametrize("given", [False, True], ids=["detected", "given"])
def test_a_boxes_call_reads_the_host_once_more_than_a_plain_call_never_per_chunk(given):
    images = torch.stack((planted((0, 0), (16, 12)), planted((24, 16), seed=1)))
    boxes = torch.tensor([square_box(0, 0), square_box(16, 12)])
    plain_model = lambda x: x.flatten(1)[:, :3]  # noqa: E731
    torchlime.explain(plain_model, images, CELLS, n_samples=128, batch_size=64)
    with count_syncs() as plain:
        torchlime.explain(plain_model, images, CELLS, n_samples=128, batch_size=64)
    counts = []
    for chunk in (64, 8):  # 5 chunks vs 33 chunks
        detector = WindowDetector(ragged=False)  # no host reads of its own
        target = Boxes(boxes=boxes) if given else Boxes(score_threshold=0.9)
        torchlime.explain(detector, images, CELLS, target=target, n_samples=128, batch_size=chunk)
        uploads: list[str] = []
        with count_syncs(uploads) as ops:
            torchlime.explain(detector, images, CELLS, target=target, n_samples=128, batch_size=chunk)
        counts.append((len(ops), len(uploads)))
    assert counts[0] == counts[1], counts
    assert counts[0][0] <= len(plain) + 1, (counts, plain)


# ------------------------------------------------------------------------------- the picture


def ragged_explanation():
    images = torch.stack((planted((0, 0)), planted((0, 0), (24, 0), (8, 24), seed=1)))
    return torchlime.explain(
        WindowDetector(), images, CELLS, target=Boxes(score_threshold=0.9), n_samples=64, generator=0
    ), images


def test_plot_boxes_draws_one_panel_per_real_box_with_its_heatmap(plt, tmp_path):
    from torchlime.image.viz_boxes import plot_boxes

    exp, images = ragged_explanation()
    fig = plot_boxes(exp, images, index=1, k=2, class_names=["background", "left", "right"])
    panels, bar = fig.axes[:-1], fig.axes[-1]
    assert [ax.get_title() for ax in panels] == [
        f"box {j}: {name} · R² {float(exp.score[1, j]):.2f}" for j, name in enumerate(["left", "right", "left"])
    ]
    assert "red supports the target, blue opposes it" in bar.get_ylabel() and "the box" in bar.get_ylabel()
    for ax, box in zip(panels, exp.run.targets.boxes[1]):
        heat = ax.images[-1]
        assert heat.get_cmap().name == "RdBu_r" and heat.get_clim()[0] == -heat.get_clim()[1]
        outline = [p for p in ax.patches if p.get_width() == box[2] - box[0]]
        assert outline and tuple(outline[0].get_xy()) == (box[0], box[1])
    fig.savefig(tmp_path / "boxes.png")
    assert (tmp_path / "boxes.png").stat().st_size > 0
    single = plot_boxes(exp, images, index=0)  # image 0: one real box, two padded targets skipped
    assert [ax.get_title().split(" ·")[0] for ax in single.axes[:-1]] == ["box 0: label 1"]


@QUIET
def test_plot_boxes_errors(plt):
    from torchlime.image.viz_boxes import plot_boxes

    exp, images = ragged_explanation()
    plain = torchlime.explain(lambda x: x.flatten(1)[:, :3], images, CELLS, n_samples=16)
    with pytest.raises(ValueError, match="must come from a Boxes target"):
        plot_boxes(plain, images)
    with pytest.raises(ValueError, match=r"`index` must be an int in \[0, 2\), got 2"):
        plot_boxes(exp, images, index=2)
    with pytest.raises(ValueError, match=r"`images` must be the \(2, C, H, W\) explained images"):
        plot_boxes(exp, images[:1])


@QUIET
@pytest.mark.parametrize(("ragged", "n_images"), [(True, 2), (False, 2), (False, 1)])
def test_a_pass_scored_at_once_has_the_bits_of_chunk_by_chunk_scoring(monkeypatch, ragged, n_images):
    """``Bound.whole_pass``: the detections of a pass are scored after its last chunk, the same bits (a pass of
    every sample of every input becomes the scores without a scatter: one input's as a view, several's cat)."""
    from torchlime.engine import rows

    images = torch.stack([planted((8, 8), seed=1), planted((16, 4), (0, 20), seed=2)])[:n_images]
    run = dict(segments=CELLS, target=Boxes(), n_samples=48, batch_size=16, generator=3, return_samples=True)
    seen: list[int] = []
    score_kept = rows.Run.score_kept

    def counted(self, order=None):
        seen.append(len(self._kept))
        score_kept(self, order)

    monkeypatch.setattr(rows.Run, "score_kept", counted)
    once = torchlime.explain_image(WindowDetector(ragged=ragged), images, **run)
    assert len(seen) == 1 and seen[0] > 2  # the unperturbed rows and several chunks' rows, scored at once
    bind = Boxes.bind
    monkeypatch.setattr(Boxes, "bind", lambda self, ref, b: dataclasses.replace(bind(self, ref, b), whole_pass=False))
    seen.clear()
    each = torchlime.explain_image(WindowDetector(ragged=ragged), images, **run)
    assert len(seen) > 2 and max(seen) <= 2  # chunk by chunk (the first chunk holds the unperturbed rows too)
    for name in ("coef", "intercept", "score", "local_pred", "outputs", "target_valid"):
        torch.testing.assert_close(getattr(once, name), getattr(each, name), rtol=0, atol=0, equal_nan=True)


@QUIET
def test_targets_known_to_be_all_there_skip_the_padding_masks_with_the_same_explanation(monkeypatch):
    """``Bound.all_valid`` (no padded target, known on the host): the engine masks no quality flag and no score
    for padding, and the explanation is the one the masks give."""
    images = torch.stack([planted((8, 8), (20, 4), seed=1), planted((16, 4), (0, 20), seed=2)])
    given = Boxes(boxes=torch.tensor([[8.0, 8, 16, 16], [16, 4, 24, 12]]))  # both images' boxes: none padded
    run = dict(segments=CELLS, target=given, n_samples=48, batch_size=16, generator=3)
    bind = Boxes.bind
    bound = []
    monkeypatch.setattr(Boxes, "bind", lambda self, ref, b: bound.append(bind(self, ref, b)) or bound[-1])
    fast = torchlime.explain_image(WindowDetector(), images, **run)
    assert bound[-1].all_valid and bool(bound[-1].valid.all())
    monkeypatch.setattr(Boxes, "bind", lambda self, ref, b: dataclasses.replace(bind(self, ref, b), all_valid=False))
    masked = torchlime.explain_image(WindowDetector(), images, **run)
    for name in ("coef", "intercept", "score", "local_pred", "target", "target_valid"):
        torch.testing.assert_close(getattr(fast, name), getattr(masked, name), rtol=0, atol=0, equal_nan=True)
    assert fast.run.quality == masked.run.quality
    monkeypatch.setattr(Boxes, "bind", lambda self, ref, b: bound.append(bind(self, ref, b)) or bound[-1])
    ragged = torchlime.explain_image(WindowDetector(), images, **dict(run, target=Boxes(score_threshold=0.3)))
    assert not bound[-1].all_valid and not ragged.target_valid.all()
    assert ragged.score[~ragged.target_valid].isnan().all() and not ragged.score[ragged.target_valid].isnan().any()
