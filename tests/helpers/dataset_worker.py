"""The data set, model and call of the ``explain_dataset`` tests, runnable as a script.

``python tests/dataset_worker.py OUT [--inputs-per-step B] [--shard-size S] [--n N] [--loader] [--init-gloo]
[--stop-at POINT:K --marker FILE]`` explains the deterministic test data set into OUT; the tests launch it
in a subprocess (to kill it mid-run) and under ``python -m torch.distributed.run --nproc_per_node=2``
(with ``--init-gloo``). ``--stop-at before_rename:K`` (or ``before_index:K``) replaces the writer's
``_store.checkpoint`` in this process only: at that point of writing shard K it writes FILE and sleeps,
so the test can kill it exactly there.
The model applies the same ops to every row on its own, so its outputs, and the explanations,
do not depend on how rows are batched.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from torchlime import Call, Explainer, Images
from torchlime.dataset import _store, explain_dataset

SIZE = 8
SEGMENTS = torch.arange(SIZE).view(SIZE, 1) // 2 * (SIZE // 2) + torch.arange(SIZE) // 2  # 16 cells of 2 x 2
MODALITY = Images(segments=SEGMENTS)
CALL = Call(n_samples=32, target="top2", generator=5)
FAST = Explainer(batch_size=256)  # rows per model call: fixed, not measured
#: the tests' explanation, in the three records explain_dataset takes
RECORDS = dict(modality=MODALITY, explainer=FAST, call=CALL)


class RowNet(torch.nn.Module):
    """A small two-layer net computed row by row with elementwise products and sums over each row (no
    matmul, whose blocking may depend on the batch size): batch-invariant outputs on the CPU."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Parameter(torch.randn(8, 3 * SIZE * SIZE) / SIZE)
        self.head = torch.nn.Parameter(torch.randn(5, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x.flatten(1).unsqueeze(1) * self.hidden).sum(-1).tanh()  # (B, 8)
        return (h.unsqueeze(1) * self.head).sum(-1)  # (B, 5)


def make_model() -> RowNet:
    torch.manual_seed(0)
    return RowNet().eval()


def make_data(n: int = 20) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    return TensorDataset(torch.rand(n, 3, SIZE, SIZE, generator=g), torch.arange(n) % 5)


def run(out, *, n: int = 20, inputs_per_step: int = 7, shard_size: int = 8, loader: bool = False, **extra):
    """The tests' call of ``explain_dataset`` (the same in the test process and in subprocesses)."""
    data = make_data(n)
    if loader:
        data = DataLoader(data, batch_size=inputs_per_step)
    call = dict(inputs_per_step=inputs_per_step, shard_size=shard_size, progress=False, **RECORDS)
    return explain_dataset(make_model(), data, out, **{**call, **extra})


def stop_at(where: str, marker: str) -> None:
    """Make this process's writer write ``marker`` and sleep at ``where`` ("POINT:K") of writing shard K."""

    def checkpoint(point: str, shard: int) -> None:
        if f"{point}:{shard}" == where:
            Path(marker).write_text(point)
            time.sleep(3600)

    _store.checkpoint = checkpoint


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--inputs-per-step", type=int, default=7)
    parser.add_argument("--shard-size", type=int, default=8)
    parser.add_argument("--loader", action="store_true")
    parser.add_argument("--init-gloo", action="store_true")
    parser.add_argument("--stop-at", default="")
    parser.add_argument("--marker", default="")
    args = parser.parse_args()
    if args.stop_at:
        stop_at(args.stop_at, args.marker)
    torch.set_num_threads(1)
    if args.init_gloo:
        torch.distributed.init_process_group("gloo")
    run(args.out, n=args.n, inputs_per_step=args.inputs_per_step, shard_size=args.shard_size, loader=args.loader)
    if args.init_gloo:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
