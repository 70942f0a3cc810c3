"""``Region``: explain a segmentation net by a class's score over a region of pixels.

The model returns (rows, C, H, W) logits (or a dict with ``out``, torchvision's segmentation models, or
``logits``). Each target is a (region, class) pair, scored as the class's logit (or probability) reduced
over the region's pixels. By default the regions are the ones the model predicts on the unperturbed input:
one target per class present in its prediction, padded across inputs.

Scoring a chunk: when no pixel belongs to two targets (predicted regions, disjoint masks), every pixel
adds its class's weighted score to its one target's sum (a scatter on the CPU, O(rows x pixels) whatever
T); otherwise, and on other devices (no float atomics, so bit-reproducible), one batched reduction per
target (see ``region_scores``).
"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence

import torch

from torchlime._util.checks import check_choice, check_tensor, describe, from_numpy, user_stacklevel
from torchlime.targets._records import RegionInfo
from torchlime.targets.base import Bound, Target, tensor_output


class Region(Target):
    """A class's logit (or probability) over a region of pixels, for segmentation models.

    For target t of input b, with class k_t and region weights r_t (H, W) (1 inside, 0 outside):
    ``score = sum_p r_t[p] * y[k_t, p] / sum_p r_t[p]`` for ``reduce="mean"``, without the divisor for
    "sum"; y is the model's (C, H, W) logits, or their softmax over C with ``probability=True``.

    Args:
        mask: None (the model's own predicted region of each class), or bool / 0-1 regions: (H, W) or
            (R, H, W) shared by every input, (B, R, H, W) one set per input; resized (nearest) to the
            output's resolution (a region left with no pixel there is an invalid target, with a warning; an
            all-empty mask is refused). Values between 0 and 1 weigh pixels.
        classes: the class of each region (R ints); with ``mask=None``, the classes to explain (each over
            its predicted region; a class the model does not predict is an invalid target). None: with a
            mask, the class predicted most inside each region; without, every predicted class.
        reduce: "mean" (the average over the region's pixels) or "sum".
        probability: score softmax probabilities over the classes instead of logits.

    Raises:
        TypeError / ValueError: a mask that is not a tensor of (H, W), (R, H, W) or (B, R, H, W) values in
            [0, 1]; classes that are not integers >= 0, or not one per region; an unknown ``reduce``.

    Example:
        >>> import torchlime
        >>> seg = torch.nn.Conv2d(3, 4, 1)                     # (B, 4, H, W) logits
        >>> x = torch.rand(2, 3, 8, 8)
        >>> cells = torch.arange(64).view(1, 1, 8, 8) // 16    # 4 bands of rows
        >>> exp = torchlime.explain(seg, x, cells, target=Region(), n_samples=64)
        >>> exp.coef.shape[0], exp.target_valid.shape == exp.target.shape
        (2, True)
    """

    name = "Region"

    def __init__(
        self,
        mask: object = None,
        classes: Optional[Sequence[int]] = None,
        reduce: str = "mean",
        probability: bool = False,
    ) -> None:
        given = from_numpy(mask)
        regions: Optional[torch.Tensor] = None
        disjoint = True
        if given is not None:
            m = check_tensor(given, "mask")
            if m.ndim not in (2, 3, 4) or m.numel() == 0 or m.is_complex():
                raise ValueError(f"`mask` must be (H, W), (R, H, W) or (B, R, H, W) regions, got {describe(m)}")
            m = m.detach().to(torch.float32, copy=True)  # a copy: the caller's mask is never touched
            if not bool(((m >= 0) & (m <= 1)).all()):  # at construction, before any model call
                raise ValueError("`mask` must hold bool or 0-1 values (1 inside a region), got values outside [0, 1]")
            if not bool((m > 0).any()):
                raise ValueError(
                    f"`mask` holds no pixel: every region is empty, nothing to explain (got {describe(given)})"
                )
            m = m.view(1, 1, *m.shape) if m.ndim == 2 else m
            regions = m.unsqueeze(0) if m.ndim == 3 else m
            disjoint = bool(((regions > 0).sum(1) <= 1).all())
        classes = from_numpy(classes)
        if classes is not None:
            as_tensor = classes if isinstance(classes, torch.Tensor) else torch.as_tensor(classes)
            if as_tensor.is_floating_point() or as_tensor.is_complex() or as_tensor.dtype == torch.bool:
                raise TypeError(f"`classes` must be integer class indices, got {describe(classes)}")
            classes = [int(c) for c in as_tensor.flatten().tolist()]
            if not classes or min(classes) < 0:
                raise ValueError(f"`classes` must be a non-empty list of class indices >= 0, got {classes}")
            if regions is not None and len(classes) != regions.shape[1]:
                raise ValueError(f"`classes` must give one class per region ({regions.shape[1]}), got {len(classes)}")
            disjoint = disjoint and (regions is not None or len(set(classes)) == len(classes))
        check_choice(reduce, "reduce", ("mean", "sum"))
        self.mask, self.classes, self.reduce, self.probability = regions, classes, reduce, bool(probability)
        self.disjoint = disjoint  # no pixel in two targets: the scatter path of ``region_scores``

    def check(self, batch: int) -> None:
        """Refuse per-input regions of another batch size.

        Args:
            batch: B, the number of inputs.

        Raises:
            ValueError: a (B', R, H, W) mask with B' not 1 nor B.
        """
        if self.mask is not None and self.mask.shape[0] not in (1, batch):
            raise ValueError(f"`mask` holds regions of {self.mask.shape[0]} inputs, not of the {batch} explained")

    def _maps(self, out: object, rows: int | None = None) -> torch.Tensor:
        maps = tensor_output(out, "Region", ("out", "logits"), rows)
        if maps.ndim != 4:
            raise ValueError(f"Region needs (rows, C, H, W) scores from the model, got shape {tuple(maps.shape)}")
        maps = maps.float()
        return maps.softmax(1) if self.probability else maps

    def _check_classes(self, n_cls: int) -> None:
        if self.classes is not None and max(self.classes) >= n_cls:
            raise ValueError(f"`classes` must be in [0, {n_cls}) for a model of {n_cls} classes, got {self.classes}")

    def bind(self, reference: object, batch: int) -> Bound:
        """Fix the (region, class) pairs from the unperturbed prediction.

        Args:
            reference: the model's raw output for the B unperturbed inputs ((B, C, H, W) scores).
            batch: B.

        Returns:
            The bound target: labels (B, T) the classes, -1 on padding.

        Raises:
            ValueError: an output that is not 4-D, or ``classes`` beyond the model's C classes.
        """
        maps = self._maps(reference)
        n_rows, n_cls, h, w = maps.shape
        self._check_classes(n_cls)
        pred = maps.argmax(1).flatten(1)  # (B, HW)
        dev = maps.device
        every = torch.arange(n_cls, device=dev)
        if self.mask is None:
            present = torch.zeros(n_rows, n_cls, dtype=torch.bool, device=dev).scatter_(1, pred, True)  # (B, C)
            if self.classes is not None:
                cls = torch.tensor(self.classes, device=dev).expand(n_rows, -1)
            else:  # the classes each input's prediction holds, in class order, padded
                t = int(present.sum(1).max())  # the call's one host read of the target count
                cls = ((~present).long() * n_cls + every).argsort(1)[:, :t]
            valid = present.gather(1, cls)
            regions = (pred.unsqueeze(1) == cls.unsqueeze(-1)).float()  # (B, T, HW)
        else:
            regions = self.mask.to(dev)
            if regions.shape[-2:] != (h, w):
                regions = _resized(regions, h, w)
            regions = regions.flatten(2).expand(n_rows, -1, -1)  # (B, R, HW)
            if self.classes is not None:
                cls = torch.tensor(self.classes, device=dev).expand(n_rows, -1)
            else:  # the class the model predicts most inside each region (the lowest on ties)
                votes = torch.einsum("brp,bcp->brc", regions, (pred.unsqueeze(1) == every[:, None]).float())
                cls = votes.argmax(-1)
            valid = regions.sum(-1) > 0
        area = regions.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
        weights = (regions / area if self.reduce == "mean" else regions) * valid.unsqueeze(-1)  # (B, T, HW)
        cls = torch.where(valid, cls, 0)
        plan = _ScorePlan(cls, weights, self.disjoint)

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            return region_scores(self._maps(out, rows.shape[0]), rows, plan)

        labels = torch.where(valid, cls, -1)
        source = "mask" if self.mask is not None else "prediction"
        # the regions (B, T, H, W) on the score grid: kept in memory with Explanation.scorer, never in files
        info = RegionInfo(self.reduce, self.probability, source, regions.view(n_rows, -1, h, w) > 0)
        return Bound(labels, valid, score, info)


class _ScorePlan:
    """What ``region_scores`` needs of the bound targets, laid out for both of its paths.

    Args:
        cls: long (B, T) the class of each target (0 on padding).
        weights: (B, T, HW) each target's pixel weights (0 on padding).
        disjoint: no pixel has weight in two targets.
    """

    def __init__(self, cls: torch.Tensor, weights: torch.Tensor, disjoint: bool) -> None:
        self.cls, self.disjoint = cls, disjoint
        self.weights = weights.transpose(0, 1).contiguous()  # (T, B, HW): target t's weights, contiguous
        n_t = cls.shape[1]
        live = weights > 0
        # each pixel's one target (T: none), its weight, its target's class (padded class 0 for none)
        self.owner = torch.where(live.any(1), live.float().argmax(1), n_t)  # (B, HW)
        self.pixel_weight = weights.sum(1)  # (B, HW)
        self.pixel_class = torch.nn.functional.pad(cls, (0, 1)).gather(1, self.owner)  # (B, HW)


def region_scores(maps: torch.Tensor, rows: torch.Tensor, plan: _ScorePlan) -> torch.Tensor:
    """The (c, T) region scores of c rows: ``sum_p weights[b, t, p] * maps[row, cls[b, t], p]``.

    Disjoint targets on the CPU: each pixel's weighted score of its target's class, summed per target by one
    ``scatter_add_`` in float64 (the CPU's scatter adds in a fixed order). Otherwise a loop over the T
    targets, each one batched reduction over the rows and pixels (memory O(c x HW) per target, and no float
    atomics: bit-reproducible on CUDA).

    Args:
        maps: (c, C, H, W) the rows' class scores.
        rows: long (c,) the input of each row.
        plan: the bound targets.

    Returns:
        (c, T) float32 scores.
    """
    c, n_cls = maps.shape[:2]
    flat = maps.reshape(c, -1)  # (c, C*HW)
    n_pix = flat.shape[1] // max(n_cls, 1)
    rows = rows.to(maps.device)
    n_t = plan.cls.shape[1]
    if plan.disjoint and maps.device.type == "cpu":
        idx = plan.pixel_class.index_select(0, rows) * n_pix + torch.arange(n_pix, device=maps.device)
        vals = (flat.gather(1, idx) * plan.pixel_weight.index_select(0, rows)).double()
        sums = torch.zeros(c, n_t + 1, dtype=torch.float64, device=maps.device)
        return sums.scatter_add_(1, plan.owner.index_select(0, rows), vals)[:, :n_t].float()
    planes = maps.reshape(c * n_cls, n_pix)
    first = torch.arange(c, device=maps.device) * n_cls
    picked = plan.cls.index_select(0, rows)  # (c, T)
    cols = [
        (planes.index_select(0, first + picked[:, t]) * plan.weights[t].index_select(0, rows)).sum(-1)
        for t in range(n_t)
    ]
    return torch.stack(cols, 1) if cols else maps.new_zeros(c, 0)


def _resized(regions: torch.Tensor, h: int, w: int) -> torch.Tensor:
    """(B', R, h, w) regions resized (nearest) to the model's output, warning about regions that vanish.

    Args:
        regions: (B', R, H, W) the given regions.
        h: the output's height.
        w: the output's width.

    Returns:
        The resized regions.
    """
    out = torch.nn.functional.interpolate(regions, size=(h, w), mode="nearest")
    lost = int(((regions.flatten(2) > 0).any(-1) & ~(out.flatten(2) > 0).any(-1)).sum())  # one read, resize only
    if lost:
        warnings.warn(
            f"`mask`: {lost} region(s) hold no pixel at the model's output resolution {h}x{w} (nearest resize from "
            f"{regions.shape[-2]}x{regions.shape[-1]}) and are left unexplained (target_valid False); give the mask "
            f"at the output's resolution or larger regions",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return out
