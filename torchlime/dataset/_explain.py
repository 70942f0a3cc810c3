"""``explain_dataset``: explain a whole data set in shards, resumably, on one process or many.

Every input's explanation depends only on the seed and its global index (the engine's
``index=``: masks and random fills are hashes of (seed, index, sample, feature)), so the
results do not depend on the inputs per step, the rows per model call, the sharding, the number of processes or
interruptions. The data are read in batches (``_data``), explained by ``explain_fn``, gathered
per shard and written as safetensors files with an ``index.json`` (``_store``); ``load_results``
reads them back (``_results``); under ``torchrun`` shard k goes to rank k % world_size
(``_distributed``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, Optional, Union, cast

import torch
from tqdm.auto import tqdm

from torchlime._checks import check_positive_int, describe
from torchlime.dataset._data import Source
from torchlime.dataset._describe import describe_model, describe_value, fingerprint, input_fingerprint
from torchlime.dataset._distributed import Context, context, place
from torchlime.dataset._lock import FolderLock, new_run_id
from torchlime.dataset._modality_run import ModalityRun
from torchlime.dataset._rows import rows_of, stack_rows
from torchlime.dataset._scan import ShardEntry, clean_temporary, collect, shard_range
from torchlime.dataset._store import Store, environment
from torchlime.engine.config import Call, field_names
from torchlime.engine.explainer import Explainer, ModalitySpec, configure
from torchlime.engine.explanation import Explanation
from torchlime.image import explain_image
from torchlime.stages.forward.chunking import check_max_memory
from torchlime.stages.forward.targets import check_shared_target
from torchlime.typing import Model

#: the status lines of a run (resuming, finished) go to this logger at INFO level (rank 0 only)
LOG = logging.getLogger("torchlime.dataset")


def _check(
    model: object,
    out: object,
    explain_fn: object,
    inputs_per_step: object,
    shard_size: object,
    generator: object,
    progress: object,
    model_batch_size: object,
    keep: dict[str, object],
    explain_kwargs: dict[str, object],
) -> None:
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"`out` must be a folder path (str or os.PathLike), got {describe(out)}")
    if not callable(explain_fn):
        raise TypeError(f"`explain_fn` must be a callable returning an Explanation, got {describe(explain_fn)}")
    check_positive_int(inputs_per_step, "inputs_per_step"), check_positive_int(shard_size, "shard_size")
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(
            f"`generator` must be an int seed (every input's masks derive from the seed and its index, "
            f"so a torch.Generator's state cannot be used), got {describe(generator)}"
        )
    if generator < 0:
        raise ValueError(f"`generator` must be an int seed >= 0, got {generator}")
    for name, value in {"progress": progress, **keep}.items():
        if not isinstance(value, bool):
            raise TypeError(f"`{name}` must be a bool, got {describe(value)}")
    if model_batch_size is not None:
        check_positive_int(model_batch_size, "model_batch_size")
    if "index" in explain_kwargs:
        raise ValueError("`index` must not be given: explain_dataset passes each input's global index itself")
    check_shared_target(explain_kwargs.get("target"), "explain_dataset")


def explain_dataset(
    model: Model,
    data: object,
    out: Union[str, os.PathLike[str]],
    *,
    explain_fn: Optional[Callable[..., Explanation]] = None,
    explainer: Optional[Explainer] = None,
    modality: object = None,
    inputs_per_step: int = 32,
    shard_size: int = 1024,
    generator: int = 0,
    progress: bool = True,
    max_memory: Union[None, int, float] = None,
    device: Union[None, str, torch.device] = None,
    model_batch_size: Optional[int] = None,
    keep_features: bool = True,
    keep_inputs: bool = False,
    **explain_kwargs: object,
) -> Path:
    """Explain every input of a data set and write the results to ``out`` in shards (resumable).

    Each batch goes through ``explain_fn(model, inputs, index=global_index, generator=seed,
    max_memory=max_memory, **explain_kwargs)``; results are gathered per shard of ``shard_size``
    inputs and written atomically as ``out/shard-KKKKKK.safetensors``, with ``out/index.json``
    (layout: ``torchlime.dataset._store``). Calling again with the same arguments resumes: finished
    shards are kept, only missing ones are computed, and the result is the same as one
    uninterrupted run. Under ``torchrun`` every rank explains the shards ``k % world_size ==
    rank`` on its own device and rank 0 writes the final index; read with ``load_results``, whose
    ``Results.explanation()`` gives ``Explanation`` objects to draw (``heatmap()``, the pictures of
    ``torchlime.image.viz``, ``torchlime show``). Rank 0 says what it does on the logger
    ``torchlime.dataset`` (INFO: "resuming OUT: 3 of 5 shards already done (120 explanations kept)",
    and what the folder holds at the end; ``logging.basicConfig(level=logging.INFO)`` shows them).

    Args:
        model: the explained model (an ``nn.Module`` is moved to ``device`` if it is elsewhere).
        data: a map-style ``Dataset`` (or tensor, list) yielding inputs or (inputs, labels)
            tuples, read in batches of ``inputs_per_step`` without shuffling (global index: the
            dataset index); a ``DataLoader`` (its batching is kept; global index: the dataset
            index with a sequential sampler, else the input's position in the loader's order,
            which must be the same on every run); an ``IterableDataset`` (position in its order).
            A shuffling or distributed sampler is refused. See ``torchlime.dataset._data``.
        out: the result folder (created; an existing one of the same run is resumed).
        explain_fn: None (``explainer`` and ``modality``; without them,
            ``torchlime.image.explain_image``), or any ``fn(model, inputs, *, index, generator,
            max_memory, **explain_kwargs) -> Explanation`` (``torchlime.explain`` with ``features=``,
            ``explain_spectrogram``, ...).
        explainer: how to explain (``torchlime.Explainer``); None with a ``modality``: one made of the
            ``Config`` fields among ``explain_kwargs``.
        modality: the input kind (``torchlime.Images(...)``, ``Spectrograms(...)``, ``Series(...)``,
            ...) or a feature map, as ``Explainer.explain`` takes it; ``explain_kwargs`` are then the
            ``Call`` fields (n_samples, target, ...).
        inputs_per_step: inputs per ``explain_fn`` call for a Dataset (a DataLoader keeps its own
            batches). Formerly ``batch_size=``, which still means this (not rows per model call) while it
            is deprecated, with a ``DeprecationWarning``.
        shard_size: inputs per shard file (the last shard fewer).
        generator: int seed of every mask and random fill.
        progress: a tqdm bar of explanations per second (under torchrun: rank 0's, over its shards).
        max_memory: CUDA memory budget of a chunk (bytes, or a fraction of the device), passed on.
        device: where to explain; None: ``cuda:LOCAL_RANK`` under torchrun with CUDA, else the
            model's device.
        model_batch_size: rows per model call, passed to ``explain_fn`` as the engine's ``batch_size``
            (None: the engine's rule). It takes the engine's name, ``batch_size=``, once the deprecated
            ``batch_size=`` (inputs per step) is removed; until then it is the way to set rows per call.
        **explain_kwargs: ``explain_fn``'s other keywords (n_samples, target, segments, ...; tensors among
            them, such as a segments map, go to ``device`` with the inputs);
            ``target="label"`` explains the label each input comes with. They are recorded in
            ``index.json`` as plain data, and a resumed run with other ones is refused.
        keep_features: store each input's feature map (``Explanation.features``) in the smallest
            integer dtype that holds its ids (int8 up to 127 features, int16 up to 32767: H x W bytes
            per image of fewer than 128 segments), so that every explanation can be drawn from the
            folder; False: coefficients only (a smaller folder; drawing then needs the maps rebuilt).
        keep_inputs: also store the inputs as the data gave them (same dtype and values: 4 x C x H x
            W bytes per float32 image), so that a picture needs no data (``torchlime show``); the
            shards then hold them in memory until written. Both are recorded in ``index.json`` when
            they differ from the defaults (a resumed run with other ones is refused).

    Returns:
        The folder ``out`` as a ``Path``.

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and what came);
            ``out`` holds a run with other arguments or a data set of another length.

    Example:
        >>> import tempfile, torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3))
        >>> images = torch.rand(10, 1, 4, 4)                     # any Dataset, DataLoader or tensor
        >>> feats = torch.arange(16).view(1, 1, 4, 4) // 2       # 8 features: pairs of pixels
        >>> with tempfile.TemporaryDirectory() as out:
        ...     _ = explain_dataset(model, images, out, explain_fn=torchlime.explain, features=feats,
        ...                         n_samples=64, inputs_per_step=4, shard_size=8, progress=False)
        ...     res = torchlime.dataset.load_results(out)
        ...     print(len(res), sorted(p.name for p in Path(out).iterdir()), res.coef.shape)
        10 ['index.json', 'shard-000000.safetensors', 'shard-000001.safetensors'] torch.Size([10, 1, 8])
    """
    if explainer is not None or modality is not None:
        if explain_fn is not None:
            raise TypeError("pass `explain_fn` or `explainer` / `modality`, not both")
        explainer, call = configure(explainer, explain_kwargs, "explain_dataset")
        explain_kwargs = {k: getattr(call, k) for k in explain_kwargs if k in field_names(Call)}
        explain_fn = ModalityRun(explainer, cast(ModalitySpec, modality))
    elif explain_fn is None:
        explain_fn = explain_image
    keep: dict[str, object] = {"keep_features": keep_features, "keep_inputs": keep_inputs}
    _check(
        model, out, explain_fn, inputs_per_step, shard_size, generator, progress, model_batch_size, keep, explain_kwargs
    )
    inputs_per_step, shard_size = int(inputs_per_step), int(shard_size)  # NumPy integers too (JSON arguments)
    model_batch_size = None if model_batch_size is None else int(model_batch_size)
    max_memory = check_max_memory(max_memory)
    source = Source(data, inputs_per_step)
    ctx = context(model, device)
    try:
        model = place(model, ctx.device)
        arguments = {
            "model": describe_model(model),
            "explain_fn": describe_value(explain_fn),
            "generator": generator,
            "shard_size": shard_size,
            "explain_kwargs": describe_value(explain_kwargs),
            **{name: value for name, value in keep.items() if value != _KEEP_DEFAULTS[name]},
        }  # the storage options only when not the defaults: a folder of the second format resumes
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
                        explain_fn,
                        generator,
                        max_memory,
                        model_batch_size,
                        progress,
                        (keep_features, keep_inputs),
                        on_device(explain_kwargs, ctx.device),
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


def _explain_shards(
    model: Any,
    source: Source,
    store: Store,
    ctx: Context,
    explain_fn: Callable[..., Explanation],
    generator: int,
    max_memory: Any,
    model_batch_size: Optional[int],
    progress: bool,
    keep: tuple[bool, bool],
    explain_kwargs: dict[str, Any],
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
    by_label = isinstance(explain_kwargs.get("target"), str) and explain_kwargs["target"] == "label"
    bar = tqdm(
        total=total, unit="expl", desc="explain_dataset", disable=not progress or ctx.rank != 0, dynamic_ncols=True
    )
    try:
        for pos, inputs, labels in source.batches(
            todo, wanted, size, lambda x: store.check_first(input_fingerprint(x))
        ):
            kwargs = dict(explain_kwargs)
            if by_label:
                if labels is None:
                    raise ValueError("`target='label'` needs data that yield (inputs, labels), got inputs alone")
                kwargs["target"] = labels.to(ctx.device).long()
            if model_batch_size is not None:
                kwargs["batch_size"] = model_batch_size
            exp = explain_fn(
                model,
                inputs.to(ctx.device),
                index=pos.to(ctx.device),
                generator=generator,
                max_memory=max_memory,
                **kwargs,
            )
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


def on_device(kwargs: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """``kwargs`` with its tensors (a segments map, a baseline) on ``device``, the rest as given; a new dict."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
