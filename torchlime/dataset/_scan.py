"""Reading a result folder's files back: the index and the shard files, verified (``_integrity``).

``read_index`` checks the index's format, checksum and fields; ``collect`` finds the finished shards of
a run, verifying each file and leaving out (with a warning naming it) those that are damaged;
``clean_temporary`` removes the temporary files of dead writers. The folder is untrusted input: every
entry is opened relative to the folder without following a link and checked before anything is
allocated (``_util.files``, ``_shardfile``).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, TypedDict, Union, cast

import torch

from torchlime._util.files import COUNT_LIMIT, Folder, count
from torchlime.dataset._integrity import DIGEST, index_digest, read_header
from torchlime.dataset._lock import tmp_is_orphan
from torchlime.dataset._shardfile import input_shape

FORMAT = "torchlime.dataset/4"
SHARD_FORMAT = "torchlime.dataset.shard/4"
#: the first format: no checksums (read unverified, never resumed)
FIRST = "torchlime.dataset/1"
#: the second format: checksums, no feature maps or inputs (read; a resumed run goes on in it)
NO_MAPS = "torchlime.dataset/2"
#: the third format: feature maps and inputs, no standard errors (read; a resumed run goes on in it)
NO_SE = "torchlime.dataset/3"
#: formats this version reads, by index format: the shard format that goes with it
READABLE = {
    FIRST: "torchlime.dataset.shard/1",
    NO_MAPS: "torchlime.dataset.shard/2",
    NO_SE: "torchlime.dataset.shard/3",
    FORMAT: SHARD_FORMAT,
}
INDEX = "index.json"
REQUIRED = ("index", "coef", "intercept", "score", "local_pred", "target", "n_features")
#: fields of the third format on: the feature maps (``features``) and, when asked, the inputs (``inputs``)
MAPS = ("features", "inputs")
#: fields of the fourth format on: the standard errors (``Explanation.coef_se``, unless ``coef_std`` holds them)
SE = ("coef_se",)
OPTIONAL = ("samples_used", "label", "coef_std", "target_valid", *MAPS, *SE)
#: the most bytes an ``index.json`` may hold
MAX_INDEX = 16 << 20
SHARD_FILE = re.compile(r"^shard-(\d{6,})\.safetensors$")
TMP_FILE = re.compile(r"^\.(shard-(\d{6,})\.safetensors|index\.json)\.(.+\.)?tmp$")


class ShardEntry(TypedDict):
    """A finished shard as ``index.json`` lists it (``shards``), read from its file's header.

    Attributes:
        shard: its number k.
        file: its file name.
        start: the global index of its first input.
        stop: one past the global index of its last input.
        n_features_max: F, its feature dim.
        n_targets: T, its target dim.
        sha256: the digest its header holds (None: a file of the first format).
    """

    shard: int
    file: str
    start: int
    stop: int
    n_features_max: int
    n_targets: int
    sha256: Optional[str]


class _Scanned(ShardEntry, total=False):
    """A shard file's entry with the fingerprint of its run (compared, then dropped, by ``collect``)."""

    fingerprint: Optional[str]


class IndexInfo(TypedDict, total=False):
    """A result folder's ``index.json`` (its fields: see ``_store``); an index of the first format has no ``sha256``."""

    format: str
    arguments: Mapping[str, object]
    fingerprint: str
    n_inputs: Optional[int]
    first_input: Optional[str]
    shard_size: int
    n_shards: Optional[int]
    complete: bool
    environment: dict[str, Union[str, int]]
    shards: list[ShardEntry]
    sha256: str


#: fields with a target dim (dim 1) and the value their padded targets take (structured targets: T varies)
PER_TARGET = {
    "coef": 0.0,
    "coef_std": 0.0,
    "coef_se": 0.0,
    "intercept": 0.0,
    "score": float("nan"),
    "local_pred": 0.0,
    "target": -1,
}
PER_TARGET_FLAGS = {"target_valid": False}


