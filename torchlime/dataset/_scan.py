"""Reading a result folder's files back: the index and the shard files, verified (``_integrity``).

``read_index`` checks the index's format and checksum; ``collect`` finds the finished shards of a run,
verifying each file and leaving out (with a warning naming it) those that are damaged;
``clean_temporary`` removes the temporary files of dead writers.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path
from typing import Callable, Mapping, Optional, TypedDict, Union, cast

import torch

from torchlime.dataset._integrity import DIGEST, index_digest, read_header
from torchlime.dataset._lock import tmp_is_orphan

FORMAT = "torchlime.dataset/3"
SHARD_FORMAT = "torchlime.dataset.shard/3"
#: the first format: no checksums (read unverified, never resumed)
FIRST = "torchlime.dataset/1"
#: the second format: checksums, no feature maps or inputs (read; a resumed run goes on in it)
NO_MAPS = "torchlime.dataset/2"
#: formats this version reads, by index format: the shard format that goes with it
READABLE = {FIRST: "torchlime.dataset.shard/1", NO_MAPS: "torchlime.dataset.shard/2", FORMAT: SHARD_FORMAT}
INDEX = "index.json"
REQUIRED = ("index", "coef", "intercept", "score", "local_pred", "target", "n_features")
#: fields of the third format on: the feature maps (``features``) and, when asked, the inputs (``inputs``)
MAPS = ("features", "inputs")
OPTIONAL = ("samples_used", "label", "coef_std", "target_valid", *MAPS)
#: test hook: "before_rename:K" or "before_index:K" makes the writer of shard K touch the file named by
#: TORCHLIME_DATASET_HOOK_FILE and sleep there (so a test can kill it at that point)
HOOK_ENV, HOOK_FILE_ENV = "TORCHLIME_DATASET_HOOK", "TORCHLIME_DATASET_HOOK_FILE"
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
PER_TARGET = {"coef": 0.0, "coef_std": 0.0, "intercept": 0.0, "score": float("nan"), "local_pred": 0.0, "target": -1}
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
    """``index.json`` of ``out``, its checksum verified.

    Raises:
        FileNotFoundError: no index in ``out``. ValueError: an index of another format.
        DamagedIndexError: an index that cannot be parsed or whose checksum does not hold.
    """
    path = Path(out) / INDEX
    if not path.is_file():
        raise FileNotFoundError(
            f"`out` must be a folder written by explain_dataset (with {INDEX}), got {str(out)!r} without one"
        )
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise DamagedIndexError(f"{path} is damaged (unreadable: {err}); {_REBUILD}") from None
    if not isinstance(info, dict) or info.get("format") not in READABLE:
        found = info.get("format") if isinstance(info, dict) else type(info).__name__
        newer = isinstance(found, str) and found.startswith("torchlime.dataset/")
        hint = "; it was written by a newer torchlime: upgrade torchlime to read it" if newer else ""
        raise ValueError(
            f"`out` must hold an index of format {FORMAT!r} (or of the earlier {NO_MAPS!r}, {FIRST!r}), got "
            f"{found!r} in {path}{hint}"
        )
    if info["format"] != FIRST and info.get(DIGEST) != index_digest(info):
        raise DamagedIndexError(f"{path} is damaged (checksum mismatch); {_REBUILD}")
    return cast(IndexInfo, info)  # an index of a readable format (its checksum verified)


_REBUILD = "run explain_dataset again with the same arguments to rebuild it (verified shards are kept)"


def shard_entry(path: Path, verify: bool = True, shard_format: str = SHARD_FORMAT) -> tuple[Optional[_Scanned], str]:
    """The index entry of a shard file, read from its header; the whole file is hashed when ``verify``.

    Returns:
        ``(entry, "")``, or ``(None, reason)`` for a damaged file or one of another format.
    """
    status, header, detail = read_header(path, verify)
    if status == "damaged":
        return None, detail
    meta = header.get("__metadata__") or {}
    if meta.get("format") != shard_format:
        return None, f"format {meta.get('format')!r} where {shard_format!r} is expected"
    try:
        coef = header["coef"]["shape"]
        entry: _Scanned = {
            "shard": int(meta["shard"]),
            "file": path.name,
            "start": int(meta["start"]),
            "stop": int(meta["stop"]),
            "n_features_max": int(coef[2]),
            "n_targets": int(coef[1]),
            DIGEST: meta.get(DIGEST),
            "fingerprint": meta.get("fingerprint"),
        }
    except (KeyError, TypeError, ValueError, IndexError) as err:
        return None, f"unreadable header ({err!r})"
    return entry, ""


def collect(
    out: Path,
    fingerprint: str,
    shard_size: int,
    n_inputs: Optional[int],
    owned: Callable[[int], bool] = lambda k: True,
    verify: bool = True,
    shard_format: str = SHARD_FORMAT,
) -> dict[int, ShardEntry]:
    """Finished shards of the run ``fingerprint`` in ``out`` (those ``owned``), by shard number.

    A damaged shard file (unreadable, truncated, checksum mismatch) is left out with a warning naming
    it, so that a rerun computes its rows again.

    Raises:
        ValueError: a shard file of another run, or with the wrong range, is in the folder.
    """
    found: dict[int, ShardEntry] = {}
    for name in sorted(os.listdir(out)):
        m = SHARD_FILE.match(name)
        if not m or not owned(int(m.group(1))):
            continue
        k = int(m.group(1))
        start, stop = shard_range(k, shard_size, n_inputs)
        entry, problem = shard_entry(Path(out) / name, verify, shard_format)
        if entry is None:
            warnings.warn(
                f"shard file {Path(out) / name} is damaged ({problem}): its inputs {start}..{stop - 1} are left "
                f"out (complete=False); running explain_dataset again with the same arguments computes them again",
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


def clean_temporary(out: Path, owned: Callable[[int], bool]) -> None:
    """Remove temporary files left by dead writers of this host (of the shards ``owned``, and the index's).

    A live writer's temporary files, and those of writers on other hosts, are never removed.
    """
    for name in os.listdir(out):
        m = TMP_FILE.match(name)
        if m and (m.group(2) is None or owned(int(m.group(2)))) and tmp_is_orphan(name):
            try:
                os.remove(Path(out) / name)
            except FileNotFoundError:
                pass
