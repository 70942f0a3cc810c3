"""What ``explain_dataset`` keeps of every explained batch, and how a shard's rows are stacked.

``rows_of`` takes the stored fields of one batch's ``Explanation`` to the CPU: the coefficients and
the fit, the feature maps (``keep`` "features") and, when asked, the inputs as the data gave them
(``keep`` "inputs"). ``stack_rows`` puts a shard's rows in index order, pads coefficients to the shard's
widest F and targets to its largest T, and stores the feature maps in the smallest signed integer
dtype that holds their ids (``compact_ids``): int8 for maps of up to 127 features, int16 up to 32767,
else int32; they are read back as long, so the maps, and the heat maps painted with them, are the
ones the explanation had, bit for bit.
"""

from __future__ import annotations

import warnings
from typing import Optional

import torch

from torchlime._util.checks import describe
from torchlime.dataset._scan import MAPS, OPTIONAL, REQUIRED, pad_targets
from torchlime.engine.explanation import Explanation

_PADDED = ("coef", "coef_std", "coef_se")
#: a row's input shape (n, ndim), carried with the rows to the shard's metadata, never stored as a tensor
SHAPE = "_input_shape"
_INTS = (torch.int8, torch.int16, torch.int32)


def compact_ids(ids: torch.Tensor) -> torch.Tensor:
    """Integer ids in the smallest signed dtype that holds them (int8, int16, int32, else int64).

    Args:
        ids: an integer tensor of any shape (feature ids -1..F-1).

    Returns:
        The same values and shape in that dtype (a copy unless the dtype is already the smallest).

    Example:
        >>> compact_ids(torch.tensor([-1, 0, 99])).dtype, compact_ids(torch.tensor([0, 300])).dtype
        (torch.int8, torch.int16)
    """
    if ids.numel() == 0:
        return ids.to(torch.int8)
    lo, hi = int(ids.min()), int(ids.max())
    for dtype in _INTS:
        info = torch.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return ids.to(dtype)
    return ids.long()


def _feature_rows(exp: Explanation, b: int) -> torch.Tensor:
    """(b, *fshape) feature maps of a batch's explanation (a map shared by the batch repeated), compact."""
    feats = exp.features.detach()
    if feats.shape[0] != b:
        if feats.ndim == 0 or feats.shape[0] != 1:
            raise ValueError(
                f"a batch's explanation must have one feature map per input or one for all (the modality's map: "
                f"shape ({b} or 1, ...)), got features of shape {tuple(feats.shape)}"
            )
        feats = feats.expand(b, *feats.shape[1:])
    return compact_ids(feats.cpu()).contiguous()


def rows_of(
    exp: object,
    pos: torch.Tensor,
    labels: Optional[torch.Tensor],
    inputs: Optional[torch.Tensor] = None,
    keep_features: bool = True,
) -> dict[str, torch.Tensor]:
    """The stored fields of one explained batch, on the CPU.

    Args:
        exp: the batch's explanation (checked: an ``Explanation`` of b inputs).
        pos: long (b,) the inputs' global indices.
        labels: (b, ...) the data's labels, or None.
        inputs: (b, ...) the inputs as the data gave them, kept as they are; None: not kept.
        keep_features: keep the feature maps (``Explanation.features``).

    Returns:
        Tensors of b rows by field name (the shard file's fields, and the rows' input shape).

    Raises:
        TypeError / ValueError: ``exp`` is no ``Explanation`` of the b inputs.
    """
    if not isinstance(exp, Explanation):
        raise TypeError(f"a batch's explanation must be an Explanation, got {describe(exp)}")
    b = pos.shape[0]
    if exp.coef.shape[0] != b:
        raise ValueError(
            f"a batch's explanation must explain its {b} inputs, got coef of shape {tuple(exp.coef.shape)}"
        )
    rows = {"index": pos, **{name: getattr(exp, name).detach().cpu() for name in REQUIRED[1:]}}
    rows["target"], rows["n_features"] = rows["target"].long(), rows["n_features"].long()
    used = None if exp.run is None else exp.run.samples_used
    if used is not None and len(used) == b:
        rows["samples_used"] = torch.tensor(used, dtype=torch.long)
    if exp.coef_std is not None:
        rows["coef_std"] = exp.coef_std.detach().cpu()
    elif exp.coef_se is not None:  # the posterior sd is stored once, as coef_std
        rows["coef_se"] = exp.coef_se.detach().cpu()
    if exp.target_valid is not None:  # a structured target: T differs between inputs
        rows["target_valid"] = exp.target_valid.detach().cpu()
    if labels is not None:
        rows["label"] = labels.detach().cpu()
    if keep_features:
        rows["features"] = _feature_rows(exp, b)
    if inputs is not None:
        rows["inputs"] = inputs.detach().cpu()
    rows[SHAPE] = torch.tensor(list(exp.input_shape), dtype=torch.long).expand(b, len(exp.input_shape))
    return rows


def _same_shape(name: str, parts: list[dict[str, torch.Tensor]], k: int) -> bool:
    """Whether field ``name`` has one shape per row in every part (warns naming the shard when not)."""
    if any(name not in p for p in parts):
        return False
    shapes = {tuple(p[name].shape[1:]) for p in parts}
    if len(shapes) > 1:
        warnings.warn(
            f"shard {k}: its inputs' {name} have different shapes {sorted(shapes)}: they are not kept in that shard",
            RuntimeWarning,
            stacklevel=4,
        )
        return False
    return True


def stack_rows(
    parts: list[dict[str, torch.Tensor]], k: int
) -> tuple[dict[str, torch.Tensor], Optional[tuple[int, ...]]]:
    """A shard's rows stacked in index order, padded to its widest F and largest T.

    Args:
        parts: ``rows_of`` dicts of the shard's rows, in any order.
        k: the shard's number (named in warnings).

    Returns:
        ``(tensors by field, the input shape of its rows)``: contiguous CPU tensors of the shard's n rows;
        the input shape is None when its rows differ in it (then their feature maps and inputs are not kept).
    """
    width = max(p["coef"].shape[-1] for p in parts)
    n_targets = max(p["coef"].shape[1] for p in parts)
    tensors = {}
    for name in REQUIRED + OPTIONAL:
        if name not in parts[0] or (name in MAPS and not _same_shape(name, parts, k)):
            continue
        ts = [pad_targets(name, p[name], n_targets) for p in parts]
        if name in _PADDED:
            ts = [torch.nn.functional.pad(t, (0, width - t.shape[-1])) for t in ts]
        if name == "features":  # each part in its smallest dtype: the widest holds them all
            widest = max((t.dtype for t in ts), key=lambda d: torch.iinfo(d).bits)
            ts = [t.to(widest) for t in ts]
        tensors[name] = torch.cat(ts)
    order = tensors["index"].argsort()
    tensors = {name: t[order].contiguous() for name, t in tensors.items()}
    shapes = {tuple(p[SHAPE][0].tolist()) for p in parts if p[SHAPE].shape[0]}
    if len(shapes) > 1:
        warnings.warn(
            f"shard {k}: its inputs have different shapes {sorted(shapes)}: their feature maps and inputs are not kept "
            f"in that shard",
            RuntimeWarning,
            stacklevel=3,
        )
        tensors = {name: t for name, t in tensors.items() if name not in MAPS}
    return tensors, next(iter(shapes)) if len(shapes) == 1 else None
