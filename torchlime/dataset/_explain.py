"""``explain_dataset``: explain a whole data set in shards, resumably, on one process or many.

Every input's explanation depends only on the seed and its global index (the engine's
``index=``: masks and random fills are hashes of (seed, index, sample, feature)), so the
results do not depend on the inputs per step, the rows per model call, the sharding, the number of processes or
interruptions. The data are read in batches (``_data``), explained by the explainer with the modality and the
call (``_modality_run``), gathered per shard and written as safetensors files with an ``index.json``
(``_store``); ``load_results`` reads them back (``_results``); under ``torchrun`` shard k goes to rank k %
world_size (``_distributed``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any, Optional, Union

import torch
from tqdm.auto import tqdm

from torchlime._util.checks import check_positive_int, describe
from torchlime.dataset._data import Source
from torchlime.dataset._describe import describe_model, fingerprint, input_fingerprint
from torchlime.dataset._distributed import Context, context, place
from torchlime.dataset._lock import FolderLock, new_run_id
from torchlime.dataset._modality_run import ModalityRun, check_keep
from torchlime.dataset._rows import rows_of, stack_rows
from torchlime.dataset._scan import ShardEntry, clean_temporary, collect, shard_range
from torchlime.dataset._store import Store, environment
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.typing import UNSET, Model

#: the status lines of a run (resuming, finished) go to this logger at INFO level (rank 0 only)
LOG = logging.getLogger("torchlime.dataset")


def _check(model: object, out: object, inputs_per_step: object, shard_size: object, progress: object) -> None:
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"`out` must be a folder path (str or os.PathLike), got {describe(out)}")
    check_positive_int(inputs_per_step, "inputs_per_step"), check_positive_int(shard_size, "shard_size")
    if not isinstance(progress, bool):
        raise TypeError(f"`progress` must be a bool, got {describe(progress)}")


def explain_dataset(  # noqa: PLR0913
    model: Model,
    data: object,
    out: Union[str, os.PathLike[str]],
    *,
    modality: ModalitySpec,
    explainer: Optional[Explainer] = None,
    call: Optional[Call] = None,
    inputs_per_step: int = 32,
    shard_size: int = 1024,
    device: Union[None, str, torch.device] = None,
    progress: bool = True,
    keep: Collection[str] = ("features",),
) -> Path:
    """Explain every input of a data set and write the results to ``out`` in shards (resumable).

    Each batch goes through ``explainer.run(model, inputs, modality, call)`` with the inputs' global
    indices as the call's ``index`` (and, with ``target="label"``, their labels as its target); results
    are gathered per shard of ``shard_size`` inputs and written atomically as
    ``out/shard-KKKKKK.safetensors``, with ``out/index.json`` (layout: ``torchlime.dataset._store``).
    Calling again with the same arguments resumes: finished shards are kept, only missing ones are
    computed, and the result is the same as one uninterrupted run. Under ``torchrun`` every rank explains
    the shards ``k % world_size == rank`` on its own device and rank 0 writes the final index; read with
    ``load_results``, whose ``Results.explanation()`` gives ``Explanation`` objects to draw
    (``heatmap()``, the pictures of ``torchlime.image.viz``, ``torchlime show``). Rank 0 says what it
    does on the logger ``torchlime.dataset`` (INFO: "resuming OUT: 3 of 5 shards already done (120
    explanations kept)", and what the folder holds at the end; ``logging.basicConfig(level=logging.INFO)``
    shows them).

    Args:
        model: the explained model (an ``nn.Module`` is moved to ``device`` if it is elsewhere).
        data: a map-style ``Dataset`` (or tensor, list) yielding inputs or (inputs, labels)
            tuples, read in batches of ``inputs_per_step`` without shuffling (global index: the
            dataset index); a ``DataLoader`` (its batching is kept; global index: the dataset
            index with a sequential sampler, else the input's position in the loader's order,
            which must be the same on every run); an ``IterableDataset`` (position in its order).
            A shuffling or distributed sampler is refused. See ``torchlime.dataset._data``.
        out: the result folder (created; an existing one of the same run is resumed).
        modality: the input kind (``torchlime.Images(...)``, ``Spectrograms(...)``, ``Tabular(...)``,
            ``Series(...)``, ...) or an integer feature map, as ``Explainer.explain`` takes it (tensors
            in it, such as a segments map, go to ``device`` with the inputs).
        explainer: how to explain (``torchlime.Explainer(sampler=..., kernel=..., surrogate=...,
            baseline=..., preset=...)``); None: the engine's defaults. Its ``batch_size`` is the rows per
            model call and its ``max_memory`` the CUDA memory of a chunk; they and ``progress`` change
            no number, so a run resumes with other ones.
        call: what to explain (``torchlime.Call(target=..., n_samples=..., generator=..., softmax=...)``);
            None: the defaults. ``target="label"`` explains the label each input comes with; the
            ``generator`` is the int seed of every mask and random fill (None: 0); ``index`` is the
            tool's (each input's global index).
        inputs_per_step: inputs per explanation call for a Dataset (a DataLoader keeps its own batches).
        shard_size: inputs per shard file (the last shard fewer).
        device: where to explain; None: ``cuda:LOCAL_RANK`` under torchrun with CUDA, else the
            model's device.
        progress: a tqdm bar of explanations per second (under torchrun: rank 0's, over its shards).
        keep: what the shards store besides the coefficients: "features", each input's feature map
            (``Explanation.features``) in the smallest integer dtype that holds its ids (int8 up to 127
            features, int16 up to 32767: H x W bytes per image of fewer than 128 segments), so that
            every explanation can be drawn from the folder; "inputs", the inputs as the data gave them
            (same dtype and values: 4 x C x H x W bytes per float32 image), so that a picture needs no
            data (``torchlime show``; the shards then hold them in memory until written). ``()``:
            coefficients only.

    The explainer, the modality and the call (the settings that differ from the defaults) are recorded
    in ``index.json`` as plain data, with the seed, the model's weights, ``shard_size`` and ``keep``
    when it is not the default; a resumed run with other ones is refused, naming them.

    Returns:
        The folder ``out`` as a ``Path``.

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and what came);
            ``out`` holds a run with other arguments, a data set of another length, or a run of
            torchlime 0.1 (``explain_fn=`` and its keywords: read it with ``load_results``).

    Example:
        >>> import tempfile, torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> images = torch.rand(10, 1, 4, 4)                     # any Dataset, DataLoader or tensor
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2       # 8 features: pairs of pixels
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = explain_dataset(model, images, out, modality=feats, call=torchlime.Call(n_samples=64),
        ...                         inputs_per_step=4, shard_size=8, progress=False)
        ...     res = torchlime.dataset.load_results(out)
        ...     print(len(res), sorted(p.name for p in Path(out).iterdir()), res.coef.shape)
        10 ['index.json', 'shard-000000.safetensors', 'shard-000001.safetensors'] torch.Size([10, 1, 8])
    """
    run = ModalityRun.checked(explainer, modality, call, "explain_dataset")
    kept = check_keep(keep, ("features",))
    _check(model, out, inputs_per_step, shard_size, progress)
    inputs_per_step, shard_size = int(inputs_per_step), int(shard_size)  # NumPy integers too (JSON arguments)
    source = Source(data, inputs_per_step)
    ctx = context(model, device)
    try:
        model = place(model, ctx.device)
        arguments = {
            "model": describe_model(model),
            **run.describe(),
            "generator": run.seed,
            "shard_size": shard_size,
            **{name: value for name, value in kept.items() if value != _KEEP_DEFAULTS[name]},
        }  # the storage options only when not the defaults
        store = Store(
            Path(out),
            arguments,
            fingerprint(arguments),
            shard_size,
            source.n_inputs,
            environment(ctx.device, ctx.world),
        )
        lock = FolderLock(Path(out), ctx.share(new_run_id()))
        try:
            error: Optional[BaseException] = None
            first_input = source.first_input()
            first = None if first_input is None else input_fingerprint(first_input)
            if ctx.rank == 0:
                try:
                    _check_folder(Path(out))
                    Path(out).mkdir(parents=True, exist_ok=True)
                    lock.acquire()
                    store.open(first)
                except (ValueError, OSError, RuntimeError) as err:
                    error = err
            ctx.raise_together(error)
            if ctx.rank != 0:
                lock.acquire()  # joins rank 0's lock: the same run id
                store.follow()
            error = None
            try:
                if not store.complete:
                    _explain_shards(
                        model,
                        source,
                        store,
                        ctx,
                        run.to(ctx.device),
                        progress,
                        (kept["keep_features"], kept["keep_inputs"]),
                    )
                elif ctx.rank == 0:
                    LOG.info(
                        "%s is complete (%s): nothing to compute",
                        store.out,
                        _held(store.entries, store),
                        extra={"event": "complete", "shards_done": len(store.entries)},
                    )
            except Exception as err:  # noqa: BLE001 - shared with the other ranks, then raised
                error = err
            ctx.raise_together(error)
            ctx.barrier()
            if ctx.rank == 0:
                if ctx.world > 1:  # the other ranks' shards: their writers verified them, read their headers
                    store.entries = collect(
                        store.out,
                        store.fingerprint,
                        shard_size,
                        store.n_inputs,
                        verify=False,
                        shard_format=store.shard_format,
                    )
                store.complete = store.n_shards is not None and len(store.entries) == store.n_shards
                store.write_index()
                LOG.info("kept %s in %s", _held(store.entries, store), store.out, extra={"event": "finished"})
            ctx.barrier()
        finally:
            lock.release()
    finally:
        ctx.close()
    return Path(out)


_KEEP_DEFAULTS = {"keep_features": True, "keep_inputs": False}


def _held(entries: dict[int, ShardEntry], store: Store) -> str:
    """``"3 of 5 shards, 120 explanations"``: what ``entries`` hold of the run."""
    n = sum(e["stop"] - e["start"] for e in entries.values())
    return f"{len(entries)} of {store.n_shards if store.n_shards is not None else '?'} shards, {n} explanations"


def _check_folder(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"`out` must be a folder, got the file {str(out)!r}")


def _explain_shards(  # noqa: C901
    model: Any,
    source: Source,
    store: Store,
    ctx: Context,
    run: ModalityRun,
    progress: bool,
    keep: tuple[bool, bool],
) -> None:
    """This rank's missing shards: read, explain, gather per shard, write (``keep``: features, inputs)."""
    size = store.shard_size
    clean_temporary(store.out, ctx.owns)
    if store.verified is not None:  # rank 0 verified the folder when it opened it
        done = {k: e for k, e in store.verified.items() if ctx.owns(k)}
    else:
        done = collect(store.out, store.fingerprint, size, store.n_inputs, ctx.owns, shard_format=store.shard_format)
    if ctx.world == 1 and done.keys() != store.entries.keys():  # adopt shards renamed before the index caught up
        store.entries = dict(done)
        store.write_index()
    before = done if ctx.world == 1 or store.verified is None else store.verified  # rank 0 verified every shard
    if before and ctx.rank == 0:
        kept = sum(e["stop"] - e["start"] for e in before.values())
        LOG.info(
            "resuming %s: %d of %s shards already done (%d explanations kept)",
            store.out,
            len(before),
            "?" if store.n_shards is None else store.n_shards,
            kept,
            extra={"event": "resume", "shards_done": len(before), "explanations_kept": kept},
        )

    def wanted(k: int) -> bool:
        return ctx.owns(k) and k not in done and (store.n_shards is None or k < store.n_shards)

    todo = [k for k in range(store.n_shards or 0) if wanted(k)]
    total = None if store.n_shards is None else sum(_expected(k, store) for k in todo)
    written = 0
    pending: dict[int, list[dict[str, torch.Tensor]]] = {}
    bar = tqdm(
        total=total, unit="expl", desc="explain_dataset", disable=not progress or ctx.rank != 0, dynamic_ncols=True
    )
    try:
        for pos, inputs, labels in source.batches(
            todo, wanted, size, lambda x: store.check_first(input_fingerprint(x))
        ):
            if run.by_label and labels is None:
                raise ValueError("`target='label'` needs data that yield (inputs, labels), got inputs alone")
            target = labels.to(ctx.device).long() if run.by_label and labels is not None else UNSET
            exp = run(model, inputs.to(ctx.device), pos.to(ctx.device), target)
            rows = rows_of(exp, pos, labels, inputs if keep[1] else None, keep[0])
            shard_of = pos // size
            for k in torch.unique(shard_of).tolist():
                sel = shard_of == k
                pending.setdefault(k, []).append({name: t[sel] for name, t in rows.items()})
                if _count(pending[k]) == _expected(k, store):  # full (N unknown: shard_size), or the last
                    _write(store, ctx, k, pending.pop(k))
                    written += 1
            bar.update(pos.shape[0])
            bar.set_postfix(shards_written=written, refresh=False)
    finally:
        bar.close()
    if store.n_inputs is None:  # data of unknown length: now read to the end
        store.n_inputs = source.seen
    elif source.dataset is None and source.seen != store.n_inputs:
        raise ValueError(
            f"`data` must yield the {store.n_inputs} inputs of the run stored in `out` "
            f"{str(store.out)!r}, got {source.seen}"
        )
    for k in sorted(pending):
        if _count(pending[k]) != _expected(k, store):
            raise ValueError(f"`data` yielded {_count(pending[k])} inputs of shard {k}, expected {_expected(k, store)}")
        _write(store, ctx, k, pending.pop(k))


def _count(parts: list[dict[str, torch.Tensor]]) -> int:
    return sum(p["index"].shape[0] for p in parts)


def _expected(k: int, store: Store) -> int:
    start, stop = shard_range(k, store.shard_size, store.n_inputs)
    return stop - start


def _write(store: Store, ctx: Context, k: int, parts: list[dict[str, torch.Tensor]]) -> None:
    """Stack a shard's rows (``stack_rows``) in index order, and write it."""
    tensors, input_shape = stack_rows(parts, k)
    store.write_shard(k, tensors, input_shape)
    if ctx.world == 1:  # one writer: keep the index current (ranks of a distributed run: rank 0 at the end)
        store.reached("before_index", k)
        store.write_index()