def pad_targets(name: str, t: torch.Tensor, n_targets: int) -> torch.Tensor:
    """Field ``name`` of n rows padded along its target dim (dim 1) to ``n_targets`` targets.

    Padded targets get coefficients 0, score NaN (no fit), ``target`` -1 and ``target_valid`` False.

    Args:
        name: the field.
        t: its (n, T, ...) tensor (fields without a target dim come back as they are).
        n_targets: the targets wanted.

    Returns:
        (n, n_targets, ...).
    """
    fill = {**PER_TARGET, **PER_TARGET_FLAGS}.get(name)
    if fill is None or t.ndim < 2 or t.shape[1] >= n_targets:
        return t
    pad = t.new_full((t.shape[0], n_targets - t.shape[1], *t.shape[2:]), fill)
    return torch.cat((t, pad), 1)


class DamagedIndexError(ValueError):
    """``index.json`` cannot be read or its checksum does not hold."""


def shard_name(k: int) -> str:
    """File name of shard ``k``."""
    return f"shard-{k:06d}.safetensors"


def shard_range(k: int, shard_size: int, n_inputs: Optional[int]) -> tuple[int, int]:
    """(start, stop) global indices of shard ``k`` (stop exclusive; unknown N: a full shard)."""
    start = k * shard_size
    return start, start + shard_size if n_inputs is None else min(n_inputs, start + shard_size)


def read_index(out: Path) -> IndexInfo:
    """``index.json`` of ``out``, its checksum and its fields verified.

    The index is read as untrusted input: a regular file (never through a link), at most 16 MiB, JSON
    nested at most 32 levels, counts that are ints in their ranges (``check_index``).

    Raises:
        FileNotFoundError: no index in ``out``. ValueError: an index of another format.
        DamagedIndexError: an index that cannot be read or parsed, whose checksum does not hold or whose
            fields are out of range.
    """
    path = Path(out) / INDEX
    missing = f"`out` must be a folder written by explain_dataset (with {INDEX}), got {str(out)!r} without one"
    try:
        with Folder.open(out) as folder:
            if folder.kind(INDEX) is None:
                raise FileNotFoundError(missing)
            info = folder.read_json(INDEX, MAX_INDEX)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(missing) from None
    except (OSError, ValueError) as err:
        raise DamagedIndexError(f"{path} is damaged (unreadable: {err}); {_REBUILD}") from None
    if not isinstance(info, dict) or info.get("format") not in READABLE:
        found = info.get("format") if isinstance(info, dict) else type(info).__name__
        newer = isinstance(found, str) and found.startswith("torchlime.dataset/")
        hint = "; it was written by a newer torchlime: upgrade torchlime to read it" if newer else ""
        raise ValueError(
            f"`out` must hold an index of format {FORMAT!r} (or of the earlier {NO_SE!r}, {NO_MAPS!r}, {FIRST!r}), got "
            f"{_shown(found)} in {path}{hint}"
        )
    if info["format"] != FIRST and info.get(DIGEST) != index_digest(info):
        raise DamagedIndexError(f"{path} is damaged (checksum mismatch); {_REBUILD}")
    try:
        check_index(info, path)
    except ValueError as err:
        raise DamagedIndexError(f"{path} is damaged ({err}); {_REBUILD}") from None
    return cast(IndexInfo, info)  # an index of a readable format (its checksum and fields verified)


_REBUILD = "run explain_dataset again with the same arguments to rebuild it (verified shards are kept)"


