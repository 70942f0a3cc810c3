"""The one door to ``kernels/``: Triton kernels or their torch references.

``TORCHLIME_BACKEND`` chooses, read at every call: ``auto`` (default: the Triton kernels for CUDA
tensors when ``triton`` imports and torch's deterministic-algorithms mode is off, the torch
references otherwise), ``torch`` (never Triton) or ``triton`` (always, also for CPU tensors when the
kernels run under Triton's interpreter, ``TRITON_INTERPRET=1`` set before they are first imported).
A kernel that does not handle its inputs falls back to its reference in every mode. No other
module imports ``kernels/``.
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Any, Optional, Sequence, TypedDict

import torch

from torchlime._util.upload import upload
from torchlime.kernels import reference_boxes as _boxes
from torchlime.kernels import reference_hash as _hash
from torchlime.typing import BackendMode, ChannelStats

MODES: tuple[BackendMode, ...] = ("auto", "torch", "triton")
#: the hash's constants: the 32-bit mask and the golden-ratio increment between streams and columns
M32: int = _hash.M32
GOLDEN: int = _hash.GOLDEN
_Three = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
_Four = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
_Five = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
_Six = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


class _BlendOptions(TypedDict):
    """The keyword arguments ``blend`` passes on to both of its implementations."""

    out_dtype: Optional[torch.dtype]
    mean: Optional[ChannelStats]
    std: Optional[ChannelStats]
    channels_last: bool


def mode() -> BackendMode:
    """The backend chosen by ``TORCHLIME_BACKEND`` ("auto" when unset).

    Returns:
        "auto", "torch" or "triton".

    Raises:
        ValueError: for a value other than auto, torch or triton.
    """
    value = os.environ.get("TORCHLIME_BACKEND", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"TORCHLIME_BACKEND must be one of {list(MODES)}, got {value!r}")
    return value  # narrowed to BackendMode by the check above


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when ``triton`` can be imported."""
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install counts as missing
        return False
    return True


def interpreting() -> bool:
    """True when the kernels run under Triton's interpreter (on CPU tensors)."""
    if not triton_available():
        return False
    from torchlime.kernels import blend as kernel

    flag: bool = kernel.interpreted()
    return flag


def use_triton(x: torch.Tensor) -> bool:
    """Whether the Triton kernels handle tensor ``x`` (see the module docstring).

    Args:
        x: a tensor the kernel would read.

    Returns:
        True for the Triton kernels, False for the torch references.

    Raises:
        RuntimeError: ``TORCHLIME_BACKEND=triton`` for a CPU tensor without the interpreter,
            or without triton installed.
    """
    chosen = mode()
    if chosen == "torch":
        return False
    if chosen == "auto":
        return x.is_cuda and not torch.are_deterministic_algorithms_enabled() and triton_available()
    if not triton_available():
        raise RuntimeError("TORCHLIME_BACKEND=triton needs the triton package: pip install triton")
    if not x.is_cuda and not interpreting():
        raise RuntimeError(
            f"TORCHLIME_BACKEND=triton needs CUDA tensors, or TRITON_INTERPRET=1 set before "
            f"torchlime is imported to run the kernels on the CPU; got a tensor on {x.device}"
        )
    return True


