"""The result folder of ``explain_dataset``: shard files and ``index.json``, written atomically.

Layout of ``out/``:

* ``shard-000000.safetensors``, ``shard-000001.safetensors``, ...: shard ``k`` holds the inputs
  with global index ``k * shard_size`` to ``min(N, (k + 1) * shard_size) - 1`` (the last shard
  fewer), as safetensors tensors ``index`` long (n,), ``coef`` (n, T, F), ``intercept``,
  ``score``, ``local_pred`` (n, T), ``target`` long (n, T), ``n_features`` long (n,) (F_b of
  each input: coefficients beyond it are 0 padding up to the shard's F), ``samples_used`` long
  (n,), and, when there are some, ``label`` (n, ...) (the data's labels) and ``coef_std``
  (n, T, F); the file's metadata names its format, shard, range and the run's fingerprint.
* ``index.json``: ``format``, ``arguments`` (plain-data description of the call: model,
  explain_fn, explain_kwargs, the seed, shard_size), ``fingerprint`` (their SHA-256),
  ``n_inputs`` (N; null while unknown), ``first_input`` (the SHA-256 of input 0, checked when a
  run resumes; null until known), ``n_shards``, ``complete``, ``environment`` (torch,
  torchlime, safetensors and Python versions, device type, world size) and ``shards``: one entry
  per finished shard (``shard``, ``file``, ``start``, ``stop``, ``n_features_max``, ``n_targets``).

Every file is written to a hidden temporary file in the folder, flushed to disk, then renamed
(``os.replace``), so a reader or a resumed run sees a whole file or none. A shard file is the
proof that the shard is finished: the index lists what the last writer knew, and a resumed run
or ``load_results`` adopts shard files with the run's fingerprint that the index misses.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import safetensors
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from torchlime.dataset._describe import differences

FORMAT = "torchlime.dataset/1"
SHARD_FORMAT = "torchlime.dataset.shard/1"
INDEX = "index.json"
REQUIRED = ("index", "coef", "intercept", "score", "local_pred", "target", "n_features")
OPTIONAL = ("samples_used", "label", "coef_std")
#: test hook: "before_rename:K" or "before_index:K" makes the writer of shard K touch the file named by
#: TORCHLIME_DATASET_HOOK_FILE and sleep there (so a test can kill it at that point)
HOOK_ENV, HOOK_FILE_ENV = "TORCHLIME_DATASET_HOOK", "TORCHLIME_DATASET_HOOK_FILE"
_SHARD = re.compile(r"^shard-(\d{6,})\.safetensors$")
_TMP = re.compile(r"^\.shard-(\d{6,})\.safetensors\.tmp$")


def shard_name(k: int) -> str:
    """File name of shard ``k``."""
    return f"shard-{k:06d}.safetensors"


def shard_range(k: int, shard_size: int, n_inputs: Optional[int]) -> tuple[int, int]:
    """(start, stop) global indices of shard ``k`` (stop exclusive; unknown N: a full shard)."""
    start = k * shard_size
    return start, start + shard_size if n_inputs is None else min(n_inputs, start + shard_size)


def hook(point: str, shard: int) -> None:
    """Test hook (see ``HOOK_ENV``): signal, then sleep, at ``point`` of writing ``shard``."""
    if os.environ.get(HOOK_ENV) == f"{point}:{shard}":
        marker = os.environ.get(HOOK_FILE_ENV)
        if marker:
            Path(marker).write_text(point)
        time.sleep(3600)


def _fsync(path: Path) -> None:
    """Flush a file (or a folder's entries) to disk; folders cannot be opened or synced on every platform."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_atomic(path: Path, write: Callable[[Path], None], point: str = "", shard: int = -1) -> None:
    """Write ``path`` through a hidden temporary file in its folder, synced, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    write(tmp)
    _fsync(tmp)
    if point:
        hook(point, shard)
    os.replace(tmp, path)
    _fsync(path.parent)


def environment(device: torch.device, world: int) -> dict[str, Any]:
    """Versions and placement of the run (recorded; a resumed run that differs is warned)."""
    lime = sys.modules.get("torchlime")
    return {
        "torch": torch.__version__,
        "torchlime": getattr(lime, "__version__", "unknown"),
        "safetensors": safetensors.__version__,
        "python": platform.python_version(),
        "device": device.type,
        "world_size": world,
    }


def read_index(out: Path) -> dict[str, Any]:
    """``index.json`` of ``out``.

    Raises:
        FileNotFoundError: no index in ``out``. ValueError: an index of another format.
    """
    path = Path(out) / INDEX
    if not path.is_file():
        raise FileNotFoundError(
            f"`out` must be a folder written by explain_dataset (with {INDEX}), got {str(out)!r} without one"
        )
    info = json.loads(path.read_text())
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        found = info.get("format") if isinstance(info, dict) else type(info).__name__
        raise ValueError(f"`out` must hold an index of format {FORMAT!r}, got {found!r} in {path}")
    return info


def shard_entry(path: Path) -> Optional[dict[str, Any]]:
    """The index entry of a shard file, read from its header (no tensor is loaded); None if unreadable."""
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            coef = f.get_slice("coef").get_shape()
    except Exception:  # noqa: BLE001 - a damaged file is treated as missing (and rewritten)
        return None
    if meta.get("format") != SHARD_FORMAT:
        return None
    return {
        "shard": int(meta["shard"]),
        "file": path.name,
        "start": int(meta["start"]),
        "stop": int(meta["stop"]),
        "n_features_max": int(coef[2]),
        "n_targets": int(coef[1]),
        "fingerprint": meta.get("fingerprint"),
    }


def collect(
    out: Path, fingerprint: str, shard_size: int, n_inputs: Optional[int], owned: Callable[[int], bool] = lambda k: True
) -> dict[int, dict[str, Any]]:
    """Finished shards of the run ``fingerprint`` in ``out`` (those ``owned``), by shard number.

    Raises:
        ValueError: a shard file of another run, or with the wrong range, is in the folder.
    """
    found = {}
    for name in sorted(os.listdir(out)):
        m = _SHARD.match(name)
        if not m or not owned(int(m.group(1))):
            continue
        entry = shard_entry(Path(out) / name)
        if entry is None:
            warnings.warn(
                f"unreadable shard file {Path(out) / name}: it will be computed again", RuntimeWarning, stacklevel=3
            )
            continue
        k = int(m.group(1))
        start, stop = shard_range(k, shard_size, n_inputs)
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
    """Remove temporary shard files left by a killed writer (of the shards ``owned`` only)."""
    for name in os.listdir(out):
        m = _TMP.match(name)
        if m and owned(int(m.group(1))):
            os.remove(Path(out) / name)


class Store:
    """Writes one run's folder (see the module docstring).

    Args:
        out: the folder.
        arguments: the run's plain-data arguments.
        fingerprint: their hash.
        shard_size: inputs per shard.
        n_inputs: N, or None while unknown.
        env: ``environment()``.
    """

    def __init__(
        self,
        out: Path,
        arguments: dict[str, Any],
        fingerprint: str,
        shard_size: int,
        n_inputs: Optional[int],
        env: dict[str, Any],
    ) -> None:
        self.out, self.arguments, self.fingerprint = Path(out), arguments, fingerprint
        self.shard_size, self.n_inputs, self.env = shard_size, n_inputs, env
        self.entries: dict[int, dict[str, Any]] = {}
        self.complete = False
        self.first_input: Optional[str] = None

    def check_first(self, given: Optional[str], stored: Optional[str] = None) -> None:
        """Compare the fingerprint of the data's input 0 with the run's.

        The run's is ``stored``, else the one known; the given one is adopted when the run has none yet.

        Raises:
            ValueError: the data set is not the one the folder's shards were computed from.
        """
        stored = stored if stored is not None else self.first_input
        if given is not None and stored is not None and given != stored:
            raise ValueError(
                f"`data` must be the data set of the run stored in `out` {str(self.out)!r}: its first "
                f"input differs from that run's (resuming on other data would mix results; a data set "
                f"with random transforms gives other inputs on every read); choose another folder"
            )
        self.first_input = stored if stored is not None else given

    def open(self, first_input: Optional[str] = None) -> None:
        """Create the folder and its index, or check that the existing index is of the same run.

        Args:
            first_input: the fingerprint of the data's input 0 (None: not known before reading).

        Raises:
            ValueError: ``out`` holds results of other arguments, or of a data set of another
                length or another first input.
        """
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"`out` must be a folder, got the file {str(self.out)!r}")
        self.out.mkdir(parents=True, exist_ok=True)
        if not (self.out / INDEX).is_file():
            self.first_input = first_input
            self.write_index()
            return
        info = read_index(self.out)
        diffs = differences(info["arguments"], self.arguments)
        if diffs:
            raise ValueError(
                f"`out` {str(self.out)!r} holds explanations made with other arguments "
                f"({'; '.join(diffs)}); call with the stored arguments to resume, or choose another "
                f"folder"
            )
        stored = info.get("n_inputs")
        if stored is not None and self.n_inputs is not None and stored != self.n_inputs:
            raise ValueError(
                f"`data` must hold the {stored} inputs of the run stored in `out` {str(self.out)!r}, "
                f"got {self.n_inputs}"
            )
        if self.n_inputs is None:
            self.n_inputs = stored
        self.check_first(first_input, info.get("first_input"))
        old = {k: v for k, v in info.get("environment", {}).items() if k in ("torch", "torchlime", "device")}
        new = {k: self.env[k] for k in old}
        if old != new:
            warnings.warn(
                f"resuming {str(self.out)!r}, written with {old}, with {new}: the new shards may differ "
                f"from the old ones in the last bits",
                RuntimeWarning,
                stacklevel=3,
            )
        self._listed(info)

    def _listed(self, info: dict[str, Any]) -> None:
        """Take the index's shard list; the run is complete if it says so and every listed file is there."""
        self.entries = {int(e["shard"]): e for e in info.get("shards", [])}
        self.complete = (
            bool(info.get("complete"))
            and self.n_shards is not None
            and len(self.entries) == self.n_shards
            and all((self.out / e["file"]).is_file() for e in self.entries.values())
        )

    def follow(self) -> None:
        """Read what rank 0's ``open`` settled (N, completeness) from the index (the other ranks)."""
        info = read_index(self.out)
        if self.n_inputs is None:
            self.n_inputs = info.get("n_inputs")
        self.first_input = info.get("first_input")
        self._listed(info)

    @property
    def n_shards(self) -> Optional[int]:
        """Number of shards (None while N is unknown)."""
        return None if self.n_inputs is None else -(-self.n_inputs // self.shard_size)

    def write_index(self) -> None:
        """Write ``index.json`` from ``entries`` (atomically)."""
        info = {
            "format": FORMAT,
            "arguments": self.arguments,
            "fingerprint": self.fingerprint,
            "n_inputs": self.n_inputs,
            "first_input": self.first_input,
            "shard_size": self.shard_size,
            "n_shards": self.n_shards,
            "complete": self.complete,
            "environment": self.env,
            "shards": [self.entries[k] for k in sorted(self.entries)],
        }
        text = json.dumps(info, indent=1)

        def write(path: Path) -> None:
            path.write_text(text)

        replace_atomic(self.out / INDEX, write)

    def write_shard(self, k: int, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
        """Write shard ``k`` (atomically) and return its index entry.

        Args:
            k: the shard's number.
            tensors: the fields of the module docstring, contiguous CPU tensors of n rows each: ``index``
                (n,), ``coef`` (n, T, F), ... (shape (n, ...)).
        """
        index = tensors["index"]
        start, stop = int(index[0]), int(index[-1]) + 1
        meta = {
            "format": SHARD_FORMAT,
            "shard": str(k),
            "start": str(start),
            "stop": str(stop),
            "fingerprint": self.fingerprint,
        }
        replace_atomic(
            self.out / shard_name(k), lambda p: save_file(tensors, str(p), metadata=meta), "before_rename", k
        )
        coef = tensors["coef"]
        entry = {
            "shard": k,
            "file": shard_name(k),
            "start": start,
            "stop": stop,
            "n_features_max": int(coef.shape[2]),
            "n_targets": int(coef.shape[1]),
        }
        self.entries[k] = entry
        return entry
