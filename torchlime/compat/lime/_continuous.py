"""lime's undiscretised tabular explanation (``discretize_continuous=False``), batched in torch.

lime's ``LimeTabularExplainer`` without discretization explains a row on the raw values of its
samples, not on "same bin" masks:

* samples (``gaussian_draws``): a continuous column is ``N(0, 1) · scale + mean`` (the training
  ``StandardScaler``'s), or ``+ the row's value`` with ``sample_around_instance``; a categorical
  column takes a training value by training frequency; sample 0 is the row itself;
* ``predict_fn`` runs once on all S rows (float64 numpy, lime's ``inverse``);
* the surrogate's data (``lime_design``): continuous columns scaled, ``(x - mean) / scale``;
  categorical columns 1 where the sample keeps the row's value, else 0 (lime's sparse rows:
  ``x · scale``, as lime multiplies there, and only the row's non-zero columns vary);
* weights ``sqrt(exp(-d² / width²))``, d the euclidean distance of a sample's scaled row from the
  row's (width ``0.75 √D`` by default);
* the fit (``GaussianLime.fit``): the weighted normal equations of those values, lime's feature
  selection on them (``highest_weights`` ranks ``|β · scaled row|``, as lime multiplies its ridge
  weights by the first sample), the refit on the chosen columns (lime's ``Ridge(alpha=1)``), and
  ``local_pred`` at the scaled row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, cast

import numpy as np
import torch
from numpy.typing import NDArray

from torchlime.compat.lime._common import Recording
from torchlime.engine.explanation import Explanation as Result
from torchlime.engine.sizes import check_sizes
from torchlime.methods.feature_selection import restrict, select_features
from torchlime.stages.normal import Fit, Normal, solve_spd
from torchlime.stages.surrogate import Surrogate
from torchlime.tabular import TabularInfo
from torchlime.tabular.stats import TabularStats, gaussian_draws
from torchlime.typing import SelectionMethod

#: lime's label -> [(column, weight)], largest |weight| first (its ``local_exp``)
Pairs = dict[int, list[tuple[int, float]]]


def lime_design(
    stats: TabularStats, values: torch.Tensor, sparse: bool = False, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Lime's ``scaled_data``: (B, S, D), the surrogate's data and the kernel's space.

    Args:
        stats: the training statistics (mean, scale, categorical columns).
        values: float64 (B, S, D) sample rows, sample 0 the row itself.
        sparse: lime's sparse rows: continuous columns multiplied by the scale (not centred).
        dtype: the design's dtype (float32 halves the work of the fit; the columns are standardised).

    Returns:
        Continuous columns ``(x - mean) / scale`` (sparse: ``x · scale``); categorical columns 1.0
        where the sample keeps the row's value, else 0.0.
    """
    scaled = (values * stats.scale if sparse else (values - stats.mean) / stats.scale).to(dtype)
    cat = stats.categorical.nonzero().flatten()
    if not cat.numel():
        return scaled
    same = values[..., cat] == values[:, :1, cat]
    return scaled.index_copy(2, cat, same.to(dtype))


def gaussian_design(
    stats: TabularStats, values: torch.Tensor, z: torch.Tensor, around_instance: bool, sparse: bool = False
) -> torch.Tensor:
    """``lime_design`` of ``gaussian_draws``' rows, read off their normals z (float32, no pass in float64).

    A continuous column's scaled value ``(c + scale · z - mean) / scale`` is ``z + (c - mean) / scale``:
    z itself for samples about the mean. Row 0 and the categorical columns are written into z (the
    caller's own draws, consumed).

    Args:
        stats: the training statistics.
        values: float64 (B, S, D) the rows.
        z: float32 (B, S, D) their normals (``gaussian_draws``); overwritten.
        around_instance: the rows were drawn about the row (c the row) rather than the mean.
        sparse: lime's sparse scaling (``x · scale``): computed from the values instead.

    Returns:
        Float32 (B, S, D) the design.
    """
    if sparse:
        return lime_design(stats, values, True, z.dtype)
    row = lime_design(stats, values[:, :1])  # float64 (B, 1, D), categorical columns 1
    design = z.add_(row.to(z.dtype)) if around_instance else z
    cat = stats.categorical.nonzero().flatten()
    if cat.numel():
        design[..., cat] = (values[..., cat] == values[:, :1, cat]).to(z.dtype)
    design[:, :1] = row.to(z.dtype)
    return design


def lime_weights(design: torch.Tensor, width: float) -> torch.Tensor:
    """Lime's kernel ``sqrt(exp(-d² / width²))``: float64 (B, S), d the euclidean distance from sample 0.

    Args:
        design: (B, S, D) ``lime_design``.
        width: the kernel width.
    """
    d2 = torch.linalg.vector_norm(design - design[:, :1], dim=-1).double().square()
    return torch.exp(-d2 / (2.0 * width * width))


