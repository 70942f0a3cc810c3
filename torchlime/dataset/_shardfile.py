"""A shard file read from its descriptor, its header checked against the file's real size first.

A shard file is a safetensors file: 8 bytes (little-endian) giving the header's length, the JSON header
(``{name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}``), then the tensor bytes. Read from
a folder that may come from elsewhere, nothing in the header is trusted before it is checked:

* the header's length fits the file (and safetensors' own 100 MB bound), its JSON nesting is bounded;
* every tensor has a known dtype, a shape of ints in ``[0, 2**31)`` and a byte span equal to its shape
  times its dtype's size; the spans follow one another from the end of the header to the end of the file
  (``fstat``), as safetensors writes them;
* the metadata maps strings to strings.

Only then are bytes read: the rows of one tensor (``rows``: a view of the file mapped from its descriptor,
so a slice touches just its rows) or the whole body in chunks for the checksum (``body``). A violation is
a ``ValueError`` naming the file.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from pathlib import Path
from typing import Any, Iterator, NamedTuple, Optional

import torch

from torchlime._util.files import Folder, count, load_json, read_at

#: safetensors' bound on a header's length (bytes)
MAX_HEADER = 100_000_000
#: bytes read at a time when the whole body is hashed
CHUNK = 16 << 20
#: safetensors dtype names -> torch dtypes (those this torch has)
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, attr)
    for name, attr in {
        "BOOL": "bool",
        "U8": "uint8",
        "I8": "int8",
        "I16": "int16",
        "U16": "uint16",
        "I32": "int32",
        "U32": "uint32",
        "I64": "int64",
        "U64": "uint64",
        "F16": "float16",
        "BF16": "bfloat16",
        "F32": "float32",
        "F64": "float64",
        "F8_E4M3": "float8_e4m3fn",
        "F8_E5M2": "float8_e5m2",
    }.items()
    if hasattr(torch, attr)
}
_SIZES = {dtype: torch.empty((), dtype=dtype).element_size() for dtype in DTYPES.values()}


class Spec(NamedTuple):
    """One tensor of a shard file: its dtype, shape and byte span in the body."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    begin: int
    end: int


