"""The coalitions of a numpy model (scikit-learn's ``predict_proba``), built and averaged with numpy.

A model called with numpy rows gets each chunk of c coalitions x N background rows as one (c N, P) numpy
array built from the coalitions' masks, the explained rows and the background (``coalition_rows``), and
its (c N, K) outputs are averaged over the background by one matrix product per chunk: no torch tensor
and no copy between the two libraries per chunk, and no torch intra-op threads (on a shared CPU a
parallel torch operation waits for a thread that another process holds, chunk after chunk).

Coalitions per call: a fixed ``batch_size``, else the engine's CPU chunk rule (16 MiB of rows: the same chunks
on every call, so the same bits), or with ``batch_size="measure"`` timed during an explainer's first calls by
``ChunkTuner``. Once the sizes are fixed, the next chunk's rows are built on a worker thread while the model
runs the current one (numpy's copies and the model's arithmetic leave the GIL), so two chunks exist at a time.
The fastest size is the model's and the machine's: a ``LogisticRegression``'s matrix product goes
multi-threaded in OpenBLAS above about 13 000 rows and, on a loaded 2-core machine, runs 3x to 7x slower per
row there, while a 50-tree random forest pays a dispatch over its trees per call and wants 25 000 rows or
more. No chunk runs twice: the timed chunks are the call's own. The means do not depend on the sizes (each
coalition's is a product over its own N rows); a model whose arithmetic depends on the batch may give other
last bits at another size (a ``LogisticRegression`` does, for chunks of a few rows), which is why timing is
asked for, not the default.
"""

from __future__ import annotations

import contextlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import ContextManager, Optional, cast

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.compat._shap_data import ModelCall
from torchlime.stages.forward.errors import model_call_error
from torchlime.stages.forward.passes import progress_bar

START_ROWS = 2**12  # model rows of the first timed chunks
GROWTH = 1.5  # each timed size is this much larger than the last
GAIN = 0.25  # a size this much slower per row than the fastest counts as worse (a loaded machine's noise is less)
TIMINGS = 3  # chunks timed per size (after one untimed first chunk); a size's time is the fastest of them
PATIENCE = 2  # worse sizes in a row before the growth stops
BLOCK_VALUES = 2**16  # values of one block of coalition rows (512 KiB of float64: within a core's L2)
FILL_FROM = 20  # background rows from which a chunk is the tiled background with the kept values written in