def scaled_normal(design: torch.Tensor, y: torch.Tensor, weights: torch.Tensor) -> Normal:
    """The weighted centred normal equations of the scaled design (float64 results).

    The design is centred on its weighted mean before the products (in its own dtype), so float32
    products stay accurate whatever the columns' offsets (e.g. samples around an outlying row).

    Args:
        design: (B, S, D) ``lime_design``.
        y: (B, S, T) outputs.
        weights: (B, S) weights.

    Returns:
        ``Normal`` with gram (B, D, D), rhs (B, D, T), the weighted means, Σw, Σw², ss_tot and S.
    """
    w = weights.double()
    y = y.double()
    sw = w.sum(1)
    wx = w.to(design.dtype)
    x_mean = (wx.unsqueeze(1) @ design).squeeze(1) / sw.to(design.dtype).unsqueeze(1)  # (B, D)
    y_mean = (w.unsqueeze(1) @ y).squeeze(1) / sw.unsqueeze(1)  # (B, T)
    xc = design - x_mean.unsqueeze(1)
    yc = y - y_mean.unsqueeze(1)
    xcw = (xc * wx.unsqueeze(-1)).transpose(1, 2)
    gram = (xcw @ xc).double()
    rhs = (xcw @ yc.to(design.dtype)).double()
    ss_tot = (w.unsqueeze(-1) * yc.square()).sum(1)
    n = torch.full_like(sw, float(design.shape[1]))
    sym = 0.5 * (gram + gram.transpose(1, 2))
    return Normal(sym, rhs, x_mean.double(), y_mean, sw, ss_tot, w.square().sum(1), None, y[:, 0], n)


def select_lime(ne: Normal, row: torch.Tensor, k: int, method: str) -> torch.Tensor:
    """The columns lime's ``feature_selection`` chooses on the scaled data: bool (B, T, D).

    Args:
        ne: the weighted normal equations of the design, gram (B, D, D) and rhs (B, D, T).
        row: (B, D) the scaled row (sample 0 of the design).
        k: lime's ``num_features``.
        method: "auto", "forward_selection", "highest_weights", "lasso_path" or "none".

    Returns:
        Every column for "none"; else ``min(k, D)`` columns (the lasso path's may be fewer).
    """
    b, d, t = ne.rhs.shape
    valid = torch.ones(b, d, dtype=torch.bool, device=row.device)
    if method == "none":
        return valid.unsqueeze(1).expand(b, t, d)
    if method == "auto":
        method = "forward_selection" if k <= 6 else "highest_weights"
    if method != "highest_weights":
        return select_features(ne, valid, k, cast(SelectionMethod, method))
    beta = solve_spd(ne.gram, ne.rhs, 0.01).transpose(1, 2)  # lime's Ridge(alpha=0.01): (B, T, D)
    key = (beta * row.unsqueeze(1)).abs()
    order = key.sort(dim=-1, descending=True, stable=True).indices  # ties: the lowest column
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(d, device=order.device).expand_as(order))
    return rank < k


