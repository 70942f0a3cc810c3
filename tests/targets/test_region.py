"""``Region``: scores equal a slow per-sample, per-region reference; a planted patch is found; ragged T is
padded and marked; torchvision's DeepLab runs as it is; errors name their argument; the host reads do not
grow with the chunks; ``plot_regions`` draws one panel per valid target."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import torchlime
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.targets import Region
from torchlime.targets.region import _ScorePlan, region_scores

from tests.helpers.syncs import count_syncs

H = W = 8
CELLS = (torch.arange(H).view(H, 1) // 4 * 2 + torch.arange(W) // 4).view(1, 1, H, W)  # 2x2 cells
ROWS = (torch.arange(H * W) // (2 * W)).view(1, 1, H, W)  # 4 bands of 2 rows


class SegNet(torch.nn.Module):
    """A small seeded conv net: (B, 3, H, W) -> (B, 4, H, W) logits, or (B, 4, H/2, W/2) with ``pool``."""

    def __init__(self, pool: bool = False, as_dict: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1))
        self.pool, self.as_dict = pool, as_dict

    def forward(self, x):
        y = self.body(x) * 3
        y = F.avg_pool2d(y, 2) if self.pool else y
        return {"out": y} if self.as_dict else y


def logits(model, x):
    out = model(x)
    return out["out"] if isinstance(out, dict) else out


def slow_targets(model, x, mask, classes):
    """Per input: [(class, region (h, w) float)] fixed on the unperturbed prediction, one at a time."""
    with torch.no_grad():
        pred = logits(model, x).argmax(1)
    n_cls = logits(model, x[:1]).shape[1]
    out = []
    for b in range(x.shape[0]):
        if mask is None:
            ks = classes if classes is not None else sorted(set(pred[b].flatten().tolist()))
            out.append([(k, (pred[b] == k).float()) for k in ks])
            continue
        m = (
            mask.float().reshape(-1, *mask.shape[-3:])
            if mask.ndim == 4
            else mask.float().reshape(1, -1, *mask.shape[-2:])
        )
        m = m[b if m.shape[0] > 1 else 0]
        targets = []
        for r in range(m.shape[0]):
            reg = F.interpolate(m[r][None, None], size=pred.shape[-2:], mode="nearest")[0, 0]
            k = classes[r] if classes is not None else int(torch.bincount(pred[b][reg > 0], minlength=n_cls).argmax())
            targets.append((k, reg))
        out.append(targets)
    return out


def slow_scores(model, x, exp, fill, targets, reduce, probability):
    """(B, S, T): every sample rebuilt from its mask and the fill, run alone, reduced region by region."""
    samples, feats = exp.samples, exp.features
    b_n, s_n = samples.shape[:2]
    t_n = max(len(t) for t in targets)
    out = torch.zeros(b_n, s_n, t_n)
    for b in range(b_n):
        for s in range(s_n):
            keep = samples[b, s][feats[b]]  # (1, H, W)
            with torch.no_grad():
                y = logits(model, torch.where(keep, x[b], fill)[None])[0]
            y = y.softmax(0) if probability else y
            for t, (k, reg) in enumerate(targets[b]):
                if reg.sum() > 0:
                    total = (y[k] * reg).sum()
                    out[b, s, t] = total / reg.sum() if reduce == "mean" else total
    labels = torch.full((b_n, t_n), -1)
    for b, tb in enumerate(targets):
        for t, (k, reg) in enumerate(tb):
            labels[b, t] = k if reg.sum() > 0 else -1
    return out, labels


GEN = torch.Generator().manual_seed(3)
MASKS = {
    "hw": (torch.rand(H, W, generator=GEN) > 0.5),
    "rhw": torch.stack([ROWS[0, 0] == r for r in (0, 2, 3)]),
    "overlap": torch.stack([ROWS[0, 0] <= 1, ROWS[0, 0] >= 1]),
    "brhw": torch.rand(2, 3, H, W, generator=GEN) > 0.6,
}
CASES = [
    ("none", None, "mean", False),
    ("none", None, "sum", False),
    ("none", [1, 3], "mean", False),
    ("none", [2, 2], "mean", False),  # one class twice: not disjoint, the loop path
    ("none", None, "mean", True),
    ("hw", None, "mean", False),
    ("rhw", [0, 2, 1], "mean", False),
    ("rhw", None, "sum", True),
    ("overlap", None, "mean", False),
    ("brhw", None, "mean", False),
    ("brhw", [3, 1, 0], "sum", False),
]


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")
@pytest.mark.parametrize("pool", [False, True], ids=["full", "half-res"])
@pytest.mark.parametrize("mask,classes,reduce,probability", CASES)
def test_scores_equal_a_slow_reference(mask, classes, reduce, probability, pool):
    model, fill = SegNet(pool=pool), 0.25
    x = torch.rand(2, 3, H, W, generator=torch.Generator().manual_seed(1))
    m = None if mask == "none" else MASKS[mask]
    target = Region(mask=m, classes=classes, reduce=reduce, probability=probability)
    exp = torchlime.explain(model, x, CELLS, target=target, n_samples=24, baseline=fill, return_samples=True)
    ref, labels = slow_scores(model, x, exp, fill, slow_targets(model, x, m, classes), reduce, probability)
    assert exp.outputs.shape == ref.shape
    torch.testing.assert_close(exp.outputs, ref, atol=1e-5, rtol=1e-5)
    assert torch.equal(exp.target, labels) and torch.equal(exp.target_valid, labels >= 0)


def test_both_scoring_paths_agree_and_chunking_does_not_matter():
    torch.manual_seed(0)
    maps, rows = torch.randn(10, 5, 6, 6), torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    pred = torch.randn(3, 5, 6, 6).argmax(1).flatten(1)
    cls = torch.tensor([[0, 1, 4], [2, 3, 0], [1, 0, 0]])
    weights = (pred.unsqueeze(1) == cls.unsqueeze(-1)).float() * torch.tensor(
        [[1, 1, 1], [1, 1, 0], [1, 0, 0]]
    ).unsqueeze(-1)
    fast, loop = (region_scores(maps, rows, _ScorePlan(cls, weights, d)) for d in (True, False))
    torch.testing.assert_close(fast, loop, atol=1e-6, rtol=1e-6)
    x = torch.rand(2, 3, H, W, generator=torch.Generator().manual_seed(1))
    outs = [
        torchlime.explain(SegNet(), x, CELLS, target=Region(), n_samples=24, batch_size=c, return_samples=True).outputs
        for c in (48, 16, 1)
    ]
    for other in outs[1:]:
        torch.testing.assert_close(other, outs[0], atol=1e-6, rtol=1e-6)


class PlantedSeg(torch.nn.Module):
    """Class 1's logit at every pixel = 6 x the reddest 4x4 cell's excess redness + 0.3 x the pixel's
    brightness - 1; class 0's is 0. A red patch anywhere drives class 1 everywhere, far from the patch."""

    def forward(self, x):
        redness = F.avg_pool2d(x[:, :1] - x[:, 1:2] - x[:, 2:3], 4)  # (B, 1, H/4, W/4)
        evidence = (redness - 0.5).relu().amax((1, 2, 3)).view(-1, 1, 1)
        one = 6 * evidence + 0.3 * x.mean(1) - 1
        return torch.stack((torch.zeros_like(one), one), 1)


