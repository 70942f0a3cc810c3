"""Which process does what: rank, world size, device, barriers and shared errors.

Under ``torchrun`` (``torch.distributed`` initialised, any backend) every process is one
rank: shard ``k`` belongs to rank ``k % world_size``, each rank explains its shards on its
own device (``cuda:LOCAL_RANK`` when CUDA is available, else the CPU), and ranks meet at
barriers only when the run opens (rank 0 checks or writes ``index.json``) and when it ends
(rank 0 writes the final index). When ``WORLD_SIZE`` > 1 is set but no process group is
initialised, a gloo group is created for these meetings and destroyed at the end.
Errors raised on one rank at a meeting are raised on every rank, so none waits forever.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, TypeVar, Union

import torch
import torch.distributed as dist

M = TypeVar("M")


@dataclass
class Context:
    """One process's place in the run.

    Attributes:
        rank: this process's rank (0 without torch.distributed).
        world: the number of ranks.
        device: where this rank explains.
        owns_group: the process group was created here.
    """

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")
    owns_group: bool = False

    def owns(self, shard: int) -> bool:
        """Shard ``shard`` belongs to this rank (the fixed rule ``shard % world == rank``)."""
        return shard % self.world == self.rank

    def barrier(self) -> None:
        """Wait for every rank (no-op for a single process)."""
        if self.world > 1:
            if dist.get_backend() == "nccl" and self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index or 0])
            else:
                dist.barrier()

    def share(self, value: str) -> str:
        """Rank 0's ``value`` on every rank (a collective call; a single process keeps its own)."""
        if self.world == 1:
            return value
        box: list[object] = [value]
        dist.broadcast_object_list(box, src=0)
        return str(box[0])

    def raise_together(self, error: Optional[BaseException]) -> None:
        """Raise ``error`` on this rank, and on every rank when any rank had one (a collective call)."""
        if self.world == 1:
            if error is not None:
                raise error
            return
        gathered: list[Optional[str]] = [None] * self.world
        dist.all_gather_object(gathered, None if error is None else f"{type(error).__name__}: {error}")
        if error is not None:
            raise error
        for rank, message in enumerate(gathered):
            if message is not None:
                raise RuntimeError(f"explain_dataset failed on rank {rank}: {message}")

    def close(self) -> None:
        """Destroy the process group if this module created it."""
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
            self.owns_group = False


def model_device(model: object) -> torch.device:
    """The device of a module's first parameter or buffer; the CPU for functions and empty modules."""
    if isinstance(model, torch.nn.Module):
        for param in model.parameters():
            return param.device
        for buf in model.buffers():
            return buf.device
    return torch.device("cpu")


def _device(device: Union[str, torch.device]) -> torch.device:
    """``device`` checked by name: a device torch knows, and CUDA only where it is available."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"`device` must be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"`device` is {device!r} but CUDA is not available here (torch {torch.__version__})")
    return dev


def context(model: object, device: Union[None, str, torch.device]) -> Context:
    """The rank, world size and device of this process (see the module docstring).

    Args:
        model: the explained model (its device is the default of a single process).
        device: an explicit device, or None: ``cuda:LOCAL_RANK`` under torch.distributed with
            CUDA available, else the model's device.
    """
    owns = False
    if dist.is_available() and not dist.is_initialized() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group(backend="gloo")
        owns = True
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    if device is not None:
        dev = _device(device)
    elif world > 1 and torch.cuda.is_available():
        local = int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count()))
        dev = torch.device("cuda", local)
    else:
        dev = model_device(model)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    if world > 1 and dev.type == "cuda":
        torch.cuda.set_device(dev)  # collectives of an nccl group use the current device
    return Context(rank, world, dev, owns)


def place(model: M, device: torch.device) -> M:
    """Move an ``nn.Module`` to ``device`` (in place, as ``Module.to`` does) if it is elsewhere."""
    if isinstance(model, torch.nn.Module) and model_device(model) != device:
        model.to(device)
    return model
