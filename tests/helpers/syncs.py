"""Counting host synchronisations: the operations that make the host wait for the device on CUDA.

A ``TorchDispatchMode`` counts scalar reads, ``nonzero``, ``unique``, ``bincount``, ``equal``, boolean
indexing and copies to the host; ``tolist`` / ``numpy`` / ``cpu`` / ``item`` calls are counted at the
Python level; tensors made from Python data (``aten.lift_fresh``) are counted apart as uploads, each
named by the source line that made it (``torchlime/_util/upload.py`` for the uploads that do not wait on CUDA).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
SYNCING = {
    aten._local_scalar_dense.default,
    aten.is_nonzero.default,
    aten.nonzero.default,
    aten.equal.default,
    aten.masked_select.default,
    aten.bincount.default,
    aten._unique2.default,
    aten.unique_dim.default,
    aten.unique_consecutive.default,
    aten._unique.default,
    aten.repeat_interleave.Tensor,
}


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _source() -> str:
    """``file:line`` of the innermost caller outside torch and this module (repository-relative, or
    from the installed package's folder on)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        inside = f"{os.sep}torch{os.sep}" in name or name == __file__ or name.endswith("contextlib.py")
        if not inside:
            short = os.path.relpath(name, _ROOT) if name.startswith(_ROOT) else name.split("site-packages" + os.sep)[-1]
            return f"{short}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


class SyncCounter(TorchDispatchMode):
    """Counts the dispatched operations that synchronise the host with a CUDA device."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0  # > 0 inside a call counted at the Python level (its own copy is not counted again)
        self.ops: list[str] = []
        self.uploads: list[str] = []  # tensors made from Python data: host-to-device copies on CUDA

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.inside:
            pass
        elif func is aten.lift_fresh.default:
            self.uploads.append(f"tensor from host data at {_source()}")
        elif func in SYNCING:
            self.ops.append(str(func))
        elif func is aten.index.Tensor and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or [])
        ):
            self.ops.append("index with a bool mask")
        elif (
            func is aten._to_copy.default
            and kwargs.get("device") is not None
            and torch.device(kwargs["device"]).type == "cpu"
            and args[0].device.type != "cpu"
        ):
            self.ops.append("copy to the host")
        return func(*args, **kwargs)


@contextlib.contextmanager
def count_syncs(uploads: Optional[list] = None) -> Iterator[list[str]]:
    """Yields the list of synchronising operations seen inside the block; the tensors made from
    Python data are appended to ``uploads`` when it is given."""
    counter = SyncCounter()
    if uploads is not None:
        counter.uploads = uploads
    patched = {}
    for name in ("tolist", "numpy", "item", "cpu"):
        original = getattr(torch.Tensor, name)

        def wrapper(self, *a, _name=name, _original=original, **k):
            # one sync each: on CUDA tolist / numpy / item / cpu copy to the host inside, counted here only
            if not counter.inside:
                counter.ops.append(f"Tensor.{_name}")
            counter.inside += 1
            try:
                return _original(self, *a, **k)
            finally:
                counter.inside -= 1

        patched[name] = original
        setattr(torch.Tensor, name, wrapper)
    try:
        with counter:
            yield counter.ops
    finally:
        for name, original in patched.items():
            setattr(torch.Tensor, name, original)