class ShardFile:
    """The shard file ``name`` of ``folder``, open, its header checked (see the module docstring).

    Attributes:
        where: the file's path (for messages).
        header: the parsed header (for the checksum).
        metadata: its ``__metadata__``.
        tensors: each tensor's ``Spec``, by name.

    Raises:
        ValueError: not a regular file, or a header that does not fit the file. OSError: unreadable.
    """

    def __init__(self, folder: Folder, name: str) -> None:
        self.where = folder.where(name)
        self._map: Optional[mmap.mmap] = None
        self.fd, self.size = folder.open_file(name)
        try:
            self.header, self.metadata, self.tensors, self.offset = _parse(self.fd, self.size, self.where)
        except BaseException:
            os.close(self.fd)
            raise

    def __enter__(self) -> ShardFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file (a mapping stays alive while rows read from it are)."""
        self._map = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def rows(self, name: str, a: int, b: int) -> torch.Tensor:
        """Rows ``a .. b-1`` of tensor ``name`` (dim 0), read from the file alone.

        The rows are a view of the file mapped copy-on-write from its descriptor (``mmap``: pages are read
        when touched, as safetensors reads them; the caller copies what it keeps), or read into memory when
        they do not lie aligned to their dtype in the file.

        Raises:
            ValueError: rows outside the tensor, or a file shorter than its header says (it shrank).
        """
        spec = self.tensors[name]
        n = spec.shape[0] if spec.shape else 0
        if not 0 <= a <= b <= n:
            raise ValueError(f"rows {a}..{b - 1} of {name!r} in {self.where} must lie in its {n} rows")
        size = _SIZES[spec.dtype]
        row = math.prod(spec.shape[1:]) * size
        shape, at = (b - a, *spec.shape[1:]), self.offset + spec.begin + a * row
        if row * (b - a) == 0:
            return torch.empty(shape, dtype=spec.dtype)
        if at % size:
            return torch.frombuffer(read_at(self.fd, at, (b - a) * row, self.where), dtype=spec.dtype).view(shape)
        if self._map is None:
            self._map = mmap.mmap(self.fd, 0, access=mmap.ACCESS_COPY)  # the file's current size
        if at + (b - a) * row > len(self._map):
            raise ValueError(f"{self.where} ends before the rows of {name!r} it should hold (it shrank)")
        return torch.frombuffer(self._map, dtype=spec.dtype, count=(b - a) * row // size, offset=at).view(shape)

    def body(self) -> Iterator[memoryview]:
        """The tensor bytes, in chunks of at most ``CHUNK`` bytes read into one buffer.

        Each chunk is valid until the next one is asked for (memory: one chunk).
        """
        buf = bytearray(min(CHUNK, self.size - self.offset))
        at = self.offset
        while at < self.size:
            n = os.preadv(self.fd, [memoryview(buf)[: self.size - at]], at)
            if n == 0:
                raise ValueError(f"{self.where} ends at byte {at}, before the {self.size} bytes it held when opened")
            yield memoryview(buf)[:n]
            at += n


def input_shape(meta: dict[str, str], where: Path) -> Optional[tuple[int, ...]]:
    """The shape of one input a shard file's metadata records (``input_shape``, JSON), or None.

    Raises:
        ValueError: a recorded shape that is not a list of at most 32 counts.
    """
    recorded = meta.get("input_shape")
    if recorded is None:
        return None
    shape = load_json(recorded.encode(), f"input_shape of {where}")
    if not isinstance(shape, list) or len(shape) > 32:
        raise ValueError(f"input_shape of {where} must be a list of at most 32 sizes, got {recorded[:60]!r}")
    return tuple(count(s, f"input_shape of {where}") for s in shape)


def _parse(fd: int, size: int, where: Path) -> tuple[dict[str, Any], dict[str, str], dict[str, Spec], int]:
    """(header, metadata, tensors, body offset) of the open shard file ``fd`` of ``size`` bytes, checked."""
    if size < 8:
        raise ValueError(f"{where} must be a safetensors file, got {size} bytes: shorter than its header's length")
    (n,) = struct.unpack("<Q", read_at(fd, 0, 8, where))
    if n > min(size - 8, MAX_HEADER):
        raise ValueError(f"{where} declares a header of {n} bytes, which does not fit its {size} bytes")
    header = load_json(bytes(read_at(fd, 8, n, where)), where)
    if not isinstance(header, dict):
        raise ValueError(f"{where} must have a JSON object as header, got {type(header).__name__}")
    meta = header.get("__metadata__") or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError(f"__metadata__ of {where} must map strings to strings")
    tensors = {name: _spec(name, v, where) for name, v in header.items() if name != "__metadata__"}
    at, body = 0, size - 8 - n
    for name, spec in sorted(tensors.items(), key=lambda kv: (kv[1].begin, kv[1].end)):
        if spec.begin != at:
            raise ValueError(f"tensor {name!r} of {where} must start at byte {at} of the data, got {spec.begin}")
        at = spec.end
    if at != body:
        raise ValueError(f"{where} holds tensor data of {body} bytes where the header describes {at}")
    return header, meta, tensors, 8 + n


def _spec(name: str, value: object, where: Path) -> Spec:
    """One tensor entry of a header, checked: known dtype, counts as sizes, a span of its bytes."""
    what = f"tensor {name!r} of {where}"
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be described by an object, got {type(value).__name__}")
    name_of_dtype = value.get("dtype")
    dtype = DTYPES.get(name_of_dtype) if isinstance(name_of_dtype, str) else None
    shape, offsets = value.get("shape"), value.get("data_offsets")
    if dtype is None:
        raise ValueError(f"{what} must have a dtype of {sorted(DTYPES)}, got {str(value.get('dtype'))[:30]!r}")
    if not isinstance(shape, list) or len(shape) > 32:
        raise ValueError(f"{what} must have a shape of at most 32 sizes, got {str(shape)[:60]}")
    if not isinstance(offsets, list) or len(offsets) != 2:
        raise ValueError(f"{what} must have data_offsets [begin, end], got {str(offsets)[:60]}")
    dims = tuple(count(s, f"a size of {what}") for s in shape)
    begin, end = (_offset(o, what) for o in offsets)
    if end - begin != math.prod(dims) * _SIZES[dtype]:
        raise ValueError(
            f"{what} must span its shape {list(dims)} times {_SIZES[dtype]} bytes, got {end - begin} bytes"
        )
    return Spec(dtype, dims, begin, end)


def _offset(value: object, what: str) -> int:
    """A byte offset of a tensor's data, checked to be an int in [0, 2**62)."""
    if isinstance(value, bool) or not isinstance(value, int) or value >= 2**62:
        raise ValueError(f"an offset of {what} must be an int in [0, 2**62), got {str(value)[:30]}")
    return value