@pytest.mark.parametrize("mask", [None, "quadrant"])
def test_planted_patch_outside_the_region_is_its_top_segment(mask):
    size, patches = 16, [0, 5, 9, 2]  # 4x4 cells of 4x4 pixels; none in the bottom-right quadrant
    cells = (torch.arange(size).view(-1, 1) // 4 * 4 + torch.arange(size) // 4).view(1, 1, size, size)
    x = torch.rand(len(patches), 3, size, size, generator=torch.Generator().manual_seed(5))
    for b, cell in enumerate(patches):
        r, c = cell // 4 * 4, cell % 4 * 4
        x[b, :, r : r + 4, c : c + 4] = torch.tensor([1.0, 0.0, 0.0]).view(3, 1, 1)
    quadrant = torch.zeros(size, size, dtype=torch.bool)
    quadrant[8:, 8:] = True
    target = Region() if mask is None else Region(mask=quadrant, classes=[1])
    exp = torchlime.explain(PlantedSeg(), x, cells, target=target, n_samples=200, generator=0)
    assert exp.target.tolist() == [[1]] * len(patches)
    top, _ = exp.top_features(1, by="abs")
    assert top[:, 0, 0].tolist() == patches
    assert (exp.coef[torch.arange(len(patches)), 0, patches] > 0).all()


def ragged_images():
    """4-channel images whose argmax (an identity net) holds classes {0, 2} and {0, 1, 3}."""
    x = torch.rand(2, 4, H, W, generator=torch.Generator().manual_seed(2)) * 0.01
    x[0, 0, :, :4], x[0, 2, :, 4:] = 1, 1
    x[1, 0, :3], x[1, 1, 3:6], x[1, 3, 6:] = 1, 1, 1
    return x


def identity_net():
    net = torch.nn.Conv2d(4, 4, 1, bias=False)
    net.weight.data = torch.eye(4).view(4, 4, 1, 1) * 10
    return net


@pytest.mark.parametrize(
    "classes,targets", [(None, [[0, 2, -1], [0, 1, 3]]), ([2, 3], [[2, -1], [-1, 3]])], ids=["predicted", "given"]
)
def test_ragged_targets_padded_and_marked_without_quality_warnings(classes, targets):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreliableExplanationWarning)
        exp = torchlime.explain(identity_net(), ragged_images(), CELLS, target=Region(classes=classes), n_samples=64)
    assert exp.target.tolist() == targets
    valid = exp.target_valid
    assert torch.equal(valid, exp.target >= 0)
    assert (exp.coef[~valid] == 0).all() and (exp.coef[valid].abs().sum(-1) > 0).all()
    assert (exp.score[valid] > 0.9).all()  # the region's mean logit is linear in the masks (ridge shrinks)


