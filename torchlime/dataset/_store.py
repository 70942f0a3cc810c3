"""The result folder of ``explain_dataset``: shard files and ``index.json``, checksummed and written atomically.

Layout of ``out/``:

* ``shard-000000.safetensors``, ``shard-000001.safetensors``, ...: shard ``k`` holds the inputs
  with global index ``k * shard_size`` to ``min(N, (k + 1) * shard_size) - 1`` (the last shard
  fewer), as safetensors tensors ``index`` long (n,), ``coef`` (n, T, F), ``intercept``,
  ``score``, ``local_pred`` (n, T), ``target`` long (n, T), ``n_features`` long (n,) (F_b of
  each input: coefficients beyond it are 0 padding up to the shard's F), ``samples_used`` long
  (n,), and, when there are some, ``label`` (n, ...) (the data's labels), ``coef_std``
  (n, T, F), ``coef_se`` (n, T, F) (``Explanation.coef_se`` of the other surrogates; fourth format on)
  and ``target_valid`` bool (n, T); ``features`` (n, *fshape): each input's feature map
  (``Explanation.features``, ids -1..F_b-1, broadcast dims kept at size 1, e.g. (n, 1, H, W) for
  images) in the smallest signed integer dtype that holds the shard's ids (int8 up to 127 features,
  int16 up to 32767, else int32; read back as long), unless ``keep`` leaves out "features";
  ``inputs`` (n, ...): the inputs as the data gave them (dtype and values unchanged), when ``keep``
  names "inputs". The file's metadata names its format, shard, range, the run's fingerprint, the shape
  of one input (``input_shape``, JSON) and the file's ``sha256`` (``_integrity``), which covers every
  tensor.
* ``index.json``: ``format`` (``torchlime.dataset/4``; the third format, the same without ``coef_se``,
  and the second, also without feature maps and inputs, are read and resumed in their format; the first
  format, without checksums, is read unverified), ``arguments``
  (plain-data description of the call: the model, the ``explainer``, ``modality`` and ``call``
  settings that differ from the defaults, the seed, shard_size, and ``keep_features`` /
  ``keep_inputs`` when ``keep`` differs from the default; a run of torchlime 0.1 recorded
  ``explain_fn`` and ``explain_kwargs`` instead: it is read, not resumed, ``_old_runs``),
  ``fingerprint`` (their SHA-256), ``n_inputs`` (N; null while unknown), ``first_input`` (the SHA-256
  of input 0, checked when a run resumes; null until known), ``n_shards``, ``complete``,
  ``environment`` (torch, torchlime, safetensors and Python versions, device type, world size),
  ``shards``: one entry per finished shard (``shard``, ``file``, ``start``, ``stop``,
  ``n_features_max``, ``n_targets``, ``sha256``), and ``sha256``, the digest of the rest.
* ``.lock`` while a run writes the folder (``_lock``).

Every file is written to a hidden temporary file in the folder named with its writer
(``.NAME.HOST.PID.tmp``, created with ``O_EXCL | O_NOFOLLOW``: a link planted under that name is
removed, never followed), flushed to disk (``fsync``), then renamed (``os.replace``, relative to the
folder's descriptor) and the folder synced, so a reader or a resumed run sees a whole file or none,
and a failed write removes its own temporary file. A shard file whose checksum holds is the proof that the shard
is finished: the index lists what the last writer knew, and a resumed run or ``load_results``
adopts verified shard files with the run's fingerprint that the index misses, and leaves out
(with a warning naming the file) those that are damaged, so one rerun computes them again.
"""

from __future__ import annotations

import json
import platform
import sys
import warnings
from pathlib import Path
from typing import Mapping, Optional, Union

import safetensors
import torch

from torchlime._util.files import Folder
from torchlime.dataset._describe import differences
from torchlime.dataset._integrity import DIGEST, index_digest, shard_bytes
from torchlime.dataset._lock import writer_tag
from torchlime.dataset._old_runs import is_old, refusal
from torchlime.dataset._scan import (
    FIRST,
    FORMAT,
    INDEX,
    MAPS,
    NO_SE,
    READABLE,
    SE,
    DamagedIndexError,
    IndexInfo,
    ShardEntry,
    collect,
    read_index,
    shard_name,
)


