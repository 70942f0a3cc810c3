"""SMILE kernels: proximity from statistical distances between two empirical distributions.

SMILE (Aslansefat et al., 2021) weighs each perturbed sample by a two-sample statistic between the
values of the explained input and those of the perturbed input (``two_sample_distance``:
Wasserstein, Kolmogorov-Smirnov, Kuiper, Cramér-von Mises, Anderson-Darling). Everything is computed
by sorting on the tensors' device, batched over rows; ties are handled exactly as scipy handles them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from torchlime._util.checks import check_choice, check_positive_float, check_tensor, describe
from torchlime.stages.features import FeatureMap
from torchlime.stages.weighting import Kernel
from torchlime.typing import SmileStatistic

STATISTICS: tuple[SmileStatistic, ...] = ("wasserstein", "ks", "kuiper", "cvm", "anderson")
_GROUP_ELEMENTS = 1 << 18  # pooled values per group of rows held at once by ``SmileKernel.distances`` (CPU)
_GROUP_ELEMENTS_CUDA = 1 << 24  # (CUDA: fewer, larger groups)


def _pooled(xs: torch.Tensor, ys: torch.Tensor, runs: bool) -> dict[str, torch.Tensor]:
    """Pool two sorted samples (a stable sort of two sorted runs is a merge).

    Returns the values, x-membership, counts and, with ``runs``, the first and last pooled index of
    every run of ties (all (..., N)).
    """
    n = xs.shape[-1]
    zs, order = torch.cat((xs, ys), -1).sort(dim=-1, stable=True)
    big = zs.shape[-1]
    pos = torch.arange(big, device=zs.device, dtype=torch.int32)
    in_x = order < n
    cx = in_x.to(torch.int32).cumsum(-1, dtype=torch.int32)  # x values among the first j+1 pooled values
    last = torch.ones_like(in_x)
    last[..., :-1] = zs[..., 1:] != zs[..., :-1]  # last value of a run of ties
    out = dict(zs=zs, in_x=in_x, cx=cx, cy=pos + 1 - cx, last=last)
    if runs:
        new = torch.ones_like(in_x)
        new[..., 1:] = last[..., :-1]
        out["start"] = torch.where(new, pos, 0).cummax(-1).values  # first pooled index of the run of j
        out["end"] = torch.where(last, pos, big).flip(-1).cummin(-1).values.flip(-1)  # its last index
    return out


def two_sample_distance(x: torch.Tensor, y: torch.Tensor, statistic: SmileStatistic = "wasserstein") -> torch.Tensor:
    """A two-sample statistic between the rows of x and y, batched over the leading dims.

    F and G are the right-continuous empirical CDFs of x (n values) and y (m values), N = n + m:

    * ``"wasserstein"``: W1 = ∫ |F(t) - G(t)| dt (``scipy.stats.wasserstein_distance``)
    * ``"ks"``: D = sup |F(t) - G(t)| (``scipy.stats.ks_2samp`` statistic)
    * ``"kuiper"``: V = sup (F - G) + sup (G - F) (no scipy counterpart)
    * ``"cvm"``: T = U / (nmN) - (4nm - 1) / (6N), U = n Σ (r(x_i) - i)² + m Σ (r(y_j) - j)² with
      midranks r (``scipy.stats.cramervonmises_2samp`` statistic)
    * ``"anderson"``: A²akN of Scholz & Stephens (1987, eq. 7, midranks: ``scipy.stats.anderson_ksamp``'s
      default ``variant='midrank'`` before its standardisation; ``anderson_standardize`` gives scipy's)

    Each sample is sorted, the two sorted runs are merged (a stable sort), the running count of x
    values in the pooled order gives F and G at every pooled value, and the runs of equal values
    (ties) give the midranks. Equal sizes give W1 directly as the mean |difference| of the sorted samples.

    Args:
        x: real (..., n) samples.
        y: real (..., m) samples, the same leading dims.
        statistic: one of ``STATISTICS``; ``"anderson"`` is A²akN (>= 0, 0 for equal samples), not
            standardised.

    Returns:
        (...,) float64 when x or y is float64, else float32 (the values are sorted in that
        dtype; the counts and sums are computed in float64).

    Raises:
        TypeError: x or y is not a real tensor. ValueError: an unknown statistic,
            mismatched leading dims, or a sample with fewer than 2 values.

    Example:
        >>> x, y = torch.tensor([[0.0, 1.0, 2.0]]), torch.tensor([[0.0, 1.0, 5.0]])
        >>> two_sample_distance(x, y, "wasserstein"), two_sample_distance(x, y, "ks")
        (tensor([1.]), tensor([0.3333]))
    """
    check_choice(statistic, "statistic", STATISTICS)
    for name, t in (("x", x), ("y", y)):
        check_tensor(t, name)
        if t.is_complex() or t.dtype == torch.bool or t.ndim == 0:
            raise TypeError(f"`{name}` must be a real tensor (..., n), got {describe(t)}")
        if t.shape[-1] < 2:
            raise ValueError(f"`{name}` must hold at least 2 values per sample, got shape {tuple(t.shape)}")
    if x.shape[:-1] != y.shape[:-1]:
        raise ValueError(f"`x` and `y` must have the same leading dims, got {tuple(x.shape)} and {tuple(y.shape)}")
    dt = torch.float64 if torch.float64 in (x.dtype, y.dtype) else torch.float32
    return _statistic(x.to(dt).sort(-1).values, y.to(dt).sort(-1).values, statistic).to(dt)


def _statistic(xs: torch.Tensor, ys: torch.Tensor, statistic: SmileStatistic) -> torch.Tensor:
    """The statistic of sorted samples xs (..., n) and ys (..., m), float64 (...,)."""
    n, m = xs.shape[-1], ys.shape[-1]
    big = n + m
    f64 = torch.float64
    if statistic == "wasserstein" and n == m:  # equal sizes: the mean distance between the quantiles
        return (xs - ys).abs().sum(-1, dtype=f64) / n
    p = _pooled(xs, ys, statistic in ("cvm", "anderson"))
    diff = p["cx"].to(f64) / n - p["cy"].to(f64) / m  # F - G at every pooled value (right-continuous)
    if statistic == "wasserstein":
        deltas = (p["zs"][..., 1:] - p["zs"][..., :-1]).to(f64)
        return (diff[..., :-1].abs() * deltas).sum(-1)
    diff = torch.where(p["last"], diff, 0.0)  # inside a run of ties only the run's end is a value of F - G
    if statistic == "ks":
        return diff.abs().amax(-1)
    if statistic == "kuiper":
        return diff.amax(-1) + (-diff).amax(-1)
    start, end, cx, cy, in_x = p["start"], p["end"], p["cx"], p["cy"], p["in_x"]
    if statistic == "cvm":
        twice_mid = (start + end + 2).to(f64)  # 2 x the midrank (1-based) of the run
        own = torch.where(in_x, cx, cy).to(f64)  # 1-based rank of the value within its own sample
        sq = ((twice_mid - 2 * own) / 2) ** 2
        u = n * torch.where(in_x, sq, 0.0).sum(-1) + m * torch.where(in_x, 0.0, sq).sum(-1)
        k = n * m
        return u / (k * big) - (4 * k - 1) / (6 * big)
    # Anderson-Darling A²akN (midranks), summed over the distinct values (the last position of each run)
    lo = start.to(f64)  # values < z_j
    lj = (end + 1 - start).to(f64)  # values == z_j
    bj = lo + lj / 2
    cx_before = torch.where(start > 0, cx.gather(-1, (start - 1).clamp_min(0).long()), 0).to(f64)
    m_x = (cx.to(f64) + cx_before) / 2  # M_ij = #(<=) - #(==)/2 of sample x
    m_y = (cy.to(f64) + (lo - cx_before)) / 2
    den = bj * (big - bj) - big * lj / 4
    ok = p["last"] & (den > 0)
    den = torch.where(ok, den, 1.0)
    a = torch.zeros(xs.shape[:-1], dtype=f64, device=xs.device)
    for mij, size in ((m_x, n), (m_y, m)):
        inner = lj / big * (big * mij - bj * size) ** 2 / den
        a = a + torch.where(ok, inner, 0.0).sum(-1) / size
    return a * (big - 1) / big


def anderson_standardize(a2: torch.Tensor, n: int, m: int) -> torch.Tensor:
    """Scipy's ``anderson_ksamp`` statistic (A²akN - 1) / σ of two samples of sizes n and m.

    σ² is Scholz & Stephens' variance of A²kN (it depends on n and m only), as in scipy.

    Args:
        a2: (...) A²akN values (``two_sample_distance(..., "anderson")``).
        n: the size of the first sample.
        m: the size of the second sample.

    Returns:
        (...) float64 standardised statistics.

    Example:
        >>> round(float(anderson_standardize(torch.tensor(1.0, dtype=torch.float64), 10, 10)), 6)
        0.0
    """
    big, k = n + m, 2
    hs = torch.cumsum(1.0 / torch.arange(big - 1, 1, -1, dtype=torch.float64), 0)
    h = float(hs[-1]) + 1
    g = float((hs / torch.arange(2, big, dtype=torch.float64)).sum())
    hh = 1.0 / n + 1.0 / m
    a = (4 * g - 6) * (k - 1) + (10 - 6 * g) * hh
    b = (2 * g - 4) * k**2 + 8 * h * k + (2 * g - 14 * h - 4) * hh - 8 * h + 4 * g - 6
    c = (6 * h + 2 * g - 2) * k**2 + (4 * h - 4 * g + 6) * k + (2 * h - 6) * hh + 4 * h
    d = (2 * h + 6) * k**2 - 4 * h * k
    var = (a * big**3 + b * big**2 + c * big + d) / ((big - 1.0) * (big - 2.0) * (big - 3.0))
    sigma: float = var**0.5  # float ** float is typed Any (it may be complex)
    return (a2 - (k - 1)) / sigma


def channel_samples(x: torch.Tensor) -> torch.Tensor:
    """The per-channel samples (c, C, n) of a batch of inputs (c, ...).

    Dim 1 is the channel of inputs of 3 or more dims per row ((c, C, H, W), (c, C, L)); a row of 1 or
    2 dims ((c, L), (c, H, W)) is one channel. Complex values give their magnitude.

    Args:
        x: (c, ...) a batch of inputs.

    Example:
        >>> channel_samples(torch.zeros(4, 3, 5, 5)).shape, channel_samples(torch.zeros(4, 5, 5)).shape
        (torch.Size([4, 3, 25]), torch.Size([4, 1, 25]))
    """
    if x.is_complex():
        x = x.abs()
    channels = x.shape[1] if x.ndim >= 4 else 1
    return x.reshape(x.shape[0], channels, -1)


@dataclass(frozen=True)
class SmileKernel(Kernel):
    """SMILE's kernel: ``w = exp(-(d / max d)² / (2 width²))`` on a two-sample statistic d.

    An input-space kernel: the engine calls ``distances`` on every chunk of perturbed model
    inputs (c, ...) before the model sees it. d is ``two_sample_distance`` between the values
    of the explained input and of the perturbed input, channel by channel (dim 1 of inputs
    with 3+ dims per row; 1-D or 2-D rows are one channel), **averaged over the channels**;
    rows whose values equal their input's as multisets (the input itself) get d = 0 exactly
    (weight 1). The inputs' sorted values are computed once per call, each row's once per chunk.
    The weights need all S distances of an input before any of them, so the engine keeps the
    (B, S) distances and ``normaliser`` divides them by each input's largest distance (inputs
    whose samples all equal the input get weights 1): the distances are max-normalised into
    [0, 1], the weights into [exp(-1 / (2 width²)), 1]. It therefore needs an int ``n_samples``
    (not ``"auto"``).

    Attributes:
        statistic: one of ``STATISTICS``; ``kernel=`` accepts the names directly.
        width: the kernel width on the normalised distance (lime's 0.25 by default).

    Raises:
        ValueError: an unknown statistic or a width that is not finite and > 0.
        TypeError: perturbed inputs that are not one tensor (a ``perturb_fn`` returning a tuple).

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 2))
        >>> feats = (torch.arange(16).view(1, 1, 4, 4) // 4).expand(1, 3, 4, 4)  # 4 rows, shared by the channels
        >>> exp = torchlime.explain(model, torch.rand(2, 3, 4, 4), feats, n_samples=64, kernel="wasserstein",
        ...                         return_samples=True)
        >>> exp.weights[:, 0].tolist(), bool(((exp.weights > 0) & (exp.weights <= 1)).all())
        ([1.0, 1.0], True)
    """

    statistic: SmileStatistic = "wasserstein"
    width: float = 0.25
    _cache: dict[str, tuple[torch.Tensor, tuple[int, torch.dtype], torch.Tensor]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    space = "input"  # a class attribute, not a field

    def __post_init__(self) -> None:
        check_choice(self.statistic, "statistic", STATISTICS)
        check_positive_float(self.width, "width")

    def bind(self, features: Optional[FeatureMap], n_samples: int) -> SmileKernel:
        """A fresh kernel for one call (its own cache of the sorted inputs).

        Args:
            features: the call's feature map (unused).
            n_samples: S (unused).

        Returns:
            The fresh kernel.
        """
        return SmileKernel(self.statistic, self.width)

    def _sorted_inputs(self, inputs: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The explained inputs' per-channel values, sorted (B, C, n); sorted once per call."""
        key = (inputs._version, dtype)
        hit = self._cache.get("inputs")
        if hit is None or hit[0] is not inputs or hit[1] != key:
            hit = (inputs, key, channel_samples(inputs).to(dtype).sort(-1).values)
            self._cache["inputs"] = hit
        return hit[2]

    def distances(self, perturbed: object, inputs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Distances float32 (c,) of perturbed rows from their inputs ``inputs[rows]``.

        Args:
            perturbed: (c, ...) the perturbed model inputs.
            inputs: (B, ...) the explained inputs.
            rows: long (c,) the explained input of every row.

        Raises:
            TypeError: perturbed inputs that are not one (c, ...) tensor.
        """
        if not isinstance(perturbed, torch.Tensor) or perturbed.shape[0] != rows.shape[0]:
            raise TypeError(f"SmileKernel needs the perturbed inputs as one (c, ...) tensor, got {describe(perturbed)}")
        p = channel_samples(perturbed)
        dt = torch.float64 if p.dtype == torch.float64 else torch.float32
        o = self._sorted_inputs(inputs, dt)
        limit = _GROUP_ELEMENTS if p.device.type == "cpu" else _GROUP_ELEMENTS_CUDA
        step = max(1, limit // max(2 * p.shape[1] * p.shape[2], 1))
        out = []
        for lo in range(0, p.shape[0], step):  # groups of rows bound the memory of the pooled sort
            ys = p[lo : lo + step].to(dt).sort(-1).values
            xs = o[rows[lo : lo + step].to(o.device)].to(p.device)
            d = _statistic(xs, ys, self.statistic).clamp_min(0).mean(1)
            same = (xs == ys).flatten(1).all(1)  # the input's own values (the input itself): d = 0 exactly
            out.append(torch.where(same, 0.0, d).float())
        return torch.cat(out)

    def normaliser(self, distances: torch.Tensor, drawn: torch.Tensor) -> Optional[torch.Tensor]:
        """Each input's largest distance (B,) over the samples drawn (1 where it is 0).

        Args:
            distances: (B, S) the distances of every sample.
            drawn: bool (B, S) marks the samples drawn.
        """
        top = torch.where(drawn, distances, 0.0).amax(1)
        return torch.where(top > 0, top, 1.0)

    def weigh(self, distances: torch.Tensor) -> torch.Tensor:
        """``exp(-d² / (2 width²))`` of the normalised distances (...), the same shape.

        Args:
            distances: (...) normalised distances, any shape.
        """
        return torch.exp(-(distances * distances) / (2.0 * self.width * self.width))
