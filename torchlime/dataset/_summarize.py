"""Global summaries of a result folder: ``summarize`` (importance per class, as in SHAP) and ``pick`` (SP-LIME).

``summarize`` streams the folder shard by shard and adds, per class (the explained target of each row), the
sums of |weight|, of the signed weight and of its square over the (row, target) pairs of that class; it
keeps each pair's weight vector (F floats) for a bootstrap of the mean |weight| that resamples rows, and
for the beeswarm. Features must mean the same in every row (the stored feature maps are compared): a fixed
grid, time-frequency bands, tabular columns; superpixels of different images are refused. ``pick`` runs
SP-LIME's ``submodular_pick`` on the folder's coefficient matrix (rows x features).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from typing import Iterator, Optional, Sequence, Union

import torch
from tqdm.auto import tqdm

from torchlime._util.checks import check_positive_int, describe, user_stacklevel
from torchlime.dataset._loaded import Results
from torchlime.dataset._results import LazyResults, load_results
from torchlime.dataset._summary_plots import Summary
from torchlime.methods.sp_lime import submodular_pick

#: floats of per-row weight vectors ``summarize`` keeps for the bootstrap (beyond: a seeded subsample of rows)
BUDGET = 200_000_000
#: coefficients (rows x features) ``pick`` holds at once (the greedy pick needs the whole matrix)
PICK_BUDGET = 50_000_000
#: dots per class kept for the beeswarm, and features per class whose dots are kept
DOTS, SWARM_FEATURES = 500, 20
#: elements of one bootstrap index tensor (n_boot rows are drawn in chunks of at most this many indices)
CHUNK = 1 << 22
_FIELDS = ("index", "coef", "target", "target_valid", "n_features", "features")
ResultsLike = Union[str, "os.PathLike[str]", LazyResults, Results]


def _open(results: object) -> Union[LazyResults, Results]:
    if isinstance(results, (LazyResults, Results)):
        return results
    if isinstance(results, (str, os.PathLike)):
        return load_results(Path(results))
    raise TypeError(
        f"`results` must be a result folder (str or os.PathLike) or what load_results returns, got {describe(results)}"
    )


def _parts(res: Union[LazyResults, Results]) -> Iterator[dict[str, torch.Tensor]]:
    """The fields summaries need, one shard at a time (a ``Results``: itself, as one part)."""
    if isinstance(res, Results):
        yield {k: v for k in _FIELDS if isinstance(v := getattr(res, k), torch.Tensor)}
        return
    for i in range(len(res.entries)):
        yield res._read(res._offsets[i], res._offsets[i + 1], _FIELDS)[0]


class _Comparable:
    """Checks, part by part, that every row has the same features (the same map, else the same count)."""

    def __init__(self) -> None:
        self.ref: Optional[torch.Tensor] = None
        self.n_features: Optional[int] = None
        self.without_maps = False

    def check(self, part: dict[str, torch.Tensor], offset: int) -> int:
        """F, after checking the part's rows (positions ``offset`` on) against the first row."""
        nf, feats = part["n_features"], part.get("features")
        if self.n_features is None:
            self.n_features = int(nf[0])
        if feats is None:
            self.without_maps = True
        else:
            ref = self.ref = feats[0] if self.ref is None else self.ref
            same = (
                (feats == ref).flatten(1).all(1)
                if feats.shape[1:] == ref.shape
                else torch.zeros(feats.shape[0], dtype=torch.bool)
            )
            if not bool(same.all()):
                bad = int((~same).nonzero()[0, 0])
                raise ValueError(
                    f"`results` must hold explanations whose features are the same in every row (a fixed grid, "
                    f"time-frequency bands, tabular columns), got rows with different feature maps (row "
                    f"{offset + bad}, input {int(part['index'][bad])}, differs from row 0): superpixels of "
                    f'different images are not the same features; explain with a fixed grid (segments="grid") '
                    f"to summarize a data set"
                )
        other = nf != self.n_features
        if bool(other.any()):
            bad = int(other.nonzero()[0, 0])
            raise ValueError(
                f"`results` must hold explanations with the same features in every row, got {self.n_features} "
                f"features in row 0 and {int(nf[bad])} in row {offset + bad} (input {int(part['index'][bad])}): "
                f"features that differ between rows (superpixels) cannot be averaged; explain with a fixed grid"
            )
        return self.n_features