def checkpoint(point: str, shard: int) -> None:
    """Where a writer may be stopped: ``before_rename`` of a shard file, ``before_index`` after it; a no-op.

    Tests replace this function (``_store.checkpoint = ...``) to stop a writer at that point; nothing
    here reads the environment.
    """


def replace_atomic(out: Path, name: str, data: bytes, point: str = "", shard: int = -1) -> None:
    """Write entry ``name`` of ``out`` through a temporary file of this writer, synced, then renamed over it.

    The temporary file is ``.NAME.HOST.PID.tmp``, created without following a link (``Folder.write``); a
    failed write (a full disk: ``ENOSPC``, a file too large: ``EFBIG``, ...) removes it and raises, leaving
    ``name`` as it was.
    """
    with Folder.open(out) as folder:
        folder.write(
            name,
            data,
            tmp=f".{name}.{writer_tag()}.tmp",
            before_rename=(lambda: checkpoint(point, shard)) if point else None,
        )


def environment(device: torch.device, world: int) -> dict[str, Union[str, int]]:
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
        arguments: Mapping[str, object],
        fingerprint: str,
        shard_size: int,
        n_inputs: Optional[int],
        env: dict[str, Union[str, int]],
    ) -> None:
        self.out, self.arguments, self.fingerprint = Path(out), arguments, fingerprint
        self.shard_size, self.n_inputs, self.env = shard_size, n_inputs, env
        self.entries: dict[int, ShardEntry] = {}
        self.complete = False
        #: the folder's format: the current one, or the second one of a folder it resumes
        self.format = FORMAT
        self.first_input: Optional[str] = None
        #: shards of the folder verified by ``open`` (None: not read yet)
        self.verified: Optional[dict[int, ShardEntry]] = None

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

        The shard files already there are verified once (``verified``); a run the index calls complete
        is complete only if every shard verifies, else the index is rewritten without the damaged ones.
        A damaged index is rebuilt (with a warning) from the arguments, and the verified shards of the
        same run are adopted.

        Args:
            first_input: the fingerprint of the data's input 0 (None: not known before reading).

        Raises:
            ValueError: ``out`` holds results of other arguments, or of a data set of another
                length or another first input, or of the first format (no checksums).

        Warns:
            RuntimeWarning: ``out`` is of the second format (no feature maps): the run goes on in it.
        """
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"`out` must be a folder, got the file {str(self.out)!r}")
        self.out.mkdir(parents=True, exist_ok=True)
        info: Optional[IndexInfo] = None
        with Folder.open(self.out) as folder:
            present = folder.kind(INDEX) is not None
        if present:
            try:
                info = read_index(self.out)
            except DamagedIndexError as err:
                warnings.warn(f"{err}: rebuilding it", RuntimeWarning, stacklevel=3)
        if info is None:
            self.first_input = first_input
            self.write_index()
            return
        if info["format"] == FIRST:
            raise ValueError(
                f"`out` {str(self.out)!r} was written in format {info['format']!r}, without checksums, by an "
                f"earlier torchlime: read it with load_results, or choose another folder to compute it again"
            )
        self._check_same_run(info, first_input)
        self.format = info["format"]
        if self.format == NO_SE:
            warnings.warn(
                f"resuming {str(self.out)!r}, written in format {self.format!r} by an earlier torchlime, which keeps "
                f"no standard errors: its remaining shards are written in that format too, without coef_se",
                RuntimeWarning,
                stacklevel=3,
            )
        elif self.format != FORMAT:
            warnings.warn(
                f"resuming {str(self.out)!r}, written in format {self.format!r} by an earlier torchlime, which keeps "
                f"no feature maps: its remaining shards are written in that format too, so its explanations cannot "
                f"be drawn without the maps rebuilt (explain into another folder to keep them)",
                RuntimeWarning,
                stacklevel=3,
            )
        self.verified = collect(
            self.out,
            self.fingerprint,
            self.shard_size,
            self.n_inputs,
            shard_format=self.shard_format,
            listed=info.get("shards", []),
        )
        self.entries = self.verified
        self.complete = bool(info.get("complete")) and self.n_shards is not None and len(self.entries) == self.n_shards
        listed = {int(e["shard"]) for e in info.get("shards", [])}
        if bool(info.get("complete")) != self.complete or listed != set(self.entries):
            self.write_index()  # what the files prove, for the other ranks and for readers

    def _check_same_run(self, info: IndexInfo, first_input: Optional[str]) -> None:
        """Refuse an index of other arguments or another data set, or of a 0.1 run; warn about other versions."""
        if is_old(info["arguments"]):
            raise ValueError(refusal(self.out, info["arguments"]))
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
                stacklevel=4,
            )

    def reached(self, point: str, shard: int) -> None:
        """This writer reached ``point`` of writing ``shard`` (``checkpoint``: where tests stop a writer)."""
        checkpoint(point, shard)

    def follow(self) -> None:
        """Read what rank 0's ``open`` settled (N, completeness, verified shards) from the index (the other ranks)."""
        info = read_index(self.out)
        self.format = info["format"]
        if self.n_inputs is None:
            self.n_inputs = info.get("n_inputs")
        self.first_input = info.get("first_input")
        self.entries = {int(e["shard"]): e for e in info.get("shards", [])}
        self.complete = bool(info.get("complete"))

    @property
    def shard_format(self) -> str:
        """The format of the folder's shard files."""
        return READABLE[self.format]

    @property
    def keeps_maps(self) -> bool:
        """The folder's format stores feature maps and inputs (not the second format's)."""
        return self.format in (FORMAT, NO_SE)

    @property
    def n_shards(self) -> Optional[int]:
        """Number of shards (None while N is unknown)."""
        return None if self.n_inputs is None else -(-self.n_inputs // self.shard_size)

    def write_index(self) -> None:
        """Write ``index.json`` from ``entries`` (atomically)."""
        info: IndexInfo = {
            "format": self.format,
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
        info[DIGEST] = index_digest(info)
        replace_atomic(self.out, INDEX, json.dumps(info, indent=1).encode())

    def write_shard(
        self, k: int, tensors: dict[str, torch.Tensor], input_shape: Optional[tuple[int, ...]] = None
    ) -> ShardEntry:
        """Write shard ``k`` (atomically) and return its index entry.

        Args:
            k: the shard's number.
            tensors: the fields of the module docstring, contiguous CPU tensors of n rows each: ``index``
                (n,), ``coef`` (n, T, F), ... (shape (n, ...)); ``features`` and ``inputs`` are left out
                in a folder of the second format.
            input_shape: the shape of one input (recorded in the file's metadata), or None.
        """
        if not self.keeps_maps:
            tensors = {name: t for name, t in tensors.items() if name not in MAPS}
        if self.format != FORMAT:  # the earlier formats keep no standard errors
            tensors = {name: t for name, t in tensors.items() if name not in SE}
        index = tensors["index"]
        start, stop = int(index[0]), int(index[-1]) + 1
        meta = {
            "format": self.shard_format,
            "shard": str(k),
            "start": str(start),
            "stop": str(stop),
            "fingerprint": self.fingerprint,
        }
        if self.keeps_maps and input_shape is not None:
            meta["input_shape"] = json.dumps(list(input_shape))
        data, digest = shard_bytes(tensors, meta)
        replace_atomic(self.out, shard_name(k), data, "before_rename", k)
        coef = tensors["coef"]
        entry: ShardEntry = {
            "shard": k,
            "file": shard_name(k),
            "start": start,
            "stop": stop,
            "n_features_max": int(coef.shape[2]),
            "n_targets": int(coef.shape[1]),
            DIGEST: digest,
        }
        self.entries[k] = entry
        return entry
