"""Synthetic images with a planted ground truth, for the demo model and tests.

Every image shows a noisy, smoothly varying background, a few *distractor*
objects (filled squares and discs of random colour, size and position) that
carry no information about the label, and exactly one *evidence* object whose
shape alone decides the class:

====  ==========  ====================================================
id    name        evidence shape
====  ==========  ====================================================
0     triangle    filled isosceles triangle, apex up
1     plus        plus sign, arm thickness one third of its side
2     ring        annulus, inner radius half the outer radius
3     equals      two horizontal bars, each 30 % of its side high
====  ==========  ====================================================

Distractors never take one of these shapes. The evidence object's area is
drawn uniformly from 5-10 % of the image whatever the class (about 4.4-10.8 %
after rasterisation), so its size says nothing about the label, and its colour
comes from the same distribution as the distractors' colours. Distractors keep
a margin of at least two pixels from the evidence object and from each other,
so ``evidence`` is exactly the set of pixels an explanation should point at.

Generation is vectorised over images, uses only its own ``torch.Generator``
(never the global RNG) and is fully determined by ``(n, seed, size)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable

import torch

CLASS_NAMES: tuple[str, ...] = ("triangle", "plus", "ring", "equals")
"""Name of each class, indexed by label."""

N_CLASSES = len(CLASS_NAMES)

# Area of each evidence shape as a fraction of its square bounding box.
_SHAPE_FILL = torch.tensor([0.5, 5.0 / 9.0, math.pi / 4.0 * 0.75, 0.6])
_EVIDENCE_AREA = (0.05, 0.10)  # fraction of the image covered by the evidence
_N_DISTRACTORS = (3, 6)  # inclusive range of distractor slots per image
_DISTRACTOR_SIDE = (0.11, 0.25)  # side of a distractor, as a fraction of `size`
_MARGIN = 2.0  # pixels kept free between any two objects
_PLACEMENT_TRIES = 16  # candidate positions tried per distractor
_MIN_CONTRAST = 0.3  # least L-inf distance of an object colour to the background
_NOISE_STD = 0.04  # per-pixel Gaussian noise
_BLOB_AMPLITUDE = 0.12  # amplitude of the smooth background colour variation
_CHUNK = 512  # images rendered at once, bounds temporary memory


@dataclass(frozen=True)
class Scenes:
    """A batch of synthetic scenes with everything needed to check explanations.

    Attributes:
        images: float32 (n, 3, size, size) in [0, 1], the rendered images.
        labels: long (n,), the class of each image (index into ``CLASS_NAMES``).
        evidence: bool (n, size, size), the pixels of the evidence object.
        distractor_ids: int8 (n, size, size), ``k`` on the pixels of the
            distractor in slot ``k`` (0-based; slots may be empty), ``-1`` elsewhere.
        background: float32 (n, 3, size, size), each image without any object
            (same background and noise), used to erase objects cleanly; ``None``
            when not requested.
    """

    images: torch.Tensor
    labels: torch.Tensor
    evidence: torch.Tensor
    distractor_ids: torch.Tensor
    background: torch.Tensor | None = None

    @property
    def distractors(self) -> torch.Tensor:
        """Bool (n, size, size), the pixels of all distractor objects."""
        return self.distractor_ids >= 0

    def __len__(self) -> int:
        return self.labels.shape[0]


def make_images(n: int, seed: int, size: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Generate ``n`` labelled images with their ground-truth evidence masks.

    Args:
        n: number of images.
        seed: seed of the private random generator; equal seeds give equal output.
        size: height and width of the square images in pixels (at least 32).

    Returns:
        ``(images, labels, evidence)``: float32 (n, 3, size, size) in [0, 1],
        long (n,) in ``0..3`` and bool (n, size, size), the evidence object's pixels.

    Example:
        >>> images, labels, evidence = make_images(8, seed=0)
        >>> images.shape, labels.shape, evidence.shape
        (torch.Size([8, 3, 64, 64]), torch.Size([8]), torch.Size([8, 64, 64]))
    """
    scenes = make_scenes(n, seed, size, with_background=False)
    return scenes.images, scenes.labels, scenes.evidence