def blend(  # noqa: PLR0913
    x: torch.Tensor,
    base: torch.Tensor,
    labels: torch.Tensor,
    masks: torch.Tensor,
    *,
    out_dtype: Optional[torch.dtype] = None,
    mean: Optional[ChannelStats] = None,
    std: Optional[ChannelStats] = None,
    channels_last: bool = False,
    block_rows: int = 1,
    sources: Optional[torch.Tensor] = None,
    spans: Optional[Sequence[tuple[int, int, int]]] = None,
) -> torch.Tensor:
    """Mask expansion + baseline blend, with the cast, per-channel normalisation and layout fused.

    ``where(masks[i, labels[i]], x[i], base[i])``, then ``(v - mean) / std`` per channel
    (dim 1), cast to ``out_dtype``, ``channels_last`` for 4-D results: the contract of
    ``kernels.reference.blend_torch``. Rows of several inputs (``sources``) are read where they
    are: by the kernel row by row, by the torch blend span by span (``spans``), never copied
    once per row except where neither applies.

    Args:
        x: (1 or c, *shape) the explained inputs of the rows; (B, *shape) with ``sources``.
        base: (1 or c, *shape) their fill; the same way.
        labels: long (1 or c, *fshape) the mask column of every element; the same way.
        masks: bool (c, F) the rows' masks.
        out_dtype: dtype of the result (default ``x.dtype``).
        mean: optional per-channel means (a number, a sequence or a (C,) tensor).
        std: optional per-channel standard deviations, the same way.
        channels_last: return a 4-D result in ``torch.channels_last`` memory format.
        block_rows: the rows (dim -2) of ``labels`` repeat in blocks of this many (a promise, e.g.
            ``FeatureMap.block_rows``); the torch blend then expands the masks once per block.
        sources: optional long (c,) the operand row of every output row (leading-1 operands are
            shared).
        spans: optional host ``(lo, hi, source)`` stretches of the rows, each of one source (-1:
            several, gathered), covering them in order (``engine.row_spans``); with ``sources``.

    Returns:
        (c, *shape) the blended rows.
    """
    extras = _BlendOptions(out_dtype=out_dtype, mean=mean, std=std, channels_last=channels_last)
    if use_triton(x):
        from torchlime.kernels import blend as kernel

        if kernel.supports(x, base, labels, masks, sources):
            out: torch.Tensor = kernel.blend(x, base, labels, masks, **extras, sources=sources)
            return out
    from torchlime.kernels.reference import blend_spans

    ref: torch.Tensor = blend_spans(x, base, labels, masks, extras, block_rows, sources, spans)
    return ref


