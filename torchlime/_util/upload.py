"""Host data onto the device without making the host wait for it.

``torch.tensor(data, device="cuda")`` copies from pageable memory with a synchronous copy: the host
waits until every kernel queued before it has run (a stream synchronisation). Made mid-call, after the
model's chunk was queued, such a copy holds the host until the chunk is done, and the launches that
follow run with the device idle. ``upload`` stages the data in pinned memory (torch's caching host
allocator, which keeps the block until the copy is done) and queues an asynchronous copy: ordered on the
current stream like any kernel, with no wait.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch

__all__ = ["keeping_hosts", "upload"]

_LOCAL = threading.local()


@contextlib.contextmanager
def keeping_hosts(into: list[Any]) -> Iterator[None]:
    """Append the pinned host copy of every ``upload`` made in this thread inside the context to ``into``.

    A CUDA graph captured around an upload copies from that host memory at every replay: whoever keeps
    the graph keeps the copies (the same numbers each replay), so the memory is never handed out again.

    Args:
        into: the list that keeps them.

    Yields:
        Nothing.
    """
    old = getattr(_LOCAL, "keep", None)
    _LOCAL.keep = into
    try:
        yield
    finally:
        _LOCAL.keep = old


def upload(data: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.as_tensor(data, dtype=dtype, device=device)`` without a host synchronisation on CUDA.

    Args:
        data: numbers, nested sequences of numbers, or a tensor (one already off the CPU is only cast).
        dtype: the result's dtype.
        device: where the result goes.

    Returns:
        The tensor. Off the CPU always a new one; on the CPU ``as_tensor``'s result, which may be
        ``data`` itself or share its memory (a NumPy array of that dtype).

    Example:
        >>> upload([1, 2, 3], torch.long, torch.device("cpu"))
        tensor([1, 2, 3])
    """
    device = torch.device(device)
    if isinstance(data, torch.Tensor) and data.device.type != "cpu":
        return data.to(device=device, dtype=dtype)
    host = torch.as_tensor(data, dtype=dtype)
    if device.type != "cuda":
        return host.to(device)
    pinned = host.pin_memory()
    keep = getattr(_LOCAL, "keep", None)
    if keep is not None:
        keep.append(pinned)
    return pinned.to(device, non_blocking=True)
