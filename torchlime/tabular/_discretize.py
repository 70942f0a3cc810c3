"""Bin boundaries of continuous columns: lime's quartile, decile and entropy discretisers.

A column's boundaries ``q_1 < ... < q_m`` cut it into m + 1 bins; a value x falls in bin
``k = #{j : q_j < x}`` (``searchsorted``, left side: ``q_k < x <= q_{k+1}``), as lime's
``np.searchsorted(qts, x)``.

* ``"quartile"`` / ``"decile"``: the 25/50/75 (10/20/.../90) percentiles of the training
  column, linear interpolation (``np.percentile``), duplicates removed (``np.unique``).
* ``"entropy"``: the thresholds of a depth-3 decision tree grown with the entropy
  criterion on the column alone, against the training labels (lime's
  ``EntropyDiscretizer``: scikit-learn's ``DecisionTreeClassifier(criterion="entropy",
  max_depth=3)``; the median when the tree does not split). The tree is grown here,
  batched over columns, exactly as scikit-learn grows it: values cast to float32, candidate
  splits between sorted values more than 1e-7 apart, the first split with the largest
  proxy ``-n_R H_R - n_L H_L`` (H in bits), thresholds at ``x_{p-1}/2 + x_p/2``, pure nodes
  (H <= machine epsilon) not split.

Boundaries are returned padded with +inf to a (D, Q) tensor, with the count per column.
"""

from __future__ import annotations

import math

import torch

DISCRETIZERS = ("quartile", "decile", "entropy")
_PERCENTILES = {"quartile": (0.25, 0.5, 0.75), "decile": tuple(k / 10 for k in range(1, 10))}
_FEATURE_THRESHOLD = 1e-7  # scikit-learn's tie tolerance between sorted float32 values
_EPSILON = torch.finfo(torch.float64).eps
_MAX_DEPTH = 3


