"""Where ``explain_dataset``'s inputs come from, and the global index of each.

* A map-style data set (a ``torch.utils.data.Dataset``, a tensor, a list: anything with
  ``len`` and ``[i]``; a tuple ``(inputs (N, ...), labels (N, ...), ...)`` of tensors whose
  second has fewer dimensions than the first is their ``TensorDataset``): input ``i`` has
  global index ``i``. It is read in batches of
  ``inputs_per_step`` consecutive indices that never cross a shard's edge (so a shard's batches
  are the same whatever was finished before or which rank explains it), collated with
  ``default_collate``.
* A ``DataLoader`` over a map-style data set with a sequential sampler (``shuffle=False``,
  the default): the same, with the loader's own batch size, ``drop_last``, ``collate_fn``,
  workers and pinning; the global index is the index in ``loader.dataset``.
* Any other ``DataLoader`` (an ``IterableDataset``, a custom sampler or batch sampler), or an
  ``IterableDataset`` (batched by ``inputs_per_step``): the global index is the input's position
  in the order the loader yields inputs (batch k's row j: the number of inputs in batches
  0..k-1, plus j). That order must be the same on every run and every rank; the whole loader
  is read by every rank and rows of other ranks' or finished shards are dropped.

A shuffling loader (``RandomSampler``) or a ``DistributedSampler`` is refused: positions
would then name different inputs from one run or rank to the next.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
    default_collate,
)
from torch.utils.data.distributed import DistributedSampler

from torchlime._util.checks import describe

Batch = tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]  # positions (b,), inputs (b, ...), labels
_COPIED = (
    "num_workers",
    "collate_fn",
    "pin_memory",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


def unpack(batch: object) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``inputs`` or ``(inputs, labels, ...)`` -> (inputs (b, ...), labels (b, ...) or None)."""
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        labels = batch[1] if len(batch) > 1 and isinstance(batch[1], torch.Tensor) else None
        if labels is not None and (labels.ndim == 0 or labels.shape[0] != batch[0].shape[0]):
            labels = None
        return batch[0], labels
    raise TypeError(f"`data` must yield input tensors (b, ...) or tuples (inputs, labels, ...), got {describe(batch)}")


