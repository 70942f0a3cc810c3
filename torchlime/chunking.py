"""``auto_batch_size``: the largest chunk of perturbed inputs that fits in GPU memory.

On CUDA the chunk size is found by probing: forward passes of growing chunks
(doubling from ``start``) until one does not fit, then bisection between the last
chunk that fitted and the first that did not. A chunk "fits" when its forward pass
raises no out-of-memory error and its peak memory stays under ``fraction`` of the
memory that was available before it. The answer is cached per (model, per-row input
shapes and dtypes, device, limits), so the probing runs once per model and shape.

On CPU no probing is done: the result is ``forward.default_batch_size``'s rule.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional, Union

import torch

from ._checks import check_positive_float, check_positive_int, describe
from .forward import _is_oom, call_model, default_batch_size, eval_mode, model_placement

#: (id(model), per-row signature, device, max_size, fraction) -> chunk size
_CACHE: dict[tuple, int] = {}


def clear_cache() -> None:
    """Forget every chunk size found so far (e.g. after freeing or taking GPU memory)."""
    _CACHE.clear()


def _on_cuda(device: torch.device) -> bool:
    """Whether to probe (CUDA device and CUDA available); tests replace it to probe on CPU."""
    return device.type == "cuda" and torch.cuda.is_available()


def _leaves(chunk: Any) -> list[torch.Tensor]:
    """The tensors of a chunk: a tensor, or a tuple / list / dict of them."""
    if isinstance(chunk, torch.Tensor):
        return [chunk]
    if isinstance(chunk, dict):
        return [v for v in chunk.values() if isinstance(v, torch.Tensor)]
    if isinstance(chunk, (tuple, list)):
        return [v for v in chunk if isinstance(v, torch.Tensor)]
    return []


def _signature(chunk: Any) -> tuple:
    """Per-row shapes and dtypes of a chunk's tensors (dim 0, the rows, left out)."""
    leaves = _leaves(chunk)
    if not leaves:
        raise TypeError(f"`make_chunk` must return a tensor, or a tuple / list / dict of tensors, "
                        f"got {describe(chunk)}")
    return tuple((tuple(t.shape[1:]), t.dtype) for t in leaves)


def _available_bytes(device: torch.device) -> Optional[int]:
    """Memory a chunk may use: free device memory plus the allocator's reusable cache (None off CUDA)."""
    if device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return int(free + cached)


