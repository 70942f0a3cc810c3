"""Host data onto the device without making the host wait for it.

``torch.tensor(data, device="cuda")`` copies from pageable memory with a synchronous copy: the host
waits until every kernel queued before it has run (a stream synchronisation). Made mid-call, after the
model's chunk was queued, such a copy holds the host until the chunk is done, and the launches that
follow run with the device idle. ``upload`` stages the data in pinned memory (torch's caching host
allocator, which keeps the block until the copy is done) and queues an asynchronous copy: ordered on the
current stream like any kernel, with no wait.
"""

from __future__ import annotations

from typing import Any

import torch

from torchlime._util.keep import keep

__all__ = ["upload"]


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
    keep(pinned)  # a CUDA graph captured around this copy reads the pinned memory at every replay
    return pinned.to(device, non_blocking=True)