@dataclass(frozen=True)
class GaussianLime:
    """lime's undiscretised explanation of one row, from the explainer's settings.

    Attributes:
        stats: the training statistics (``fit_stats``).
        feature_selection: lime's ``feature_selection``.
        num_features: lime's ``num_features``.
        refit: the surrogate fitted on the chosen columns (``_common.refit_for``).
        kernel_width: the kernel width (None: ``0.75 √D``).
        around_instance: lime's ``sample_around_instance``.
        sparse: the training data was sparse (lime's sparse sampling and scaling).
        feature_names: the D column names (kept in the record), or None.
    """

    stats: TabularStats
    feature_selection: str
    num_features: int
    refit: Surrogate
    kernel_width: Optional[float] = None
    around_instance: bool = False
    sparse: bool = False
    feature_names: Optional[list[str]] = None

    @property
    def width(self) -> float:
        """The kernel width."""
        return 0.75 * math.sqrt(self.stats.n_columns) if self.kernel_width is None else self.kernel_width

    def fit(
        self, design: torch.Tensor, y: torch.Tensor, weights: torch.Tensor, row: torch.Tensor
    ) -> tuple[Fit, torch.Tensor]:
        """Select and refit on the scaled data, for every (row, label).

        Args:
            design: (B, S, D) ``lime_design``.
            y: (B, S, T) the scores of the explained labels.
            weights: (B, S) the kernel's weights.
            row: float64 (B, D) the scaled rows (sample 0 of the design).

        Returns:
            ``(fit, chosen)``: the ``Fit`` (coef (B, T, D), zero outside the chosen columns;
            ``local_pred`` at the scaled row) and bool (B, T, D) the chosen columns.
        """
        ne = scaled_normal(design, y, weights)
        chosen = select_lime(ne, row, self.num_features, self.feature_selection)
        b, t, d = chosen.shape
        got = self.refit.fit_normal(restrict(ne, chosen), chosen.reshape(b * t, d))
        coef = got.coef.reshape(b, t, d).double() * chosen
        intercept = got.intercept.reshape(b, t).double()
        local_pred = intercept + (coef * row.unsqueeze(1)).sum(-1)  # lime predicts its scaled first row
        return Fit(coef, intercept, got.score.reshape(b, t).double(), local_pred), chosen

    def explain(
        self,
        row: NDArray[np.float64],
        rec: Recording[NDArray[np.float64]],
        labels: Sequence[int],
        top_labels: Optional[int],
        num_samples: int,
        seed: int,
        batch_size: Optional[int] = None,
    ) -> tuple[Result, Pairs]:
        """Sample, call ``predict_fn`` once on all rows, weigh and fit, as lime does.

        Args:
            row: (D,) the row.
            rec: ``predict_fn`` wrapped (its checks, the instance's scores, the range of the outputs).
            labels: the classes to explain, in lime's order (ignored with ``top_labels``, and for a
                regression, whose ``rec`` takes predictions: label 0).
            top_labels: explain the K most probable classes of the row instead (lime fits them from
                the least probable up).
            num_samples: S, the row included.
            seed: the seed of the samples.
            batch_size: rows per ``predict_fn`` call (None: all S in one call, as lime).

        Returns:
            The torchlime ``Explanation`` (coef (1, T, D), targets in lime's order, ``info`` a
            ``TabularInfo``) and lime's ``local_exp`` of every explained label.
        """
        stats = self.stats
        x = torch.from_numpy(row).to(stats.mean.device).view(1, -1)
        fixed = (x == 0) & ~stats.categorical if self.sparse else None
        t = top_labels or len(labels) if rec.classifier else 1  # sizes refused before the draws (1, S, D) are made
        check_sizes(
            1, num_samples, x.shape[1], t, device=x.device, keep_samples=True, sample_bytes=12, argument="num_samples"
        )
        values, z = gaussian_draws(stats, x, num_samples, seed, around_instance=self.around_instance, fixed=fixed)
        rows = values[0].cpu().numpy()
        step = num_samples if batch_size is None else batch_size
        parts = [rec(rows[i : i + step]) for i in range(0, num_samples, step)]
        scores = (parts[0] if len(parts) == 1 else torch.cat(parts)).to(x.device)
        if not rec.classifier:  # a regression: lime's label 0, its first value per row
            targets, y = [0], scores.reshape(1, num_samples, -1)[..., :1]
        else:
            first = cast(NDArray[np.float64], rec.first)
            targets = [int(c) for c in np.argsort(first)[-top_labels:]] if top_labels else list(labels)
            y = scores[:, targets].unsqueeze(0)
        design = gaussian_design(stats, values, z, self.around_instance, self.sparse)
        row_scaled = lime_design(stats, values[:, :1], self.sparse)[:, 0]
        fit, chosen = self.fit(design, y, lime_weights(design, self.width), row_scaled)
        pairs: Pairs = {}
        for j, label in enumerate(targets):
            coef = fit.coef[0, j].tolist()
            cols = chosen[0, j].nonzero().flatten().tolist()
            pairs[label] = sorted(((f, coef[f]) for f in cols), key=lambda p: (-abs(p[1]), p[0]))
        d = stats.n_columns
        sampling = "gaussian_instance" if self.around_instance else "gaussian"
        info = _info(stats, x, sampling, self.width, self.feature_names)
        result = Result(
            coef=fit.coef,
            intercept=fit.intercept,
            score=fit.score,
            local_pred=fit.local_pred,
            target=torch.tensor([targets], dtype=torch.long),
            features=torch.arange(d).view(1, d),
            n_features=torch.tensor([d]),
            input_shape=(d,),
            info=info,  # the sampling, the kernel's width and the bins (``meta["tabular"]`` renders it)
        )
        return result, pairs


def _info(stats: TabularStats, x: torch.Tensor, sampling: str, width: float, names: Optional[list[str]]) -> TabularInfo:
    """The tabular record of the row (its levels and categories, the training bins)."""
    cat = stats.categorical.nonzero().flatten()
    return TabularInfo(
        sampling="gaussian_instance" if sampling == "gaussian_instance" else "gaussian",
        discretizer=stats.discretizer,
        kernel_width=width,
        feature_names=names,
        levels=stats.levels(x),
        categorical=[int(c) for c in cat.tolist()],
        instances=x[:, cat],
        boundaries=[[v for v in r if math.isfinite(v)] for r in stats.boundaries.tolist()],
        values=[[v for v in r if not math.isnan(v)] for r in stats.values.tolist()],
    )