def _reset_peak(device: torch.device) -> int:
    """Reset the peak counter; returns the bytes allocated now (0 off CUDA)."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def _peak_bytes(device: torch.device, base: int) -> int:
    """Peak bytes allocated since ``_reset_peak`` above ``base`` (0 off CUDA)."""
    if device.type != "cuda":
        return 0
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - base


def _empty_cache() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _fits(model: Any, make_chunk: Callable[[int], Any], n: int, device: torch.device,
          placement: tuple[torch.device, torch.dtype], fraction: float) -> bool:
    """One probe: does a forward pass of ``n`` rows run, within ``fraction`` of the available memory?"""
    available = _available_bytes(device)
    base = _reset_peak(device)
    oom = False
    try:
        chunk = make_chunk(n)
        with torch.inference_mode():
            out = call_model(model, chunk, *placement)
        del chunk, out
    except Exception as err:  # noqa: BLE001 - only out-of-memory is a probe result
        if not _is_oom(err):
            raise
        oom = True
    # outside the except block, so the traceback's tensors are gone before the cache is emptied
    peak = _peak_bytes(device, base)
    _empty_cache()
    if oom:
        return False
    return available is None or peak <= fraction * available


def _search(fits: Callable[[int], bool], start: int, max_size: int) -> int:
    """Largest n in [1, max_size] with ``fits(n)``, assuming fits is monotone (True then False).

    Doubling from ``start`` (or halving when ``start`` does not fit) brackets the answer
    between a size that fits and one that does not; bisection closes the bracket.

    Raises:
        torch.OutOfMemoryError: when a single row does not fit.
    """
    n = min(start, max_size)
    if fits(n):
        lo, hi = n, None
        while lo < max_size:
            n = min(2 * lo, max_size)
            if not fits(n):
                hi = n
                break
            lo = n
        if hi is None:
            return lo
    else:
        hi = n
        lo = 0
        while hi > 1:
            n = hi // 2
            if fits(n):
                lo = n
                break
            hi = n
        if lo == 0:
            raise torch.OutOfMemoryError("auto_batch_size: a chunk of a single row does not fit in "
                                         "the available device memory")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _forget(key_id: int) -> None:
    for key in [k for k in _CACHE if k[0] == key_id]:
        del _CACHE[key]


def auto_batch_size(model: Callable[..., Any], make_chunk: Callable[[int], Any],
                    device: Union[str, torch.device], *, start: int = 64, max_size: int = 4096,
                    fraction: float = 0.8, identity: Any = None) -> int:
    """The largest chunk of rows whose forward pass fits in the device's memory.

    Args:
        model: the model (``nn.Module`` or callable) run on chunks, in eval mode under
            ``torch.inference_mode()`` on its own device and dtype (as ``explain`` runs it).
        make_chunk: ``make_chunk(n)`` returns a chunk of ``n`` rows: a (n, ...) tensor, or a
            tuple / dict of (n, ...) tensors (the model's positional / keyword arguments).
            Building the chunk counts towards the probe's memory, as it does in ``explain``.
        device: where the chunks run (``torch.device`` or string).
        start: first size probed (doubling from there, halving if it does not fit).
        max_size: largest size returned (e.g. the number of rows there are).
        fraction: a chunk fits when its peak memory is at most ``fraction`` of the free
            memory (device free + the caching allocator's unused blocks) before it, and it
            raises no out-of-memory error. Below 1 to leave room for other work.
        identity: the object whose identity keys the cache (default: ``model``); pass the
            underlying model when ``model`` is a wrapper made afresh on every call (e.g.
            ``image.Normalized``), or the cache would miss every time.

    Returns:
        CUDA: the largest fitting size in [1, max_size], rounded down to a multiple of 8
        when at least 8 (cached: later calls with the same model, per-row shapes, dtypes,
        device and limits return at once). Other devices: ``forward.default_batch_size``
        of one row, bounded by ``max_size`` (no probing).

    Raises:
        TypeError / ValueError: bad arguments (named, with what was expected and got).
        torch.OutOfMemoryError: on CUDA, when a single row does not fit.

    Note:
        Probing resets CUDA's peak-memory statistics (``torch.cuda.reset_peak_memory_stats``)
        and empties the caching allocator after each probe.
    """
    if not callable(model):
        raise TypeError(f"`model` must be an nn.Module or a callable, got {describe(model)}")
    if not callable(make_chunk):
        raise TypeError(f"`make_chunk` must be a callable n -> chunk of n rows, got {describe(make_chunk)}")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"`device` must be a torch.device or a string, got {describe(device)}")
    device = torch.device(device)
    check_positive_int(start, "start")
    check_positive_int(max_size, "max_size")
    fraction = check_positive_float(fraction, "fraction")
    if fraction > 1:
        raise ValueError(f"`fraction` must be in (0, 1], got {fraction}")

    one_row = make_chunk(1)
    sig = _signature(one_row)
    if not _on_cuda(device):
        return default_batch_size(_leaves(one_row)[0], max_size)
    owner = model if identity is None else identity
    key = (id(owner), sig, str(device), max_size, fraction)
    if key in _CACHE:
        return _CACHE[key]
    del one_row
    placement = model_placement(model, torch.empty(0, device=device, dtype=sig[0][1]))
    with eval_mode(model):
        size = _search(lambda n: _fits(model, make_chunk, n, device, placement, fraction), start, max_size)
    if size >= 8:
        size -= size % 8
    _CACHE[key] = size
    try:  # a later model with the same id() must not inherit this size
        weakref.finalize(owner, _forget, id(owner))
    except TypeError:  # not weak-referenceable (e.g. a builtin): id reuse is then possible but harmless
        pass
    return size