def make_scenes(n: int, seed: int, size: int = 64, *, with_background: bool = True) -> Scenes:
    """Like :func:`make_images`, but also return distractor masks and backgrounds.

    The images, labels and masks equal those of ``make_images(n, seed, size)``.

    Args:
        n: number of images.
        seed: seed of the private random generator.
        size: height and width of the square images in pixels (at least 32).
        with_background: also keep every image's object-free background.

    Returns:
        A :class:`Scenes` holding n images of ``size`` x ``size`` pixels.
    """
    if n < 0:
        raise ValueError(f"`n` must be >= 0, got {n}")
    if size < 32:
        raise ValueError(f"`size` must be >= 32, got {size}")
    gen = torch.Generator().manual_seed(seed)
    out = Scenes(
        images=torch.empty(n, 3, size, size),
        labels=torch.empty(n, dtype=torch.long),
        evidence=torch.empty(n, size, size, dtype=torch.bool),
        distractor_ids=torch.empty(n, size, size, dtype=torch.int8),
        background=torch.empty(n, 3, size, size) if with_background else None,
    )
    for start in range(0, n, _CHUNK):
        _render_into(_slice(out, start, start + _CHUNK), gen)
    return out


def _slice(scenes: Scenes, start: int, stop: int) -> Scenes:
    """A view of images ``start:stop`` of ``scenes``; writing to it writes through."""
    parts = {f.name: getattr(scenes, f.name) for f in fields(scenes)}
    return Scenes(**{k: None if v is None else v[start:stop] for k, v in parts.items()})  # type: ignore[arg-type]