def normalize_stats(mean: ChannelStats, std: ChannelStats, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``mean`` and ``std`` as 1-D tensors on ``like``'s device, in the dtype ``blend`` normalises in.

    That dtype is float64 for float64 ``like``, else float32. Made once per call: ``blend`` then uses
    them as they are on every chunk, where statistics given as Python numbers would be copied from
    the host (a synchronisation on CUDA) chunk after chunk.

    Args:
        mean: per-channel means (a number, a sequence or a tensor).
        std: per-channel standard deviations, the same way.
        like: (B, C, ...) the tensor they normalise.

    Returns:
        ``(mean, std)``, each 1-D.
    """
    from torchlime.kernels.reference import compute_dtype

    dtype = compute_dtype(like.dtype)
    return (
        upload(mean, dtype, like.device).reshape(-1),
        upload(std, dtype, like.device).reshape(-1),
    )


def slic_features(colour: torch.Tensor, scale: float) -> torch.Tensor:
    """SLIC's per-pixel features [colour, y * scale, x * scale]: float32 (B, C + 2, H, W).

    Args:
        colour: (B, C, H, W) the images' colours.
        scale: the weight of the pixel coordinates (``compactness / S`` for SLIC).
    """
    from torchlime.kernels.reference import slic_features as features

    out: torch.Tensor = features(colour, scale)
    return out


def slic_assign(
    features: torch.Tensor, centres: torch.Tensor, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC assignment: (int32 labels, squared distances), see ``kernels.reference.assign_torch``.

    Args:
        features: float32 (B, D, H, W) pixel features (``slic_features``).
        centres: (B, gh, gw, D) the centres.
        cell: (sh, sw) the seeding cell size in pixels.

    Returns:
        ``(labels, dist)``: int32 (B, H, W) the nearest centre of every pixel, (B, H, W) its squared distance.
    """
    if use_triton(features):
        from torchlime.kernels import slic as kernel

        if kernel.supports_assign(features, centres, cell):
            out: tuple[torch.Tensor, torch.Tensor] = kernel.assign(features, centres, cell)
            return out
    from torchlime.kernels.reference import assign_torch

    ref: tuple[torch.Tensor, torch.Tensor] = assign_torch(features, centres, cell)
    return ref


def slic_update(
    features: torch.Tensor, labels: torch.Tensor, n_centres: int, cell: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """SLIC centre update: per-centre feature sums and pixel counts, see ``kernels.reference.update_torch``.

    The kernel is a deterministic per-centre reduction.

    Args:
        features: float32 (B, D, H, W) pixel features.
        labels: int32 / int64 (B, H, W) the centre of every pixel.
        n_centres: the number of centres per image.
        cell: (sh, sw) the seeding cell size in pixels.

    Returns:
        ``(sums, counts)``: (B, n_centres, D) feature sums and int32 (B, n_centres) pixel counts.
    """
    if use_triton(features):
        from torchlime.kernels import slic as kernel

        if kernel.supports_update(features, labels, n_centres, cell):
            out: tuple[torch.Tensor, torch.Tensor] = kernel.update(features, labels, n_centres, cell)
            return out
    from torchlime.kernels.reference import update_torch

    ref: tuple[torch.Tensor, torch.Tensor] = update_torch(features, labels, n_centres, cell)
    return ref


def row_hash(key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, stream: int) -> torch.Tensor:
    """Long (c,) one hash per row, see ``kernels.reference_hash.row_hash_torch`` (torch: a few small operations).

    Args:
        key: long (2,) the call's key.
        inputs: long (c,) each row's input.
        samples: long (c,) each row's sample.
        stream: which independent stream of numbers.
    """
    out: torch.Tensor = _hash.row_hash_torch(key, inputs, samples, stream)
    return out


def mix32(x: torch.Tensor) -> torch.Tensor:
    """The 32-bit mixer of the hash on long values in [0, 2**32), see ``kernels.reference_hash.mix32``."""
    out: torch.Tensor = _hash.mix32(x)
    return out


def hash_words(key: torch.Tensor, inputs: torch.Tensor, samples: torch.Tensor, stream: int, width: int) -> torch.Tensor:
    """Long (c, width) hash words of rows, see ``kernels.reference_hash.hash_words_torch`` (the same bits).

    Args:
        key: long (2,) the call's key (low and high 32-bit words).
        inputs: long (c,) each row's input.
        samples: long (c,) each row's sample.
        stream: which independent stream of numbers (a non-negative int).
        width: the number of columns.

    Returns:
        Long (c, width) values in [0, 2**32): one Triton launch on CUDA, about 60 torch operations otherwise.
    """
    if use_triton(inputs):
        from torchlime.kernels import hash_words as kernel

        if kernel.supports(key, inputs, samples, width):
            out: torch.Tensor = kernel.hash_words(key, inputs, samples, stream, width)
            return out
    ref: torch.Tensor = _hash.hash_words_torch(key, inputs, samples, stream, width)
    return ref


#: the fit's kernels that raised once (a compile error on an untested device, say): their references from then on
_FAILED: set[str] = set()


def _fit(kind: str, probe: torch.Tensor, operands: tuple[Optional[torch.Tensor], ...], *args: object) -> Any:
    """One of the fit's kernels, or its reference: ``kernels.fit.<kind>`` or ``reference_fit.<kind>_torch``.

    The kernel runs where ``use_triton(probe)`` and ``supports(kind, *operands)`` hold. A kernel that raises
    is reported once (a ``RuntimeWarning`` naming it) and its reference serves from then on: the call still
    gets its explanation.
    """
    if use_triton(probe) and kind not in _FAILED:
        from torchlime.kernels import fit as kernel

        if kernel.supports(kind, *operands):
            try:
                return getattr(kernel, kind)(*args)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as error:  # noqa: BLE001 - any failure of the kernel: its reference instead
                _FAILED.add(kind)
                warnings.warn(f"torchlime's Triton kernel {kind!r} failed ({error!r}); its torch reference serves "
                              f"instead from now on", RuntimeWarning, stacklevel=3)  # fmt: skip
    from torchlime.kernels import reference_fit

    return getattr(reference_fit, f"{kind}_torch")(*args)


def mask_weights(masks: torch.Tensor, valid: torch.Tensor, metric: str, scale: float, width: float) -> torch.Tensor:
    """Float32 (g, r) exponential-kernel weights of bool (g, r, F) masks with (g, F) ``valid``, one launch on CUDA.

    See ``kernels.reference_fit.mask_weights_torch`` (``metric``: "cosine", "hamming" or "euclidean").
    """
    out: torch.Tensor = _fit("mask_weights", masks, (masks, valid), masks, valid, metric, scale, width)
    return out


def normal_centre(sums: torch.Tensor, y_shift: torch.Tensor, f: int, t: int) -> _Six:
    """The centred normal equations of running sums: ``kernels.reference_fit.centre_torch`` (one launch on CUDA).

    Float64 ``(gram (B, F, F), rhs (B, F, T), x_mean (B, F), y_mean (B, T), ss_tot (B, T), shift (B, T))`` of
    (B, 3 + F + 2T + F(F + T)) ``sums`` and (B, T) ``y_shift``.
    """
    out: _Six = _fit("centre", sums, (sums, y_shift), sums, y_shift, f, t)
    return out


def fit_summary(
    beta: torch.Tensor, valid: Optional[torch.Tensor], moments: _Five, dtype: Optional[torch.dtype]
) -> _Four:
    """A fit's summary: ``kernels.reference_fit.summary_torch`` (one launch on CUDA).

    ``(coef (B, T, F), intercept, score, local_pred (B, T))`` of float64 (B, F, T) ``beta``, ``valid`` (B, F) or
    None and the float64 ``moments`` ``(gram (B, F, F), rhs (B, F, T), x_mean (B, F), y_mean, ss_tot (B, T))``.
    """
    out: _Four = _fit("summary", beta, (beta, valid, *moments), beta, valid, moments, dtype)
    return out


def quality_flags(
    ss_tot: torch.Tensor,
    weight_sum: torch.Tensor,
    weight_sq_sum: torch.Tensor,
    score: torch.Tensor,
    n_features: torch.Tensor,
    thresholds: tuple[float, float, float],
) -> _Three:
    """The quality checks: ``kernels.reference_fit.flags_torch`` (one launch on CUDA).

    Bool ``(saturated (B, T), poor_fit (B, T), few_samples (B,))`` of (B, T) ``ss_tot`` and ``score``, (B,)
    ``weight_sum``, ``weight_sq_sum`` and ``n_features``.
    """
    args = (ss_tot, weight_sum, weight_sq_sum, score, n_features)
    out: _Three = _fit("flags", ss_tot, args, *args, thresholds)
    return out


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(c, T, K) IoU of boxes (c, T, 4) and (c, K, 4): ``kernels.reference_boxes.box_iou_torch`` (torch only)."""
    out: torch.Tensor = _boxes.box_iou_torch(a, b)
    return out


def rank_boxes(boxes: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor, threshold: float) -> _Three:
    """A detector's targets among detections (B, K): ``kernels.reference_boxes.rank`` (one launch on CUDA)."""
    out: _Three = _boxes.rank(boxes, labels, scores, threshold, use_triton(boxes))
    return out


def match_boxes(targets: _Three, rows: Optional[torch.Tensor], found: _Three) -> torch.Tensor:
    """(c, T) D-RISE scores of rows' detections: ``kernels.reference_boxes.match`` (one launch on CUDA)."""
    out: torch.Tensor = _boxes.match(targets, rows, found, use_triton(found[0]))
    return out
