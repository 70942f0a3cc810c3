"""Checksums of a result folder: every shard file and ``index.json`` carry the SHA-256 of their content.

safetensors has no checksum of its own, so a shard whose bytes were flipped (a bad disk, a bad copy)
would read back as valid numbers. A shard file here is a safetensors file whose header metadata holds
``sha256``: the digest of its canonical header (the JSON header with that one key removed, keys sorted)
followed by the tensor bytes, so a change of any byte that carries meaning (a value, a shape, a dtype, an
offset, a metadata field) is caught. ``index.json`` holds ``sha256``: the digest of its own canonical
JSON without that key.

Verifying reads the whole file and hashes it: about the cost of reading it once (SHA-256 runs at roughly
1-2 GB/s on one core, so a folder of 1 GB costs about a second on a warm page cache; see ``docs/datasets.md``).
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any, Final, Literal, Mapping

import torch
from safetensors.torch import save

from torchlime._util.files import Folder
from torchlime.dataset._shardfile import ShardFile

DIGEST: Final = "sha256"
Status = Literal["ok", "damaged", "unverified"]


def _canonical(header: dict[str, Any]) -> bytes:
    """The header's JSON with ``__metadata__.sha256`` removed and keys sorted (what the digest covers)."""
    header = dict(header)
    meta = {k: v for k, v in (header.get("__metadata__") or {}).items() if k != DIGEST}
    header["__metadata__"] = meta
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def _digest(header: dict[str, Any], body: memoryview) -> str:
    """SHA-256 of the canonical header followed by the tensor bytes."""
    h = hashlib.sha256(_canonical(header))
    h.update(body)
    return h.hexdigest()


def _split(data: bytes) -> tuple[dict[str, Any], memoryview]:
    """(header, tensor bytes) of a safetensors file's bytes.

    Raises:
        ValueError: the bytes are not a whole safetensors file.
    """
    if len(data) < 8:
        raise ValueError("shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("header longer than the file")
    header = json.loads(data[8 : 8 + n])
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    body = memoryview(data)[8 + n :]  # no copy
    end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    if end != len(body):
        raise ValueError(f"tensor data of {len(body)} bytes where the header describes {end}")
    return header, body


def shard_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> tuple[bytes, str]:
    """A safetensors file of ``tensors`` whose metadata holds ``metadata`` and the file's ``sha256``.

    Args:
        tensors: contiguous CPU tensors, by name.
        metadata: string metadata (``sha256`` is added).

    Returns:
        ``(the file's bytes, its digest)``.
    """
    header, body = _split(save(tensors, metadata=metadata))
    digest = _digest(header, body)
    header["__metadata__"] = {**(header.get("__metadata__") or {}), DIGEST: digest}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()  # the same bytes every time
    text += b" " * (-len(text) % 8)  # tensor data aligned to 8 bytes, as safetensors writes it
    return b"".join((struct.pack("<Q", len(text)), text, body)), digest


def read_header(folder: Folder, name: str, verify: bool) -> tuple[Status, dict[str, Any], str]:
    """A shard file's header, checked against the file's size and, when ``verify``, the digest it holds.

    The file is opened without following a link and must be a regular file (``_util.files``); its header is
    checked before anything else is read (``_shardfile``).

    Args:
        folder: the result folder.
        name: the shard file's name in it.
        verify: read and hash the whole file, a chunk at a time (else only the header is read; the status
            is "unverified").

    Returns:
        ``(status, header, detail)``: "ok" with the digest as detail; "unverified" (not asked, or a file
        of the first format, which had no digest); "damaged" with the reason (unreadable, truncated,
        altered, not a regular file) and an empty header.
    """
    try:
        with ShardFile(folder, name) as f:
            stored = f.metadata.get(DIGEST)
            if not verify or stored is None:
                return "unverified", f.header, str(stored) if stored else ""
            h = hashlib.sha256(_canonical(f.header))
            for chunk in f.body():
                h.update(chunk)
    except (OSError, ValueError) as err:
        return "damaged", {}, f"unreadable ({err})"
    actual = h.hexdigest()
    if actual != stored:
        return "damaged", {}, f"checksum mismatch (stored {str(stored)[:12]}..., content {actual[:12]}...)"
    return "ok", f.header, actual


def index_digest(info: Mapping[str, object]) -> str:
    """The SHA-256 of an index's canonical JSON without its ``sha256`` field."""
    body = {k: v for k, v in info.items() if k != DIGEST}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