def _uniform(gen: torch.Generator, shape: tuple[int, ...], lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
    """float32 tensor of ``shape`` drawn uniformly from [lo, hi)."""
    return lo + (hi - lo) * torch.rand(shape, generator=gen)


def _render_into(out: Scenes, gen: torch.Generator) -> None:
    """Render ``len(out)`` scenes into the tensors of ``out``, drawing from ``gen``."""
    n, size = len(out), out.images.shape[-1]
    labels = torch.randint(N_CLASSES, (n,), generator=gen)
    bg_colour = _uniform(gen, (n, 3), 0.15, 0.85)
    background = _background(bg_colour, size, gen)

    # Evidence object: square box of side `side` at top-left (y0, x0).
    area = _uniform(gen, (n,), *_EVIDENCE_AREA) * size * size
    side = torch.sqrt(area / _SHAPE_FILL[labels])
    y0 = _uniform(gen, (n,)) * (size - side)
    x0 = _uniform(gen, (n,)) * (size - side)
    out.labels.copy_(labels)
    out.evidence.copy_(_evidence_mask(labels, y0, x0, side, size))
    boxes = [torch.stack([y0, x0, y0 + side, x0 + side], dim=1)]

    colours = [_object_colour(bg_colour, gen)]
    ids = out.distractor_ids
    ids.fill_(-1)
    n_slots = torch.randint(_N_DISTRACTORS[0], _N_DISTRACTORS[1] + 1, (n,), generator=gen)
    for slot in range(_N_DISTRACTORS[1]):
        mask, box = _place_distractor(boxes, slot < n_slots, size, gen)
        ids.masked_fill_(mask, slot)
        colours.append(_object_colour(bg_colour, gen))
        boxes.append(box)

    # Object index per pixel: 0 evidence, 1 + k distractor k, -1 background.
    objects = (ids.long() + (ids >= 0).long()).masked_fill_(out.evidence, 0)
    image = _paint(background, objects, torch.stack(colours, dim=1))
    noise = torch.randn((n, 3, size, size), generator=gen).mul_(_NOISE_STD)
    torch.clamp(image.add_(noise), 0.0, 1.0, out=out.images)
    if out.background is not None:
        torch.clamp(background.add_(noise), 0.0, 1.0, out=out.background)


def _grid(size: int) -> torch.Tensor:
    """Pixel-centre coordinates ``0.5, 1.5, ...``, float32 (size,)."""
    return torch.arange(size, dtype=torch.float32) + 0.5


def _background(colour: torch.Tensor, size: int, gen: torch.Generator) -> torch.Tensor:
    """Smoothly varying background around ``colour`` (n, 3).

    Returns:
        float32 (n, 3, size, size) in [0, 1]: ``colour`` plus a bilinear
        upsampling of a random 5 x 5 grid of colour offsets (per-pixel noise is
        added later).
    """
    n = colour.shape[0]
    coarse = _BLOB_AMPLITUDE * (2.0 * _uniform(gen, (n, 3, 5, 5)) - 1.0)
    coarse += colour[:, :, None, None]
    interp = _linear_interpolation(5, size)  # (size, 5)
    return torch.matmul(torch.matmul(interp, coarse), interp.T).clamp_(0.0, 1.0)


def _linear_interpolation(n_in: int, n_out: int) -> torch.Tensor:
    """Matrix (n_out, n_in) that linearly interpolates n_in knots onto n_out points.

    The first and last knots land on the first and last output points (like
    ``align_corners=True``); applied on both axes it is bilinear upsampling.
    """
    position = torch.linspace(0.0, n_in - 1.0, n_out)
    knots = torch.arange(n_in, dtype=torch.float32)
    return (1.0 - (position[:, None] - knots[None, :]).abs()).clamp(min=0.0)


def _triangle(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Filled triangle, apex at the top centre, base along the bottom edge."""
    return (u - 0.5).abs() <= v / 2


def _plus(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plus sign whose arms are a third of the box wide."""
    return ((u - 0.5).abs() <= 1.0 / 6.0) | ((v - 0.5).abs() <= 1.0 / 6.0)


def _ring(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Annulus with outer radius half the box side and inner radius half that."""
    radius2 = (2 * u - 1) ** 2 + (2 * v - 1) ** 2
    return (radius2 >= 0.25) & (radius2 <= 1.0)


def _equals(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Two full-width horizontal bars, the top and bottom 30 % of the box."""
    bars = (v <= 0.3) | (v >= 0.7)
    return bars.expand(v.shape[0], v.shape[1], u.shape[2])


# Shape of each class on local box coordinates u (m, 1, size), v (m, size, 1) in
# units of the box side (0 and 1 at its edges); returns bool (m, size, size).
_SHAPES: tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ...] = (
    _triangle,
    _plus,
    _ring,
    _equals,
)


def _evidence_mask(
    labels: torch.Tensor, y0: torch.Tensor, x0: torch.Tensor, side: torch.Tensor, size: int
) -> torch.Tensor:
    """Rasterise each image's evidence shape.

    Args:
        labels: long (n,), the shape to draw.
        y0: float (n,), top edge of the square bounding box in pixels.
        x0: float (n,), left edge of the square bounding box in pixels.
        side: float (n,), side of the bounding box in pixels.
        size: image side in pixels.

    Returns:
        bool (n, size, size), True on the shape's pixels.
    """
    grid = _grid(size)
    v = (grid[None, :] - y0[:, None]) / side[:, None]  # (n, size)
    u = (grid[None, :] - x0[:, None]) / side[:, None]
    inside = ((v >= 0) & (v <= 1))[:, :, None] & ((u >= 0) & (u <= 1))[:, None, :]
    mask = torch.zeros(labels.shape[0], size, size, dtype=torch.bool)
    for label, shape in enumerate(_SHAPES):
        idx = (labels == label).nonzero().squeeze(1)
        mask[idx] = shape(u[idx, None, :], v[idx, :, None])
    return mask & inside


def _place_distractor(
    boxes: list[torch.Tensor], active: torch.Tensor, size: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Place one distractor per image away from every box in ``boxes``.

    Tries ``_PLACEMENT_TRIES`` random positions per image and keeps the first
    whose box, grown by ``_MARGIN``, overlaps none of ``boxes``; an image
    where every try fails gets no distractor in this slot.

    Args:
        boxes: list of float (n, 4) boxes ``(y0, x0, y1, x1)`` already taken.
        active: bool (n,), the images that get a distractor in this slot.
        size: image side in pixels.
        gen: random generator.

    Returns:
        ``(mask, box)``: bool (n, size, size) pixels of the distractor and its
        float (n, 4) box (an empty box off the image where none was placed).
    """
    n = boxes[0].shape[0]
    side = _uniform(gen, (n, 1), *_DISTRACTOR_SIDE) * size
    is_disc = torch.rand((n,), generator=gen) < 0.5
    y0 = _uniform(gen, (n, _PLACEMENT_TRIES)) * (size - side)
    x0 = _uniform(gen, (n, _PLACEMENT_TRIES)) * (size - side)
    free = ~_overlaps(y0, x0, side, torch.stack(boxes, dim=1)).any(dim=2)  # (n, tries)
    placed = free.any(dim=1) & active
    first = free.float().argmax(dim=1, keepdim=True)
    y0 = y0.gather(1, first).squeeze(1)
    x0 = x0.gather(1, first).squeeze(1)
    side = side.squeeze(1)

    # Separable rasterisation: pixel inside iff f(dy) + f(dx) <= 1 with the
    # offsets dy, dx from the centre in units of the half side, f(d) = d^2
    # for a disc and f(d) = 0 if |d| <= 1 else 2 for a square.
    grid = _grid(size)
    half = side[:, None] / 2
    dy = (grid[None, :] - y0[:, None] - half) / half  # (n, size)
    dx = (grid[None, :] - x0[:, None] - half) / half
    fy = torch.where(is_disc[:, None], dy**2, 2.0 * (dy.abs() > 1))
    fx = torch.where(is_disc[:, None], dx**2, 2.0 * (dx.abs() > 1))
    fy = fy.masked_fill(~placed[:, None], 2.0)
    mask = (fy[:, :, None] + fx[:, None, :]) <= 1.0
    box = torch.stack([y0, x0, y0 + side, x0 + side], dim=1)
    box = torch.where(placed[:, None], box, torch.full_like(box, -10.0 * size))
    return mask, box


def _overlaps(y0: torch.Tensor, x0: torch.Tensor, side: torch.Tensor, taken: torch.Tensor) -> torch.Tensor:
    """Whether candidate squares, grown by ``_MARGIN``, overlap taken boxes.

    Args:
        y0: float (n, tries), top edges of the candidates.
        x0: float (n, tries), left edges of the candidates.
        side: float (n, 1), their side.
        taken: float (n, k, 4), boxes ``(y0, x0, y1, x1)`` already in use.

    Returns:
        bool (n, tries, k).
    """
    y0, x0, side = y0[:, :, None], x0[:, :, None], side[:, :, None]
    taken = taken[:, None]  # (n, 1, k, 4)
    return (
        (y0 < taken[..., 2] + _MARGIN)
        & (y0 + side + _MARGIN > taken[..., 0])
        & (x0 < taken[..., 3] + _MARGIN)
        & (x0 + side + _MARGIN > taken[..., 1])
    )


def _object_colour(bg_colour: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random object colours (n, 3) that stand out from ``bg_colour`` (n, 3).

    Draws uniform RGB colours and redraws those within ``_MIN_CONTRAST`` (L-inf)
    of the background; the few still too close after a fixed number of rounds
    take the channel-wise farthest corner of the RGB cube.
    """
    n = bg_colour.shape[0]
    colour = torch.rand((n, 3), generator=gen)
    for _ in range(8):
        close = (colour - bg_colour).abs().amax(dim=1) < _MIN_CONTRAST
        colour = torch.where(close[:, None], torch.rand((n, 3), generator=gen), colour)
    close = (colour - bg_colour).abs().amax(dim=1) < _MIN_CONTRAST
    corner = (bg_colour < 0.5).float()
    return torch.where(close[:, None], corner, colour)


def _paint(background: torch.Tensor, objects: torch.Tensor, colours: torch.Tensor) -> torch.Tensor:
    """Paint flat-coloured objects onto a background.

    Args:
        background: float32 (n, 3, H, W).
        objects: long (n, H, W), the object index of each pixel, -1 for background.
        colours: float32 (n, K, 3), the colour of each object.

    Returns:
        float32 (n, 3, H, W), ``colours[i, objects[i, y, x]]`` on object pixels
        and ``background`` elsewhere.
    """
    n, _, height, width = background.shape
    index = objects.clamp(min=0).view(n, 1, height * width).expand(n, 3, height * width)
    painted = colours.transpose(1, 2).gather(2, index).view(n, 3, height, width)
    return torch.where(objects[:, None] >= 0, painted, background)