class Source:
    """Batches of one data set with the global index of every input (see the module docstring).

    Args:
        data: a torch Dataset, a DataLoader, an IterableDataset, a sized indexable (tensor, list) or a
            tuple of tensors ``(inputs (N, ...), labels (N,), ...)``.
        inputs_per_step: inputs per batch (a DataLoader's own batch size takes precedence).

    Attributes:
        n_inputs: N, the number of inputs, or None when the data have no length.
        seen: inputs counted while reading (the generic path learns N this way).
    """

    def __init__(self, data: object, inputs_per_step: int) -> None:
        self.loader: Optional[DataLoader[object]] = None
        #: map-style data: a Dataset, tensor or list (anything sized and indexable; torch's Dataset declares no len)
        self.dataset: Any = None
        self.template: Optional[DataLoader[object]] = None
        self.inputs_per_step, self.drop_last = inputs_per_step, False
        self.seen = 0
        if (
            isinstance(data, tuple)
            and len(data) > 1
            and all(isinstance(t, torch.Tensor) and t.ndim for t in data)
            and len({t.shape[0] for t in data}) == 1
            and data[1].ndim < data[0].ndim
        ):
            data = TensorDataset(*data)  # (inputs (N, ...), labels (N,), ...): not a tuple of inputs
        if isinstance(data, DataLoader):
            self._from_loader(data)
        elif isinstance(data, IterableDataset):
            self.loader = DataLoader(data, batch_size=inputs_per_step)
        elif hasattr(data, "__len__") and hasattr(data, "__getitem__"):
            self.dataset = data
        else:
            raise TypeError(
                f"`data` must be a torch Dataset, a DataLoader, an IterableDataset or a sized indexable "
                f"(tensor, list), got {describe(data)}"
            )
        self.n_inputs = self._length()

    def _from_loader(self, loader: DataLoader[object]) -> None:
        if isinstance(loader.sampler, DistributedSampler):
            raise ValueError(
                "`data` must not use a DistributedSampler: explain_dataset splits the data by rank "
                "itself (shard k to rank k % world_size); pass the plain DataLoader"
            )
        if isinstance(loader.sampler, RandomSampler):
            raise ValueError(
                "`data` must yield inputs in the same order on every run: got a DataLoader that "
                "shuffles (shuffle=True, RandomSampler), whose positions would name different inputs "
                "on a resumed run or another rank; pass shuffle=False"
            )
        if loader.batch_size is None and loader.batch_sampler is None:
            raise ValueError(
                "`data` must yield batches: got a DataLoader with batch_size=None (single inputs); give it a batch_size"
            )
        bs = loader.batch_sampler
        plain = (
            type(bs) is BatchSampler
            and type(bs.sampler) is SequentialSampler
            and not isinstance(loader.dataset, IterableDataset)
        )
        if plain:
            assert isinstance(bs, BatchSampler)  # checked above: plain is its exact type
            self.dataset, self.inputs_per_step, self.drop_last = loader.dataset, bs.batch_size, bs.drop_last
            self.template = loader
        else:
            self.loader = loader

    def _length(self) -> Optional[int]:
        """N for map-style data; None on the generic path (counted while reading)."""
        if self.dataset is None:
            return None
        n = len(self.dataset)
        return n - n % self.inputs_per_step if self.drop_last else n

    def first_input(self) -> Optional[torch.Tensor]:
        """Input 0 of map-style data, collated as its batches are.

        None on the generic path, where ``batches`` hands it to ``on_first`` instead.
        """
        if self.dataset is None or self.n_inputs == 0:
            return None
        collate = getattr(self.template, "collate_fn", None) or default_collate
        return unpack(collate([self.dataset[0]]))[0][0]

    def batches(
        self,
        shards: Sequence[int],
        wanted: Callable[[int], bool],
        shard_size: int,
        on_first: Callable[[torch.Tensor], None] = lambda x: None,
    ) -> Iterator[Batch]:
        """The batches of ``shards`` (map-style), or of every wanted shard (generic path).

        The generic path calls ``on_first(input 0)`` before anything is yielded.
        """
        if self.dataset is not None:
            yield from self._mapped(shards, shard_size)
        else:
            yield from self._streamed(wanted, shard_size, on_first)

    def _mapped(self, shards: Sequence[int], shard_size: int) -> Iterator[Batch]:
        n = self.n_inputs
        assert n is not None  # a map-style source has a length
        plan = [
            list(range(lo, min(lo + self.inputs_per_step, stop)))
            for k in shards
            for stop in [min(n, (k + 1) * shard_size)]
            for lo in range(k * shard_size, stop, self.inputs_per_step)
        ]
        if not plan:
            return
        template = self.template
        kwargs = {} if template is None else {a: getattr(template, a) for a in _COPIED if hasattr(template, a)}
        if template is not None and kwargs.get("num_workers", 0) > 0:
            kwargs["prefetch_factor"] = template.prefetch_factor
        else:
            kwargs.pop("persistent_workers", None)
        loader = DataLoader(self.dataset, batch_sampler=plan, **kwargs)
        for idx, batch in zip(plan, loader):
            inputs, labels = unpack(batch)
            if inputs.shape[0] != len(idx):
                raise ValueError(
                    f"`data` must collate {len(idx)} inputs into a batch of {len(idx)}, got {describe(inputs)}"
                )
            yield torch.tensor(idx, dtype=torch.long), inputs, labels

    def _streamed(
        self, wanted: Callable[[int], bool], shard_size: int, on_first: Callable[[torch.Tensor], None]
    ) -> Iterator[Batch]:
        count = 0
        assert self.loader is not None  # a streamed source always has its loader
        for batch in self.loader:
            inputs, labels = unpack(batch)
            b = inputs.shape[0]
            if count == 0 and b:
                on_first(inputs[0])
            pos = torch.arange(count, count + b)
            count += b
            self.seen = count
            keep = torch.tensor([wanted(int(k)) for k in (pos // shard_size).tolist()], dtype=torch.bool)
            if not bool(keep.any()):
                continue
            if not bool(keep.all()):
                pos, inputs = pos[keep], inputs[keep]
                labels = None if labels is None else labels[keep]
            yield pos, inputs, labels
        self.seen = count
