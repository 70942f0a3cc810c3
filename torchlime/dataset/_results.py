"""Reading a result folder of ``explain_dataset``: ``load_results`` and ``LazyResults`` (rows: ``Results``).

``load_results(out)`` reads only ``index.json`` and the shards' headers; tensors are read from
the shard files when asked for (one read of just the rows a slice needs, ``_shardfile``), so a folder
larger than memory can be walked shard by shard. The folder is untrusted input: its entries are opened
without following links and checked before anything is allocated (``_util.files``, ``_shardfile``).
"""

from __future__ import annotations

import bisect
import operator
import os
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Iterator, Optional, Union, overload

import torch

from torchlime._util.checks import describe
from torchlime._util.files import Folder
from torchlime.dataset._loaded import Results
from torchlime.dataset._scan import (
    FIRST,
    MAPS,
    OPTIONAL,
    READABLE,
    REQUIRED,
    IndexInfo,
    ShardEntry,
    collect,
    pad_targets,
    read_index,
)
from torchlime.dataset._shardfile import ShardFile, input_shape

_PADDED = ("coef", "coef_std", "coef_se")  # (n, T, F): padded with zeros to the widest shard's F


class _Stored:
    """A read-only attribute of ``LazyResults``: one stored field of every finished input, ``field(name)``.

    Args:
        doc: the attribute's docstring, with the field's shape.
    """

    def __init__(self, doc: str) -> None:
        self.__doc__, self.name = doc, ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Stored: ...

    @overload
    def __get__(self, obj: LazyResults, owner: type) -> torch.Tensor: ...

    def __get__(self, obj: Optional[LazyResults], owner: type) -> Union[_Stored, torch.Tensor]:
        return self if obj is None else obj.field(self.name)


