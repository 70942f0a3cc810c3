"""Stage 1: interpretable features.

A feature map assigns every element of an input to one of F interpretable features (a superpixel,
a time-frequency cell, a word). Users may pass any integer ids; ``relabel`` numbers them
``0..F_b-1`` for every input ``b`` independently, keeping their order. Negative ids mark elements
that belong to no feature (padding, special tokens): they become -1 and are never perturbed.
``cell_ids`` is the one regular partition every modality builds on (image rectangles, spectrogram
cells, time slots of a waveform); ``torchlime.image.grid`` is the only public function named ``grid``.
"""

from __future__ import annotations

import cmath
import math
from typing import NamedTuple, Optional, Sequence

import numpy as np
import torch

from torchlime._util.checks import check_integer, check_positive_int, check_tensor, nonfinite_error
from torchlime.stages.fixed_cost import CACHED_ELEMENTS, ShapeCache, columns, derived, tensor_key, zeros
from torchlime.typing import Device as Device


def relabel(features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Relabel each input's feature ids to contiguous ``0..F_b-1``.

    One batched sort per call and no host synchronisation: the ids are sorted per
    row, a new id starts wherever the sorted value changes, and the ranks are
    scattered back.

    Args:
        features: integer tensor (B, ...), one feature map per input.

    Returns:
        ``(labels, n_features)``: ``labels`` long (B, ...) with the same shape
        (-1 where the id was negative), ``n_features`` long (B,) holding F_b, the
        number of distinct non-negative ids of input b.

    Example:
        >>> labels, n = relabel(torch.tensor([[5, 5, 9], [1, 2, 3]]))
        >>> labels.tolist(), n.tolist()
        ([[0, 0, 1], [0, 1, 2]], [2, 3])
    """
    check_tensor(features, "features")
    check_integer(features, "features")
    batch = features.shape[0]
    flat = features.reshape(batch, -1).long()
    if flat.shape[1] == 0:
        return flat.reshape(features.shape), torch.zeros(batch, dtype=torch.long, device=flat.device)
    negative = flat < 0
    # negatives sort last (one extra group, removed below)
    keyed = flat.masked_fill(negative, torch.iinfo(torch.long).max)
    values, order = keyed.sort(dim=1, stable=True)
    # the rank of each sorted id: how many times the value changed before it (0 first)
    ranks = torch.nn.functional.pad((values[:, 1:] != values[:, :-1]).cumsum(1), (1, 0))
    labels = torch.empty_like(ranks).scatter_(1, order, ranks).masked_fill(negative, -1)
    counts = labels.amax(1) + 1  # labels are -1 at least: never below 0
    return labels.reshape(features.shape), counts


def even_bands(n: int, k: int, device: Device = None) -> torch.Tensor:
    """Split ``n`` positions into ``k`` contiguous bands whose sizes differ by at most 1: long (n,).

    Position ``i`` is in band ``i * k // n``.

    Args:
        n: the number of positions.
        k: the number of bands, ``1..n``.
        device: where the result goes.

    Returns:
        Long (n,) the band of every position.

    Example:
        >>> even_bands(5, 2).tolist()
        [0, 0, 0, 1, 1]
    """
    return torch.arange(n, device=device) * k // n


def cell_ids(
    shape: Sequence[int],
    counts: Sequence[int],
    *,
    bands: Optional[Sequence[Optional[torch.Tensor]]] = None,
    device: Device = None,
) -> torch.Tensor:
    """A regular grid over the last ``len(shape)`` dimensions: long ``shape``, ids row-major.

    Dimension ``d`` of size ``shape[d]`` is cut into ``counts[d]`` bands
    (``even_bands``, or the given long ``bands[d]`` of that size); cell ids are
    numbered row-major, ``id = ((i0 * c1) + i1) * c2 + ...``.

    Args:
        shape: sizes of the gridded dims, e.g. (H, W) or (Fr, Tm) or (S,).
        counts: bands per dim, each in ``1..shape[d]``.
        bands: optional per-dim band assignment, each long (shape[d],) (None entries use even bands).
        device: where the grid goes.

    Returns:
        Long ``shape`` cell ids, ``0..prod(counts)-1``.

    Raises:
        ValueError: when a count is not in ``1..shape[d]``.

    Example:
        >>> cell_ids((2, 4), (1, 2)).tolist()
        [[0, 0, 1, 1], [0, 0, 1, 1]]
    """
    if len(shape) != len(counts):
        raise ValueError(f"`counts` must give one count per dim of `shape` {tuple(shape)}, got {tuple(counts)}")
    ids = torch.zeros((), dtype=torch.long, device=device)
    for d, (size, k) in enumerate(zip(shape, counts)):
        check_positive_int(k, "counts")
        if k > size:
            raise ValueError(f"`counts` must be at most the size of each dim {tuple(shape)}, got {tuple(counts)}")
        given = None if bands is None else bands[d]
        band = even_bands(size, k, device) if given is None else given.to(device=device, dtype=torch.long)
        view = [1] * len(shape)
        view[d] = size
        ids = ids * k + band.view(view)
    return ids.expand(*shape).contiguous()


def row_starts(index: torch.Tensor) -> Optional[torch.Tensor]:
    """Bool (H - 1,): whether row i + 1 of some feature map differs from row i (a block starts there).

    Args:
        index: integer (B, ..., H, W) feature maps (rows along dim -2).

    Returns:
        The flags on ``index``'s device, or None for maps with fewer than 3 dims, a single row or no
        elements (a block of 1 row).
    """
    if index.dim() < 3 or index.shape[-2] < 2 or index.numel() == 0:
        return None
    h = index.shape[-2]
    rows = index.reshape(-1, h, index.shape[-1])
    return (rows[:, 1:] != rows[:, :-1]).any(2).any(0)


def block_size(h: int, starts: Sequence[int]) -> int:
    """The block size from ``row_starts`` read on the host: the gcd of H and the rows that start a block.

    Args:
        h: H, the maps' rows.
        starts: the H - 1 flags of ``row_starts``, as numbers.

    Example:
        >>> block_size(12, [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0])  # blocks start at rows 4 and 8
        4
    """
    return int(np.gcd.reduce(np.append(np.flatnonzero(np.asarray(starts, dtype=np.int64)) + 1, h)))


def block_rows(index: torch.Tensor) -> int:
    """How many consecutive rows of every feature map repeat: the blocks a blend may expand once.

    A grid of 8-pixel-high cells has blocks of 8 rows; superpixels have none (1). One host read
    (``prepare_features`` reads ``row_starts`` along with its other numbers instead).

    Args:
        index: integer (B, ..., H, W) feature maps (rows along dim -2).

    Returns:
        The largest k dividing H such that rows ``jk .. jk + k - 1`` are equal in every map; 1 for maps
        with fewer than 3 dims or a single row.

    Example:
        >>> block_rows(cell_ids((1, 12, 12), (1, 3, 2)).unsqueeze(0))  # 4-row cells
        4
    """
    starts = row_starts(index)
    return 1 if starts is None else block_size(index.shape[-2], starts.long().tolist())


class FeatureMap(NamedTuple):
    """The engine's view of a feature map, after relabelling.

    Attributes:
        labels: long (B, *fshape) ids 0..F_b-1, -1 for elements never perturbed.
        index: long (B, *fshape) the mask column of every element: ``labels``, with -1
            mapped to an extra, always-kept column ``f_max`` when ``fixed``.
        n_features: long (B,) F_b.
        f_max: F, the largest F_b (a host int).
        fixed: whether some elements belong to no feature.
        block_rows: the rows of every map repeat in blocks of this many (``block_rows``; 1: none).
        singletons: every feature of every input is a single element of the map (so a feature's own
            mean is the element itself).
        shared: ``labels`` and ``n_features`` are the ones kept for a map passed again (``prepare_features``):
            an explanation gets copies of them, so that no two explanations share a tensor.
    """

    labels: torch.Tensor
    index: torch.Tensor  # type: ignore[assignment]  # the field shadows tuple.index (a method) by design
    n_features: torch.Tensor
    f_max: int
    fixed: bool
    block_rows: int = 1
    singletons: bool = False
    shared: bool = False

    @property
    def valid(self) -> torch.Tensor:
        """Bool (B, F): True where feature f exists for input b (f < F_b); kept with the counts (not to be written)."""
        nf, f_max = self.n_features, self.f_max
        return derived("valid", lambda: columns(f_max, nf.device) < nf.unsqueeze(1), nf, extra=f_max)


#: the feature maps of the last maps relabelled, by map (``stages.fixed_cost.ShapeCache``)
_MAPS: ShapeCache[FeatureMap] = ShapeCache()


def prepare_features(inputs: torch.Tensor, features: torch.Tensor, name: str = "inputs") -> FeatureMap:
    """Relabel ``features`` and check the inputs, with one host synchronisation.

    A map passed again (the same tensor or a view of the same one, unchanged since) is not relabelled
    again: its ``FeatureMap`` is kept (``stages.fixed_cost``), its labels and counts copied, and only the
    inputs are checked.

    Args:
        inputs: (B, ...) the inputs, checked to be finite.
        features: integer (B or 1, ...) feature map, broadcastable to ``inputs``.
        name: the name of ``inputs`` in error messages.

    Returns:
        The ``FeatureMap`` of the B inputs.

    Raises:
        ValueError: an input with fewer than 2 features, or non-finite inputs.
    """
    batch = inputs.shape[0]
    # the map's part depends only on the map (and B): a map passed again (the same tensor, unchanged) is
    # not relabelled again, and its call reads only the inputs' check
    owner, known_as = features if features._base is None else features._base, tensor_key(features)
    key = (known_as, batch)
    kept = known_as is not None and batch * math.prod(features.shape[1:]) <= CACHED_ELEMENTS
    known = _MAPS.find(owner, key) if kept else None
    if known is not None:
        # any NaN or inf makes the sum of inputs * 0 NaN, finite inputs 0: two operators, not isfinite's six
        if (inputs.is_floating_point() or inputs.is_complex()) and cmath.isnan((inputs * 0).sum().item()):
            raise nonfinite_error(inputs, name)
        # the kept map itself (what depends on it is kept too); the explanation copies its labels and counts
        return known._replace(shared=True)
    nonfinite = (
        (~torch.isfinite(inputs)).sum()
        if inputs.is_floating_point() or inputs.is_complex()
        else zeros((), torch.long, inputs.device)  # a kept 0: integer inputs are finite
    )
    labels, n_feat = relabel(features.expand(batch, *features.shape[1:]))
    starts = row_starts(labels)
    # the least label: -1 where some elements belong to no feature
    least = labels.amin() if labels.numel() else zeros((), torch.long, labels.device)
    f_min_max = torch.aminmax(n_feat)
    read = torch.stack((f_min_max.max, f_min_max.min, least, nonfinite))  # one read, with the non-finite count
    if starts is not None:  # read along: the gcd on the host, not log2(H) rounds of small device ops
        read = torch.cat((read, starts.long()))
    f_max, f_min, least_label, n_bad, *row_flags = read.tolist()
    fixed = least_label < 0
    k = 1 if starts is None else block_size(labels.shape[-2], row_flags)
    if n_bad:
        raise nonfinite_error(inputs, name)
    if f_min < 2:
        single = (n_feat < 2).nonzero().flatten().tolist()
        why = (
            " (elements with negative feature ids, such as special tokens and padding, are never perturbed)"
            if fixed
            else ""
        )
        how = {
            "images": "more segments, e.g. a larger n_segments",
            "input_ids": "texts of at least 2 tokens that are neither special ids nor padding",
        }
        raise ValueError(
            f"every input needs at least 2 features to explain; `{name}` rows {single} have fewer"
            f"{why}: split them finer ({how.get(name, 'a finer feature map')})"
        )
    # -1 -> f_max, 0..f_max-1 kept: the remainder modulo f_max + 1 (one operator, the same values)
    index = labels.remainder(f_max + 1) if fixed else labels
    singletons = not fixed and f_min == labels[0].numel()  # F_b elements carry F_b distinct ids
    fmap = FeatureMap(labels, index, n_feat, int(f_max), bool(fixed), int(k), bool(singletons))
    if kept:
        _MAPS.put(owner, key, fmap)
    return fmap