def _pack(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Unique sorted finite boundaries per row of (D, Q) (inf = none), left-packed, +inf padded."""
    rows = rows.sort(dim=1).values
    dup = torch.zeros_like(rows, dtype=torch.bool)
    dup[:, 1:] = rows[:, 1:] == rows[:, :-1]
    rows = rows.masked_fill(dup, math.inf).sort(dim=1).values
    count = torch.isfinite(rows).sum(1)
    width = max(int(count.max()), 1) if rows.shape[0] else 1
    return rows[:, :width].contiguous(), count


def quantile_bins(data: torch.Tensor, discretizer: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Percentile boundaries of every column.

    Args:
        data: float64 (N, D) training data.
        discretizer: "quartile" or "decile".

    Returns:
        ``(boundaries, count)``: float64 (D, Q) unique sorted boundaries padded with +inf,
        long (D,) how many each column has.

    Example:
        >>> b, n = quantile_bins(torch.arange(9.0, dtype=torch.float64).view(9, 1), "quartile")
        >>> b.tolist(), n.tolist()
        ([[2.0, 4.0, 6.0]], [3])
    """
    q = torch.tensor(_PERCENTILES[discretizer], dtype=data.dtype, device=data.device)
    return _pack(torch.quantile(data, q, dim=0).T)


def _entropy(counts: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """Entropy in bits of class counts (..., K) over n (...): scikit-learn's sum, class by class."""
    h = torch.zeros_like(n)
    safe = n.clamp_min(1.0)
    for c in range(counts.shape[-1]):
        p = counts[..., c] / safe
        term = p * (torch.log(p.clamp_min(1e-300)) / math.log(2.0))
        h = h - torch.where(counts[..., c] > 0, term, torch.zeros_like(term))
    return h


def entropy_bins(data: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Lime's entropy boundaries: the thresholds of a depth-3 entropy tree per column.

    Args:
        data: float64 (N, D) training data.
        labels: (N,) class of every training row, a real tensor (classes are its unique values;
            ``fit_stats`` also takes strings).

    Returns:
        ``(boundaries, count)`` as in ``quantile_bins`` (at most 7 boundaries per column).

    Example:
        >>> x = torch.tensor([[0.0], [1.0], [2.0], [3.0]], dtype=torch.float64)
        >>> entropy_bins(x, torch.tensor([0, 0, 1, 1]))[0].tolist()
        [[1.5]]
    """
    n, d = data.shape
    dev = data.device
    _, y = torch.unique(labels, return_inverse=True)
    xs, order = data.float().sort(dim=0)  # scikit-learn grows trees on float32 values
    onehot = torch.nn.functional.one_hot(y[order], int(y.max()) + 1).double()  # (N, D, K)
    cum = torch.cat((torch.zeros_like(onehot[:1]), onehot.cumsum(0)))  # (N+1, D, K)
    # candidate split p (1..N-1) separates sorted rows p-1 and p
    distinct = xs[1:] > xs[:-1] + torch.tensor(_FEATURE_THRESHOLD, dtype=torch.float32)  # (N-1, D)
    pos = torch.arange(n + 1, device=dev).unsqueeze(1).expand(n + 1, d)
    cut = torch.zeros(n + 1, d, dtype=torch.bool, device=dev)
    cut[0] = cut[n] = True  # node boundaries in sorted order
    active = torch.ones(n + 1, d, dtype=torch.bool, device=dev)  # per position: its node may still split
    cols = torch.arange(d, device=dev)
    for _ in range(_MAX_DEPTH):
        start = torch.where(cut, pos, 0).cummax(0).values  # node start of every position
        end = torch.where(cut, pos, n).flip(0).cummin(0).values.flip(0)  # next boundary at or after
        p = pos[1:n]  # (N-1, D) candidates
        s, e = start[: n - 1], end[1:n]  # node of the rows p-1 .. : [s, e)
        left, right = (
            cum[1:n] - cum.gather(0, s.unsqueeze(-1).expand(-1, -1, cum.shape[2])),
            cum.gather(0, e.unsqueeze(-1).expand(-1, -1, cum.shape[2])) - cum[1:n],
        )
        n_l, n_r = (p - s).double(), (e - p).double()
        proxy = -(n_r * _entropy(right, n_r)) - n_l * _entropy(left, n_l)
        node_h = _entropy(left + right, n_l + n_r)
        ok = distinct & ~cut[1:n] & active[: n - 1] & (node_h > _EPSILON)
        key = proxy.masked_fill(~ok, -math.inf)
        node = (s * d + cols).flatten()  # one id per (node, column)
        best = torch.full(((n + 1) * d,), -math.inf, dtype=torch.float64, device=dev)
        best = best.scatter_reduce(0, node, key.flatten(), "amax")
        first = (key.flatten() == best[node]) & ok.flatten()
        where = torch.full(((n + 1) * d,), n + 1, dtype=torch.long, device=dev)
        where = where.scatter_reduce(0, node, torch.where(first, p.flatten(), n + 1), "amin")
        chosen = where.view(n + 1, d)  # best split of the node starting at each row (n + 1: none)
        split_nodes = chosen <= n
        new = torch.zeros_like(cut)
        new.scatter_(0, chosen.clamp_max(n), split_nodes)
        new[n] = False
        # nodes that did not split are leaves: their positions stop splitting
        active = active & split_nodes.gather(0, start)
        cut = cut | new
    inner = cut.clone()
    inner[0] = inner[n] = False
    lo, hi = xs[: n - 1].double(), xs[1:n].double()
    thr = torch.where(inner[1:n], lo / 2.0 + hi / 2.0, math.inf)  # (N-1, D)
    thr = torch.cat((thr, torch.full((1, d), math.inf, dtype=torch.float64, device=dev)))
    k = inner[1:n].sum(0)
    # a column the tree did not split gets its median (np.median: the mean of the middle two)
    srt = data.sort(dim=0).values
    median = (srt[(n - 1) // 2] + srt[n // 2]) / 2.0
    thr[0] = torch.where(k == 0, median, thr[0])
    return _pack(thr.T.contiguous())