class LazyResults:
    """A result folder, read on access (what ``load_results`` returns).

    Positions ``0 .. len - 1`` run over the finished inputs in the order of their global
    index; when the run is complete, position i is global index i.

    * ``len(res)``: finished inputs; ``res.complete``: every shard is there; ``res.n_inputs``: N
      of the data set (None while unknown); ``res.info``: the index (arguments, versions, shards).
    * ``res.index``: long (n,) global indices (from the index, no file read).
    * ``res[a:b]``, ``res[i]`` (int: one input): a ``Results`` read from just those rows.
    * ``for part in res``: one ``Results`` per shard, in order (memory: one shard at a time).
    * ``res.coef``, ``res.score``, ``res.target``, ``res.intercept``, ``res.local_pred``,
      ``res.n_features``, ``res.field(name)``: one field of every input, stacked (read again at
      every access); ``res.load()``: everything (``res[:]``).
    * ``res[i].explanation()``: an ``Explanation`` with the stored feature maps (``heatmap()``, the
      pictures of ``torchlime.image.viz``); ``res[i].features`` long (1, *fshape), ``res[i].inputs``
      (with ``keep=("features", "inputs")``).

    Args:
        out: the result folder.
        info: its ``index.json`` (arguments, versions, shards).
        entries: one index entry per finished shard (``shard``, ``file``, ``start``, ``stop``,
            ``n_features_max``, ``n_targets``), in any order.
    """

    def __init__(self, out: Union[str, Path], info: IndexInfo, entries: list[ShardEntry]) -> None:
        self.out, self.info = Path(out), info
        self.entries = sorted(entries, key=lambda e: e["shard"])
        sizes = [e["stop"] - e["start"] for e in self.entries]
        self._offsets = [0]
        for n in sizes:
            self._offsets.append(self._offsets[-1] + n)
        self.n_features_max = max((e["n_features_max"] for e in self.entries), default=0)
        self.n_targets = max((e["n_targets"] for e in self.entries), default=0)

    @property
    def n_inputs(self) -> Optional[int]:
        """N, the inputs of the data set (None while a run over data of unknown length is unfinished)."""
        return self.info.get("n_inputs")

    @property
    def complete(self) -> bool:
        """True when every shard of the data set is finished."""
        n_shards = self.info.get("n_shards")
        return n_shards is not None and len(self.entries) == n_shards

    @property
    def index(self) -> torch.Tensor:
        """Long (n,) global index of every finished input."""
        parts = [torch.arange(e["start"], e["stop"]) for e in self.entries]
        return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)

    def __len__(self) -> int:
        return self._offsets[-1]

    def field(self, name: str) -> torch.Tensor:
        """One stored field of every finished input, stacked.

        Args:
            name: the field, one of the shard files' tensors: e.g. ``"coef"`` (n, T, F_max), ``"score"`` (n, T),
                ``"features"`` long (n, *fshape).

        Returns:
            The field of every finished input, stacked along the first dimension.

        Raises:
            ValueError: a name that is not a stored field, or one that some shards do not hold.
        """
        allowed = REQUIRED + OPTIONAL
        if name not in allowed:
            raise ValueError(f"`name` must be one of {list(allowed)}, got {name!r}")
        data, _ = self._read(0, len(self), (name,))
        if name not in data:
            raise ValueError(f"`name` must be a field every shard of {str(self.out)!r} holds, got {name!r}")
        return data[name]

    coef = _Stored("(n, T, F_max) coefficients, zero-padded.")
    intercept = _Stored("(n, T) intercepts.")
    score = _Stored("(n, T) weighted R².")
    local_pred = _Stored("(n, T) predictions at the inputs.")
    target = _Stored("Long (n, T) explained columns.")
    n_features = _Stored("Long (n,) F_b of each input.")

    @property
    def valid(self) -> torch.Tensor:
        """Bool (n, F_max): features that exist for each input."""
        return torch.arange(self.n_features_max) < self.n_features.unsqueeze(1)

    def load(self) -> Results:
        """Every finished input in memory (``self[:]``)."""
        return self[:]

    def __getitem__(self, key: Union[int, slice]) -> Results:
        n = len(self)
        if not isinstance(key, (slice, bool)) and hasattr(key, "__index__"):  # int, NumPy or 0-dim tensor ints
            key = operator.index(key)
            if not -n <= key < n:
                raise IndexError(f"`key` must be in [-{n}, {n}) for results of {n} inputs, got {key}")
            key = slice(key % n, key % n + 1)
        if not isinstance(key, slice):
            raise TypeError(f"`key` must be an int or a slice of positions, got {describe(key)}")
        positions = range(*key.indices(n))
        if len(positions) == 0:
            return self._results(*self._read(0, 0))
        lo, hi = min(positions), max(positions) + 1
        data, shape = self._read(lo, hi)
        if key.step not in (None, 1):
            pick = torch.tensor(positions, dtype=torch.long) - lo
            data = {k: v.index_select(0, pick) for k, v in data.items()}
        return self._results(data, shape)

    def __iter__(self) -> Iterator[Results]:
        for i in range(len(self.entries)):
            yield self._results(*self._read(self._offsets[i], self._offsets[i + 1]))

    def _results(self, data: dict[str, torch.Tensor], input_shape: Optional[tuple[int, ...]]) -> Results:
        names = {f.name for f in fields(Results)}
        return Results(**{k: v for k, v in data.items() if k in names}, input_shape=input_shape)

    def _read(
        self, lo: int, hi: int, names: tuple[str, ...] = ()
    ) -> tuple[dict[str, torch.Tensor], Optional[tuple[int, ...]]]:
        """Fields ``names`` (default: all stored) of positions lo..hi-1, padded to F_max, and one input's shape.

        A field that one of the shards read does not hold is left out; feature maps come back as long. The
        shape is None when the shards do not record one (the earlier formats) or record different ones.
        """
        parts: dict[str, list[torch.Tensor]] = {}
        shapes: set[Optional[tuple[int, ...]]] = set()
        first, read = max(0, bisect.bisect_right(self._offsets, lo) - 1), 0
        with Folder.open(self.out) as folder:
            for i in range(first, len(self.entries)):
                a, b = max(lo, self._offsets[i]) - self._offsets[i], min(hi, self._offsets[i + 1]) - self._offsets[i]
                if b <= 0 or a >= b:
                    break
                read += 1
                with ShardFile(folder, self.entries[i]["file"]) as f:
                    _check_unchanged(f, self.entries[i])
                    shapes.add(input_shape(f.metadata, f.where))
                    for name in (n for n in names or REQUIRED + OPTIONAL if n in f.tensors):
                        t = pad_targets(name, f.rows(name, a, b), self.n_targets)
                        if name in _PADDED and t.shape[-1] < self.n_features_max:
                            t = torch.nn.functional.pad(t, (0, self.n_features_max - t.shape[-1]))
                        parts.setdefault(name, []).append(t.long() if name == "features" else t)
        shape = shapes.pop() if len(shapes) == 1 else None
        if not parts:
            return {
                "index": torch.zeros(0, dtype=torch.long),
                "coef": torch.zeros(0, self.n_targets, self.n_features_max),
                **{k: torch.zeros(0, self.n_targets) for k in ("intercept", "score", "local_pred")},
                "target": torch.zeros(0, self.n_targets, dtype=torch.long),
                "n_features": torch.zeros(0, dtype=torch.long),
            }, None
        return {k: _cat(k, v, lo, hi) for k, v in parts.items() if len(v) == read}, shape

    def __repr__(self) -> str:
        state = (
            "complete" if self.complete else f"incomplete: {len(self.entries)} of {self.info.get('n_shards') or '?'}"
        )
        return (
            f"LazyResults of {len(self)} input(s) in {len(self.entries)} shard(s) ({state}) at {str(self.out)!r}: "
            f"{self.n_targets} target(s), up to {self.n_features_max} features"
        )