def test_torchvision_deeplab_as_it_is():
    segmentation = pytest.importorskip("torchvision.models.segmentation")
    from torchlime.image import explain_image

    torch.manual_seed(0)
    model = segmentation.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4).eval()
    images = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    run = lambda: explain_image(  # noqa: E731
        model, images, target=Region(), segments="grid", n_segments=16, n_samples=32, generator=0
    )
    with warnings.catch_warnings():  # random weights: outputs barely vary, the quality check says so
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        one, two = run(), run()
    t = one.target.shape[1]
    assert one.coef.shape == (2, t, 16) and one.target_valid.shape == (2, t) and one.target_valid[:, 0].all()
    assert torch.isfinite(one.coef).all() and torch.isfinite(one.intercept).all()
    assert torch.equal(one.coef, two.coef) and torch.equal(one.target, two.target)


class Flat(torch.nn.Module):
    def forward(self, x):
        return x.flatten(1)[:, :4]


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        (dict(mask=torch.ones(1, 1, 1, H, W)), ValueError, r"`mask` must be \(H, W\), \(R, H, W\) or \(B, R, H, W\)"),
        (dict(mask=torch.ones(1)), ValueError, r"`mask` must be \(H, W\)"),
        (dict(mask=torch.full((H, W), 2.0)), ValueError, r"`mask` must hold bool or 0-1 values"),
        (dict(mask=[[1, 0]]), TypeError, r"`mask` must be a torch.Tensor"),
        (dict(mask=torch.ones(2, H, W), classes=[1]), ValueError, r"`classes` must give one class per region \(2\)"),
        (dict(classes=[-1]), ValueError, r"`classes` must be a non-empty list of class indices >= 0"),
        (dict(classes=[1.5]), TypeError, r"`classes` must be integer class indices"),
        (dict(reduce="max"), ValueError, r"reduce"),
        (
            dict(mask=torch.zeros(2, H, W, dtype=torch.bool)),
            ValueError,
            r"`mask` holds no pixel: every region is empty",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        Region(**kwargs)


@pytest.mark.parametrize(
    "model,target,match",
    [
        (SegNet(), Region(classes=[7]), r"`classes` must be in \[0, 4\) for a model of 4 classes"),
        (SegNet(), Region(mask=torch.ones(2, H, W), classes=[1, 9]), r"`classes` must be in \[0, 4\)"),
        (SegNet(), Region(mask=torch.ones(3, 1, H, W)), r"`mask` holds regions of 3 inputs, not of the 2 explained"),
        (Flat(), Region(), r"Region needs \(rows, C, H, W\) scores from the model, got shape \(1?\d?, 4\)"),
    ],
)
def test_bad_calls_are_named_and_nothing_is_modified(model, target, match):
    x = torch.rand(2, 3, H, W)
    mask = None if target.mask is None else target.mask.clone()
    x0, cells0 = x.clone(), CELLS.clone()
    with pytest.raises(ValueError, match=match):
        torchlime.explain(model, x, CELLS, target=target, n_samples=16)
    assert torch.equal(x, x0) and torch.equal(CELLS, cells0)
    assert mask is None or torch.equal(target.mask, mask)


def test_a_region_that_vanishes_at_the_output_s_resolution_is_named():
    mask = torch.zeros(2, H, W, dtype=torch.bool)
    mask[0, :4, :4] = True  # stays at the pooled (H/2, W/2) output
    mask[1, 5, 5] = True  # one pixel: nearest resize to (H/2, W/2) keeps none of it
    with pytest.warns(UserWarning, match=r"`mask`: 1 region\(s\) hold no pixel at the model's output resolution 4x4"):
        exp = torchlime.explain(SegNet(pool=True), torch.rand(1, 3, H, W), CELLS, target=Region(mask), n_samples=16)
    assert exp.target_valid.tolist() == [[True, False]]


def test_softmax_is_refused_for_a_target_that_reads_the_raw_output():
    for truthy in (True, 1, torch.tensor(True)):
        with pytest.raises(ValueError, match=r"`softmax=True` does not apply to a structured target.*probability"):
            torchlime.explain(SegNet(), torch.rand(1, 3, H, W), CELLS, target=Region(), softmax=truthy, n_samples=16)


def test_callers_tensors_are_never_modified():
    x, mask = torch.rand(2, 3, H, W), torch.rand(2, 3, H, W) > 0.5
    kept = (x.clone(), mask.clone(), CELLS.clone())
    target = Region(mask=mask, classes=[0, 1, 2], reduce="sum", probability=True)
    torchlime.explain(SegNet(as_dict=True), x, CELLS, target=target, n_samples=16)
    assert all(torch.equal(a, b) for a, b in zip((x, mask, CELLS), kept))
    mask.zero_()  # Region kept its own copy
    assert target.mask.sum() > 0


def test_host_reads_do_not_grow_with_the_chunks():
    seg, x = SegNet(), torch.rand(2, 3, H, W, generator=torch.Generator().manual_seed(1))
    classifier = torch.nn.Sequential(seg, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())  # the plain count
    counts = []
    for model, target in ((classifier, None), (seg, Region())):
        for chunk in (64, 8):  # 2 chunks vs 16 chunks
            torchlime.explain(model, x, CELLS, target=target, n_samples=64, batch_size=chunk)
            uploads = []
            with count_syncs(uploads) as ops:
                torchlime.explain(model, x, CELLS, target=target, n_samples=64, batch_size=chunk)
            counts.append((len(ops), len(uploads)))
    plain_few, plain_many, region_few, region_many = counts
    assert region_few == region_many and plain_few == plain_many, counts
    assert region_few[0] <= plain_few[0] + 1, counts  # the class count, once per call


def test_plot_regions_one_panel_per_valid_target():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchlime.image.viz_regions import LEGEND, plot_regions

    x, net = ragged_images(), identity_net()
    exp = torchlime.explain(net, x, CELLS, target=Region(), n_samples=64)
    names = ["sky", "road", "car", "tree"]
    # the model's label map; the regions the explanation keeps in memory; a slice, which keeps its own
    for e, index, regions, outlined in (
        (exp, 0, net(x).argmax(1), True),
        (exp, 1, None, True),
        (exp[1:], 0, None, True),
    ):
        fig = plot_regions(e, x[1:] if e is not exp else x, index=index, regions=regions, class_names=names)
        panels = [ax for ax in fig.axes if ax.images]
        classes = [k for k in e.target[index].tolist() if k >= 0]
        assert len(panels) == len(classes)
        assert [ax.get_title() for ax in panels] == [
            f"class {names[k]}: R² {float(e.score[index, t]):.2f}" for t, k in enumerate(classes)
        ]
        assert all(bool(ax.collections) == outlined for ax in panels)
        assert any(ax.get_ylabel() == LEGEND for ax in fig.axes)
        plt.close(fig)
    mask_exp = torchlime.explain(net, x, CELLS, target=Region(mask=MASKS["rhw"]), n_samples=32)
    fig = plot_regions(mask_exp, x, index=1, regions=Region(mask=MASKS["rhw"]))
    assert sum(bool(ax.collections) for ax in fig.axes if ax.images) == 3
    plt.close(fig)
    with pytest.raises(ValueError, match=r"`regions` must hold one mask per target \(3\), got 2"):
        plot_regions(mask_exp, x, regions=MASKS["overlap"])
    with pytest.raises(ValueError, match=r"`index` must be an int in \[0, 2\)"):
        plot_regions(exp, x, index=2)