def _seed(generator: int, key: str) -> int:
    """A 63-bit seed of ``generator`` and ``key`` (each class's bootstrap has its own stream)."""
    return int.from_bytes(hashlib.sha256(f"{generator}:{key}".encode()).digest()[:8], "little") >> 1


def _grow(acc: torch.Tensor, where: torch.Tensor, size: int) -> torch.Tensor:
    """``acc`` (C, ...) placed at rows ``where`` of a zero (size, ...) tensor."""
    return torch.zeros(size, *acc.shape[1:], dtype=acc.dtype).index_add(0, where, acc)


def boot_means(s: torch.Tensor, m: torch.Tensor, n_draw: int, n_boot: int, seed: int) -> torch.Tensor:
    """Bootstrap means of a ratio: rows resampled, mean = Σ s[idx] / Σ m[idx].

    Indices are drawn as ``torch.randint(0, U, (b, n_draw))`` for chunks of b <= n_boot resamples (b x
    n_draw <= ``CHUNK``) from one generator seeded with ``seed``; each chunk's counts go through one
    matrix product, with no loop over rows.

    Args:
        s: float64 (U, F) per row (unit), the sum of |weight| over its pairs.
        m: float64 (U,) per row, its number of pairs.
        n_draw: rows drawn per resample (the rows of the class; more than U when rows were subsampled).
        n_boot: resamples.
        seed: the generator's seed.

    Returns:
        float64 (n_boot, F) the mean |weight| of every resample.
    """
    g = torch.Generator().manual_seed(seed)
    u = s.shape[0]
    chunk = max(1, min(n_boot, CHUNK // max(n_draw, 1)))
    out = []
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        idx = torch.randint(0, u, (b, n_draw), generator=g)
        counts = torch.zeros(b, u, dtype=torch.float64).scatter_add(1, idx, torch.ones(b, n_draw, dtype=torch.float64))
        out.append((counts @ s) / (counts @ m).unsqueeze(1))
    return torch.cat(out)


class _Sums:
    """Per-class sums over (row, target) pairs, and the pairs kept for the bootstrap, grown part by part."""

    def __init__(self, keep_rows: Optional[torch.Tensor]) -> None:
        self.keep_rows = keep_rows
        self.classes = torch.zeros(0, dtype=torch.long)
        self.acc: dict[str, torch.Tensor] = {}
        self.kept: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def add(self, part: dict[str, torch.Tensor], offset: int, f: int, by_class: bool) -> None:
        target = part["target"]
        valid = target >= 0
        if "target_valid" in part:
            valid = valid & part["target_valid"]
        w = part["coef"][:, :, :f][valid]  # (P, F) row-major: row, then target
        cls = target[valid] if by_class else torch.full((w.shape[0],), -1, dtype=torch.long)
        rows = torch.arange(offset, offset + target.shape[0]).unsqueeze(1).expand_as(target)[valid]
        new = torch.unique(torch.cat((self.classes, cls)))
        c, where, at = new.shape[0], torch.searchsorted(new, self.classes), torch.searchsorted(new, cls)
        w64 = w.double()
        distinct = torch.unique(rows * (c + 1) + at) % (c + 1)  # the class of each distinct (row, class)
        adds = {"abs": (at, w64.abs()), "sum": (at, w64), "sq": (at, w64 * w64)}
        adds.update(count=(at, torch.ones_like(at)), rows=(distinct, torch.ones_like(distinct)))
        self.acc = {
            k: _grow(self.acc.get(k, torch.zeros(0, *v.shape[1:], dtype=v.dtype)), where, c).index_add(0, i, v)
            for k, (i, v) in adds.items()
        }
        self.classes = new
        keep = torch.ones_like(rows, dtype=torch.bool) if self.keep_rows is None else self.keep_rows[rows]
        self.kept.append((w[keep], cls[keep], rows[keep]))


def _check_args(names: object, by_class: object, n_boot: object, generator: object, progress: object) -> None:
    for name, value in (("by_class", by_class), ("progress", progress)):
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a bool, got {describe(value)}")
    check_positive_int(n_boot, "n_boot")
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(f"`generator` must be an int seed >= 0, got {describe(generator)}")
    if generator < 0:
        raise ValueError(f"`generator` must be an int seed >= 0, got {generator}")
    if names is not None and (isinstance(names, str) or not isinstance(names, Sequence)):
        raise TypeError(f"`names` must be a sequence of feature names (one per feature), got {describe(names)}")


def _subsample(n: int, per_row: int, max_floats: int, generator: int) -> tuple[Optional[torch.Tensor], list[str]]:
    """Rows kept for the bootstrap: all (None), or a seeded subsample that fits ``max_floats``."""
    if n * per_row <= max_floats:
        return None, []
    m = max(1, max_floats // max(per_row, 1))
    pick = torch.randperm(n, generator=torch.Generator().manual_seed(_seed(generator, "rows")))[:m]
    note = (
        f"the bootstrap used a seeded subsample of {m} of the {n} rows (their weight vectors would take "
        f"{n * per_row} floats, over the budget of {max_floats}); means and counts use every row"
    )
    return torch.zeros(n, dtype=torch.bool).index_fill(0, pick, True), [note]


def summarize(
    results: ResultsLike,
    *,
    names: Optional[Sequence[str]] = None,
    by_class: bool = True,
    n_boot: int = 200,
    generator: int = 0,
    progress: bool = False,
    max_floats: int = BUDGET,
) -> Summary:
    """Data-set-level feature importance of a result folder, per class (as SHAP's summary plots).

    For every feature, over the (row, target) pairs of each class (the class of a pair is the row's
    explained ``target`` column; with several targets per row each pair counts for its class): the mean
    |weight|, the mean signed weight and its standard deviation, the number of pairs and a bootstrap 95%
    interval of the mean |weight| (percentiles of ``n_boot`` resamples of the class's rows, seeded).
    The folder is read one shard at a time (memory: a shard plus F floats per pair for the bootstrap; past
    ``max_floats`` a seeded subsample of rows, said in ``Summary.notes``). Features must be the same in
    every row: the stored feature maps are compared (a fixed grid, time-frequency bands, tabular columns);
    without maps (``keep`` without "features", older folders) equal feature counts are taken as the same
    features, with a warning.

    Args:
        results: a result folder of ``explain_dataset`` (str or os.PathLike), or what ``load_results``
            returns (a ``LazyResults``, or a ``Results`` in memory).
        names: F feature names (e.g. tabular column names); None: ``"feature j"``.
        by_class: one summary per class; False: every pair pooled (class -1).
        n_boot: bootstrap resamples (>= 1).
        generator: int seed of the bootstrap (and of any subsample).
        progress: a tqdm bar over the shards.
        max_floats: budget of the per-pair weight vectors kept for the bootstrap (floats).

    Returns:
        ``Summary``: ``mean_abs``, ``mean``, ``std``, ``low``, ``high`` (C, F), ``count`` (C,), ``table(k)``,
        ``save(path)``, ``plot_bars(k)``, ``plot_beeswarm(k)``.

    Raises:
        TypeError / ValueError: bad arguments; an empty folder; rows whose features differ (superpixels of
            different images are not the same features: explain with ``segments="grid"``).

    Example:
        >>> import tempfile, torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
        >>> grid = torch.arange(16).view(1, 1, 4, 4) // 4               # 4 features: the rows
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = torchlime.dataset.explain_dataset(model, torch.rand(8, 1, 4, 4), out, modality=grid,
        ...             call=torchlime.Call(n_samples=32, target="all"), progress=False)
        ...     s = summarize(out, n_boot=50)
        >>> s.mean_abs.shape, s.count.tolist(), len(s.table(k=2))
        (torch.Size([2, 4]), [8, 8], 4)
    """
    _check_args(names, by_class, n_boot, generator, progress)
    check_positive_int(max_floats, "max_floats")
    res = _open(results)
    n = len(res)
    if n == 0:
        raise ValueError("`results` must hold at least one finished explanation, got none")
    t_max, f_max = (res.n_targets, res.n_features_max) if isinstance(res, LazyResults) else res.coef.shape[1:]
    if names is not None and len(names) != f_max:  # comparable rows all have F = F_max features
        raise ValueError(f"`names` must hold one name per feature ({f_max}), got {len(names)}")
    keep_rows, notes = _subsample(n, t_max * f_max, max_floats, generator)
    comparable, sums, offset = _Comparable(), _Sums(keep_rows), 0
    parts = _parts(res)
    total = len(res.entries) if isinstance(res, LazyResults) else 1
    for part in tqdm(parts, total=total, unit="shard", desc="summarize", disable=not progress):
        f = comparable.check(part, offset)
        sums.add(part, offset, f, by_class)
        offset += part["coef"].shape[0]
    if comparable.without_maps:
        note = (
            f"`results` holds no feature maps (keep without 'features', or an older folder): features were taken as "
            f"the same in every row because every row has {f} features; make sure they mean the same thing "
            f"(a fixed grid, tabular columns), superpixels do not"
        )
        warnings.warn(note, UserWarning, stacklevel=user_stacklevel())
        notes.append(note)
    labels = tuple(str(x) for x in names) if names is not None else tuple(f"feature {j}" for j in range(f))
    return _finish(sums, labels, n, n_boot, generator, notes, keep_rows)


def _finish(
    sums: _Sums,
    names: tuple[str, ...],
    n: int,
    n_boot: int,
    generator: int,
    notes: list[str],
    keep_rows: Optional[torch.Tensor],
) -> Summary:
    """The statistics of the sums, and the bootstrap and the dots of the kept pairs (a loop over classes)."""
    acc, classes, f = sums.acc, sums.classes, len(names)
    count = acc["count"]
    per = count.double().unsqueeze(1)
    mean_abs, mean = acc["abs"] / per, acc["sum"] / per
    std = (acc["sq"] / per - mean * mean).clamp_min(0).sqrt()
    w = torch.cat([k[0] for k in sums.kept])
    cls, rows = torch.cat([k[1] for k in sums.kept]), torch.cat([k[2] for k in sums.kept])
    order = torch.sort(cls, stable=True)[1]
    w, cls, rows = w[order], cls[order], rows[order]
    bounds = torch.searchsorted(cls, classes, right=False).tolist() + [cls.shape[0]]
    k_swarm = min(SWARM_FEATURES, f)
    top = mean_abs.argsort(dim=1, descending=True, stable=True)[:, :k_swarm]
    low, high, dots = [], [], []
    for i, c in enumerate(classes.tolist()):
        wc, rc = w[bounds[i] : bounds[i + 1]], rows[bounds[i] : bounds[i + 1]]
        if wc.shape[0] == 0:  # no kept row of this class (a rare class outside the subsample)
            low.append(torch.full((f,), float("nan"), dtype=torch.float64))
            high.append(low[-1])
            dots.append(torch.full((DOTS, k_swarm), float("nan")))
            continue
        units, inv = torch.unique(rc, return_inverse=True)
        s = torch.zeros(units.shape[0], f, dtype=torch.float64).index_add(0, inv, wc.double().abs())
        m = torch.zeros(units.shape[0], dtype=torch.float64).index_add(0, inv, torch.ones_like(inv).double())
        boots = boot_means(s, m, int(acc["rows"][i]), n_boot, _seed(generator, f"class {c}"))
        q = torch.quantile(boots, torch.tensor([0.025, 0.975], dtype=torch.float64), dim=0)
        low.append(q[0])
        high.append(q[1])
        picked = torch.arange(wc.shape[0])
        if wc.shape[0] > DOTS:
            g = torch.Generator().manual_seed(_seed(generator, f"dots {c}"))
            picked = torch.randperm(wc.shape[0], generator=g)[:DOTS].sort()[0]
        chosen = wc[picked][:, top[i]].float()
        dots.append(torch.nn.functional.pad(chosen, (0, 0, 0, DOTS - chosen.shape[0]), value=float("nan")))
    dot_tensor = torch.stack(dots)
    width = int((~dot_tensor.isnan()).any(2).sum(1).max())
    return Summary(
        classes=classes,
        names=names,
        mean_abs=mean_abs,
        mean=mean,
        std=std,
        low=torch.stack(low),
        high=torch.stack(high),
        count=count,
        rows=acc["rows"],
        n_rows=n,
        n_boot=n_boot,
        generator=generator,
        bootstrap_rows=n if keep_rows is None else int(keep_rows.sum()),
        dots=dot_tensor[:, :width],
        dot_features=top,
        notes=tuple(notes),
    )


def pick(results: ResultsLike, budget: int, *, max_floats: int = PICK_BUDGET) -> torch.Tensor:
    """SP-LIME over a whole result folder: the rows whose explanations together cover the most important features.

    ``torchlime.methods.sp_lime.submodular_pick`` on the folder's explanation matrix (rows x features, each
    row's coefficients summed over its targets), read shard by shard into memory: folders whose matrix holds
    more than ``max_floats`` coefficients are refused. Features must be the same in every row (as for
    ``summarize``: the stored maps are compared).

    Args:
        results: a result folder (str or os.PathLike), a ``LazyResults`` or a ``Results``.
        budget: how many rows to pick, 1 <= budget <= the rows of the folder.
        max_floats: the largest matrix (rows x features) held.

    Returns:
        long (budget,) the global indices (data-set positions) of the picked rows, in the order picked.

    Raises:
        TypeError / ValueError: bad arguments, an empty folder, a matrix over ``max_floats``, or rows whose
            features differ (superpixels).

    Example:
        >>> import tempfile, torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
        >>> grid = torch.arange(16).view(1, 1, 4, 4) // 4
        >>> images = torch.rand(8, 1, 4, 4)
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = torchlime.dataset.explain_dataset(model, images, out, modality=grid,
        ...             call=torchlime.Call(n_samples=32), progress=False)
        ...     picked = pick(out, 3)
        >>> picked.shape
        torch.Size([3])
    """
    check_positive_int(max_floats, "max_floats")
    res = _open(results)
    n = len(res)
    if n == 0:
        raise ValueError("`results` must hold at least one finished explanation, got none")
    f_max = res.n_features_max if isinstance(res, LazyResults) else res.coef.shape[-1]
    if n * f_max > max_floats:
        raise ValueError(
            f"`results` must hold at most `max_floats` = {max_floats} coefficients for pick, which holds the whole "
            f"matrix in memory: got {n} rows x {f_max} features = {n * f_max}; pick over a part "
            f"(load_results(out)[a:b]) or raise max_floats"
        )
    comparable, offset, mats, index = _Comparable(), 0, [], []
    for part in _parts(res):
        f = comparable.check(part, offset)
        mats.append(part["coef"][:, :, :f].sum(1).double())
        index.append(part["index"])
        offset += part["coef"].shape[0]
    return torch.cat(index)[submodular_pick(torch.cat(mats), budget)]