def coalition_rows(masks: np.ndarray, x: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """The model rows of c coalitions: each background row with the coalition's features taken from its row.

    From ``FILL_FROM`` background rows the background is tiled (a plain copy) and each kept (coalition,
    feature) value is written down its N rows by one fancy-index assignment: 2.4x faster than ``np.where``
    at 100 rows of 30 features, whose broadcast inner loops run over the P features only; below, ``np.where``.
    The tile is copied and written a block of ``BLOCK_VALUES`` values at a time, so each block is written
    while it is still in cache: at the 16 MiB default chunk this halves the build (a LogisticRegression's
    whole call 0.60 s -> 0.33 s in ``bench_shap_kernel``'s scenario). The same values either way (copies, no
    arithmetic).

    Args:
        masks: bool (c, P) the coalitions (True: the explained row's value).
        x: (c, P) each coalition's explained row.
        bg: (N, P) the background rows (x's dtype).

    Returns:
        (c, N, P) the rows, C-contiguous.
    """
    c, (n, p) = masks.shape[0], bg.shape
    if n < FILL_FROM:
        return np.where(masks[:, None, :], x[:, None, :], bg)
    out = np.empty((c, n, p), dtype=np.result_type(x, bg))
    step = max(1, BLOCK_VALUES // (n * p))
    for start in range(0, c, step):  # cache-sized blocks of coalitions: copied, then written, while in cache
        block, kept = out[start : start + step], masks[start : start + step]
        block[...] = bg
        ci, pi = np.nonzero(kept)
        block.transpose(0, 2, 1)[ci, pi] = x[start : start + step][ci, pi][:, None]
    return out


def blas_beside_builder() -> ContextManager[object]:
    """The model's BLAS threads limited to the cores the row builder leaves free, for the time of a call.

    The next chunk's rows are built on a worker thread while the model runs: with as many BLAS threads as cores
    beside it, the model's threads and the builder take turns on a core (on 2 cores a LogisticRegression's call
    took 0.37 s, and 0.26 s with one BLAS thread: ``bench_shap_kernel``'s scenario). The rows' values do not
    change (each output row is computed the same way); the BLAS libraries that threadpoolctl (scikit-learn's
    dependency) finds are limited only where they use more threads than that, and restored after.

    Returns:
        A context manager (a no-op without threadpoolctl or where no BLAS uses more threads).
    """
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:  # no scikit-learn model here, most likely: nothing to limit
        return contextlib.nullcontext()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    spare = max(1, cores - 1)
    if all(info.get("num_threads", 1) <= spare for info in threadpool_info() if info.get("user_api") == "blas"):
        return contextlib.nullcontext()
    return cast(ContextManager[object], threadpool_limits(limits=spare, user_api="blas"))


class ChunkTuner:
    """Coalitions per model call: fixed, or grown from ``START_ROWS`` model rows while not clearly slower.

    Every size runs ``TIMINGS`` chunks; the sizes grow by ``GROWTH`` up to ``cap`` until ``PATIENCE``
    sizes in a row are more than ``GAIN`` slower per coalition than the fastest so far; the fastest size
    is then ``best`` for the rest of the call (and for the explainer's later calls).

    Args:
        background_rows: N, the model rows of one coalition.
        cap: the largest size (coalitions).
        best: a size already chosen (a fixed ``batch_size``, or an earlier call's), or None to time.

    Example:
        >>> tuner = ChunkTuner(100, cap=512)
        >>> tuner.next(10_000)  # 4096 model rows: 40 coalitions of 100 rows
        40
    """

    def __init__(self, background_rows: int, cap: int, best: Optional[int] = None) -> None:
        self.cap = max(1, cap)
        self.size = min(self.cap, max(1, START_ROWS // max(1, background_rows)))
        self.best = best
        self.per_size: dict[int, list[float]] = {}  # size -> seconds per coalition of each timed chunk
        self.worse = 0
        self.warm = False  # the first chunk (the model's first call at this width: lazy set-up) is not timed

    def next(self, remaining: int) -> int:
        """The next chunk's coalitions (at most ``remaining``)."""
        return max(1, min(self.size if self.best is None else self.best, remaining))

    def record(self, size: int, seconds: float) -> None:
        """Take the time of a chunk of ``size`` coalitions (a short last chunk, or once chosen, is not counted)."""
        if self.best is not None or size != self.size or not self.warm:
            self.warm = True
            return
        self.per_size.setdefault(size, []).append(seconds / size)
        if len(self.per_size[size]) < TIMINGS:
            return
        per = {s: min(v) for s, v in self.per_size.items() if len(v) >= TIMINGS}
        fastest = min(per.values())
        self.worse = self.worse + 1 if per[size] > fastest * (1 + GAIN) else 0
        grown = min(self.cap, max(size + 1, int(size * GROWTH)))
        if self.worse >= PATIENCE or grown == size:
            self.best = min(s for s, t in per.items() if t == fastest)
        else:
            self.size = grown


def host_means(
    call: ModelCall,
    x: np.ndarray,
    bg: np.ndarray,
    masks: np.ndarray,
    owner: np.ndarray,
    tuner: ChunkTuner,
    outputs: int,
    progress: bool,
) -> np.ndarray:
    """The background-weighted mean model output of every coalition, the model called with numpy rows.

    Args:
        call: the model (``call.fn`` takes numpy rows; ``call.weights`` are the background's weights).
        x: (B, P) the explained rows, in the model's dtype.
        bg: (N, P) the background rows, in the same dtype.
        masks: bool (R, P) the coalitions (True: the explained row's value, False: the background's).
        owner: int (R,) the explained row of each coalition.
        tuner: the chunk sizes.
        outputs: K, the model's outputs per row (as on the background).
        progress: show a progress bar over the coalitions.

    Returns:
        Float64 (R, K) the means.

    Raises:
        ValueError: an output of another width than K, or not finite.
        ModelCallError / the model's exception: what the model raised, saying what it was sent.
    """
    total, (n, p) = masks.shape[0], bg.shape
    weights = call.weights.cpu().numpy()
    means = np.empty((total, outputs), dtype=np.float64)

    def build(start: int, stop: int) -> np.ndarray:
        return coalition_rows(masks[start:stop], x[owner[start:stop]], bg).reshape((stop - start) * n, p)

    with progress_bar(total, progress) as bar, ThreadPoolExecutor(1) as builder, blas_beside_builder():
        start, ahead = 0, None  # ahead: the next chunk's (stop, rows being built), once the sizes are fixed
        while start < total:
            began = time.perf_counter()
            if ahead is None:
                size = tuner.next(total - start)
                stop, rows = start + size, build(start, start + size)
            else:
                stop, rows = ahead[0], ahead[1].result()
                size, ahead = stop - start, None
            if tuner.best is not None and stop < total:  # build the next chunk while the model runs this one
                after = stop + tuner.next(total - stop)
                ahead = (after, builder.submit(build, stop, after))
            try:
                scores = call.host(rows)
            except Exception as err:  # the model's own error, said with the (c N, P) rows it was sent
                sent = torch.from_numpy(rows)
                wrapped = model_call_error(err, sent, start, sent.dtype)
                if wrapped is err:
                    raise
                raise wrapped from err
            if scores.shape[1] != outputs:
                raise ValueError(
                    f"`model` must return {outputs} finite value(s) per row (as on the background data), "
                    f"got {describe(scores)}"
                )
            means[start:stop] = np.matmul(weights, scores.reshape(size, n, outputs))
            tuner.record(size, time.perf_counter() - began)
            bar.update(size)
            start = stop
    bad = ~np.isfinite(means)
    if bad.any():
        raise ValueError(
            f"`model` must return {outputs} finite value(s) per row (as on the background data), got "
            f"{int(bad.sum())} non-finite mean(s) over the background"
        )
    return means