def shard_entry(
    folder: Folder, name: str, verify: bool = True, shard_format: str = SHARD_FORMAT
) -> tuple[Optional[_Scanned], str]:
    """The index entry of a shard file, read from its header; the whole file is hashed when ``verify``.

    Besides the header's own checks (``_shardfile``), its metadata's ``shard``, ``start`` and ``stop``
    must be counts with start < stop, every tensor must hold stop - start rows, ``coef`` must be
    (n, T, F) and a recorded ``input_shape`` a list of sizes.

    Returns:
        ``(entry, "")``, or ``(None, reason)`` for a damaged file or one of another format.
    """
    status, header, detail = read_header(folder, name, verify)
    if status == "damaged":
        return None, detail
    meta = header.get("__metadata__") or {}
    if meta.get("format") != shard_format:
        return None, f"format {str(meta.get('format'))[:60]!r} where {shard_format!r} is expected"
    try:
        shard, start, stop = (_meta_count(meta, key) for key in ("shard", "start", "stop"))
        if stop <= start:
            raise ValueError(f"stop must be above start, got start {start} and stop {stop}")
        missing = [field for field in REQUIRED if field not in header]
        if missing:
            raise ValueError(f"it must hold the fields {list(REQUIRED)}, got none of {missing}")
        for field, spec in header.items():
            if field != "__metadata__" and (not spec["shape"] or spec["shape"][0] != stop - start):
                raise ValueError(f"{field!r} must hold {stop - start} rows (stop - start), got shape {spec['shape']}")
        coef = header["coef"]["shape"]
        if len(coef) != 3:
            raise ValueError(f"'coef' must be (n, T, F), got shape {coef}")
        input_shape(meta, folder.where(name))
    except ValueError as err:
        return None, f"unreadable header ({err})"
    entry: _Scanned = {
        "shard": shard,
        "file": name,
        "start": start,
        "stop": stop,
        "n_features_max": coef[2],
        "n_targets": coef[1],
        DIGEST: meta.get(DIGEST),
        "fingerprint": meta.get("fingerprint"),
    }
    return entry, ""


def _meta_count(meta: Mapping[str, str], key: str) -> int:
    """The count a shard file's metadata holds under ``key`` (decimal digits), checked."""
    text = meta.get(key)
    if text is None or not re.fullmatch(r"[0-9]{1,10}", text):
        raise ValueError(f"{key} must be a count in decimal digits, got {str(text)[:30]!r}")
    return count(int(text), key)


def collect(
    out: Path,
    fingerprint: str,
    shard_size: int,
    n_inputs: Optional[int],
    owned: Callable[[int], bool] = lambda k: True,
    verify: bool = True,
    shard_format: str = SHARD_FORMAT,
    listed: Sequence[ShardEntry] = (),
) -> dict[int, ShardEntry]:
    """Finished shards of the run ``fingerprint`` in ``out`` (those ``owned``), by shard number.

    A damaged shard file (unreadable, truncated, checksum mismatch, not a regular file: a link is never
    followed, a named pipe never waited on), or one whose rows, features or targets differ from its entry
    in ``listed`` (the index's), is left out with a warning naming it, so that a rerun computes its rows
    again.

    Raises:
        ValueError: a shard file of another run, or with the wrong range, is in the folder.
    """
    found: dict[int, ShardEntry] = {}
    index = {e["shard"]: e for e in listed}
    with Folder.open(out) as folder:
        for name in sorted(folder.names()):
            m = SHARD_FILE.match(name)
            if not m or len(m.group(1)) > 10 or not owned(int(m.group(1))):
                continue
            k = int(m.group(1))
            start, stop = shard_range(k, shard_size, n_inputs)
            entry, problem = shard_entry(folder, name, verify, shard_format) if k < COUNT_LIMIT else (None, "")
            if entry is not None and k in index:
                problem = _differs(entry, index[k])
                entry = None if problem else entry
            if entry is None:
                warnings.warn(
                    f"shard file {Path(out) / name} is damaged ({problem or 'shard number out of range'}): its "
                    f"inputs {start}..{stop - 1} are left out (complete=False); running explain_dataset again "
                    f"with the same arguments computes them again",
                    RuntimeWarning,
                    stacklevel=3,
                )
                continue
            ok = entry.pop("fingerprint") == fingerprint and entry["shard"] == k and entry["start"] == start
            ok = ok and (entry["stop"] == stop if n_inputs is not None else start < entry["stop"] <= stop)
            if not ok:
                raise ValueError(
                    f"`out` holds {Path(out) / name}, written by a run with other arguments or another "
                    f"data set; remove it or choose another folder"
                )
            found[k] = entry
    return found