def _check_unchanged(f: ShardFile, entry: ShardEntry) -> None:
    """Refuse a shard file whose rows, features or targets are not those ``load_results`` found."""
    coef = f.tensors["coef"].shape if "coef" in f.tensors else ()
    rows = {spec.shape[0] if spec.shape else -1 for spec in f.tensors.values()}
    if rows != {entry["stop"] - entry["start"]} or coef[1:] != (entry["n_targets"], entry["n_features_max"]):
        raise ValueError(
            f"{f.where} must hold the {entry['stop'] - entry['start']} rows of {entry['n_targets']} target(s) and "
            f"{entry['n_features_max']} features load_results found, got tensors of shapes "
            f"{sorted({spec.shape for spec in f.tensors.values()})}: it changed since; open the folder again"
        )


def _cat(name: str, parts: list[torch.Tensor], lo: int, hi: int) -> torch.Tensor:
    """One field of consecutive shards; feature maps or inputs of different shapes are refused by name."""
    if name in MAPS and len({t.shape[1:] for t in parts}) > 1:
        shapes = sorted({tuple(t.shape[1:]) for t in parts})
        raise ValueError(
            f"the {name} of positions {lo}..{hi - 1} have different shapes {shapes} in different shards: read them "
            f"one shard at a time (`for part in results`) or one input at a time (`results[i]`)"
        )
    return torch.cat(parts)


def load_results(out: Union[str, Path], *, verify: bool = True) -> LazyResults:
    """Open a folder written by ``explain_dataset`` (lazily: tensors are read on access).

    The shard files present are what is read (their headers are checked against the index's
    fingerprint), so finished shards the index does not list yet (a run killed between a shard's
    rename and the index update, or a distributed run still going) are included. With ``verify``
    every shard file is read once and checked against the SHA-256 its header holds: a damaged
    shard (flipped bytes, truncated, unreadable) is left out with a ``RuntimeWarning`` naming the
    file (``complete`` is then False) and one rerun of the same ``explain_dataset`` call computes
    its rows again. Folders of the first format (no checksums) are read unverified, with a warning;
    those of the second hold no feature maps (``Results.features`` is None: drawing needs the maps
    rebuilt, ``Results.explanation(features=...)``).

    Args:
        out: the folder given to ``explain_dataset``.
        verify: hash every shard file now (costs reading the folder once: about 1 s per GB on a
            warm page cache, more from a cold disk); False reads only the headers (milliseconds)
            and trusts the bytes.

    Returns:
        ``LazyResults``: ``len``, ``index`` (n,), slicing ``res[a:b]`` -> ``Results`` with
        ``coef`` (n, T, F_max), ``target``, ``score`` (n, T), ``n_features`` (n,), ``valid``
        (n, F_max), ``features`` long (n, *fshape); iteration by shard; ``res.load()`` for everything at
        once; ``res[i].explanation()``: an ``Explanation`` with its feature map, ``res[i].heatmap()``.

    Raises:
        FileNotFoundError: ``out`` has no ``index.json``. ValueError: an index of another format, or a
            damaged index (``explain_dataset`` with the same arguments rebuilds it).
        TypeError: ``verify`` is not a bool.

    Example:
        >>> import tempfile, torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 4               # 4 features: the rows
        >>> images = torch.rand(10, 1, 4, 4)
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = torchlime.dataset.explain_dataset(model, images, out, modality=feats,
        ...             call=torchlime.Call(n_samples=32), shard_size=4, progress=False)
        ...     res = load_results(out)
        ...     part = res[2:6]                                           # reads shards 0 and 1 only
        ...     print(len(res), res.complete, part.index.tolist(), part.coef.shape)
        10 True [2, 3, 4, 5] torch.Size([4, 1, 4])
    """
    if not isinstance(verify, bool):
        raise TypeError(f"`verify` must be a bool, got {describe(verify)}")
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"`out` must be a folder path (a str or a Path), got {describe(out)}")
    info = read_index(Path(out))
    if info["format"] == FIRST:
        warnings.warn(
            f"{Path(out)} was written in format {info['format']!r}, which has no checksums: its shards are read "
            f"unverified",
            RuntimeWarning,
            stacklevel=2,
        )
    found = collect(
        Path(out),
        info["fingerprint"],
        info["shard_size"],
        info.get("n_inputs"),
        verify=verify,
        shard_format=READABLE[info["format"]],
        listed=info.get("shards", []),
    )
    return LazyResults(out, info, list(found.values()))  # the files are the proof; the index may lag