def _differs(entry: ShardEntry, listed: ShardEntry) -> str:
    """How a shard file's header differs from the index's entry for it (its rows, features, targets), or ""."""
    for key in ("start", "stop", "n_features_max", "n_targets"):
        if entry[key] != listed[key]:
            return f"its header's {key} {entry[key]} differs from index.json's {listed[key]}"
    return ""


def clean_temporary(out: Path, owned: Callable[[int], bool]) -> None:
    """Remove temporary files left by dead writers of this host (of the shards ``owned``, and the index's).

    A live writer's temporary files, and those of writers on other hosts, are never removed; a link is
    removed itself, never followed.
    """
    with Folder.open(out) as folder:
        for name in folder.names():
            m = TMP_FILE.match(name)
            if m and (m.group(2) is None or len(m.group(2)) <= 10 and owned(int(m.group(2)))) and tmp_is_orphan(name):
                folder.remove(name)


def check_index(info: Mapping[str, object], path: Path) -> None:
    """Refuse index fields of the wrong type or out of range, before any sizes or names anything.

    ``shard_size`` in [1, 2**31); ``n_inputs``, ``n_shards`` null or in [0, 2**31) (and ``n_shards`` the
    shards of ``n_inputs``); ``fingerprint`` a string; ``arguments``, ``environment`` objects,
    ``complete`` a bool, ``first_input`` null or a string; every entry of ``shards`` with counts for
    ``shard``, ``start`` < ``stop``, ``n_features_max``, ``n_targets``, in the shard's range, and its file name.

    Raises:
        ValueError: the first field that is not as described, naming it.
    """
    if not isinstance(info.get("fingerprint"), str):
        raise ValueError(f"`fingerprint` must be a string, got {_shown(info.get('fingerprint'))}")
    size = count(info.get("shard_size"), "`shard_size`", 1)
    n = None if info.get("n_inputs") is None else count(info.get("n_inputs"), "`n_inputs`")
    n_shards = None if info.get("n_shards") is None else count(info.get("n_shards"), "`n_shards`")
    if n is not None and n_shards is not None and n_shards != -(-n // size):
        raise ValueError(f"`n_shards` must be {-(-n // size)} ({n} inputs in shards of {size}), got {n_shards}")
    for key, kind, what in (("arguments", dict, "an object"), ("environment", dict, "an object")):
        if key in info and not isinstance(info[key], kind):
            raise ValueError(f"`{key}` must be {what}, got {_shown(info[key])}")
    if "complete" in info and not isinstance(info["complete"], bool):
        raise ValueError(f"`complete` must be a bool, got {_shown(info['complete'])}")
    if info.get("first_input") is not None and not isinstance(info.get("first_input"), str):
        raise ValueError(f"`first_input` must be null or a string, got {_shown(info.get('first_input'))}")
    shards = info.get("shards", [])
    if not isinstance(shards, list):
        raise ValueError(f"`shards` must be a list, got {_shown(shards)}")
    for i, e in enumerate(shards):
        if not isinstance(e, dict):
            raise ValueError(f"`shards[{i}]` must be an object, got {_shown(e)}")
        k, start, stop = (count(e.get(key), f"`shards[{i}].{key}`") for key in ("shard", "start", "stop"))
        count(e.get("n_features_max"), f"`shards[{i}].n_features_max`")
        count(e.get("n_targets"), f"`shards[{i}].n_targets`")
        first, last = shard_range(k, size, n)
        if start != first or not start < stop <= last or e.get("file") != shard_name(k):
            raise ValueError(
                f"`shards[{i}]` must be shard {k}'s entry (file {shard_name(k)!r}, start {first}, stop in "
                f"({first}, {last}]), got file {_shown(e.get('file'))}, start {start}, stop {stop}"
            )
        if e.get(DIGEST) is not None and not isinstance(e.get(DIGEST), str):
            raise ValueError(f"`shards[{i}].sha256` must be null or a string, got {_shown(e.get(DIGEST))}")


def _shown(value: object) -> str:
    """``repr(value)``, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
