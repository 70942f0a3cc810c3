"""shap's inputs for ``torchlime.compat.shap``: the background data, the rows to explain, the model, the link.

The background (``data``) may be a numpy array, a pandas DataFrame or Series (one row), a torch tensor,
or shap's ``DenseData`` (what ``shap.kmeans`` / ``shap.sample`` summaries are), read by its attributes so
that shap is never imported. The model is called as shap calls it, with numpy (r, P) rows in the
background's dtype (a pandas DataFrame with ``keep_index=True``), or with tensors when it is a torch
module or the background is a tensor; its output may be (r,) or (r, K), numpy, pandas, a list or a
tensor. Coalitions reach it as (c, N, P) chunks (c coalitions x the N background rows) and come back
as the background-weighted mean of each coalition's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Protocol, Union, cast

import numpy as np
import torch
from torch import nn

from torchlime._util.checks import describe
from torchlime.stages.forward.model import select_output

#: what the explained rows, the background and the model's outputs may be
Rows = Union[np.ndarray, torch.Tensor]
LINKS = ("identity", "logit")
_LOGIT_EPS = 1e-15  # shap's LogitLink clips probabilities to [eps, 1 - eps]


def link_name(link: object) -> str:
    """``link`` as "identity" or "logit" (a name, or shap's ``IdentityLink()`` / ``LogitLink()``).

    Args:
        link: the caller's link.

    Returns:
        The name.

    Raises:
        ValueError: another name. TypeError: another kind of object.
    """
    if isinstance(link, str):
        if link in LINKS:
            return link
        raise ValueError(f"`link` must be 'identity' or 'logit' (as shap takes it), got {link!r}")
    if type(link).__name__ in ("IdentityLink", "LogitLink"):
        return "identity" if type(link).__name__ == "IdentityLink" else "logit"
    raise TypeError(f"`link` must be 'identity', 'logit' or shap's IdentityLink() / LogitLink(), got {describe(link)}")


def apply_link(name: str, values: torch.Tensor) -> torch.Tensor:
    """The link of model outputs (shap's): identity, or the log-odds of probabilities clipped to [1e-15, 1 - 1e-15].

    Args:
        name: "identity" or "logit".
        values: float64 (...) outputs.

    Returns:
        Float64 (...) the linked outputs.
    """
    if name == "identity":
        return values
    p = values.clamp(_LOGIT_EPS, 1 - _LOGIT_EPS)
    return torch.log(p / (1 - p))


class _Summary(Protocol):
    """What is read of shap's ``DenseData``."""

    data: object
    weights: object


@dataclass(frozen=True)
class Background:
    """The background rows, their weights and their column names.

    Attributes:
        values: (N, P) numpy array or tensor, as the caller gave it (a DataFrame's values).
        weights: float64 (N,) numpy weights summing to 1 (shap's ``DenseData.weights``, else uniform).
        names: the DataFrame's column names, or None.
    """

    values: Rows
    weights: np.ndarray
    names: Optional[list[str]]


def _dense_rows(value: object, name: str, kinds: str) -> Rows:
    """A tensor (detached) or a numpy array of bools or numbers, read from a tensor, array, list or tuple.

    Args:
        value: the caller's rows (any shape; a DataFrame already turned into its values).
        name: the argument's name in the errors ("data", "X").
        kinds: the kinds the argument may be, for the error on another kind.

    Returns:
        The rows, their shape unchecked.

    Raises:
        TypeError: a scipy sparse matrix, another kind, an array of other than numbers or bools.
    """
    if hasattr(value, "tocsr") or hasattr(value, "toarray"):
        raise TypeError(
            f"`{name}` must be dense: pass {name}.toarray() (scipy sparse is not taken), got {describe(value)}"
        )
    if isinstance(value, torch.Tensor):
        return value.detach()
    if not isinstance(value, (np.ndarray, list, tuple)):
        raise TypeError(f"`{name}` must be {kinds}, got {describe(value)}")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"`{name}` must hold numbers or bools, got {describe(array)}; encode categories as numbers")
    return array


def background(data: object) -> Background:
    """The ``data`` argument (shap's background) as a ``Background``.

    Args:
        data: (N, P) numpy array / DataFrame / tensor, a Series (one row), or shap's ``DenseData``.

    Returns:
        The background.

    Raises:
        TypeError / ValueError: sparse matrices, grouped or transposed ``DenseData``, other kinds, other
            shapes, no rows or columns; named.
    """
    weights: Optional[np.ndarray] = None
    names: Optional[list[str]] = None
    if type(data).__name__ in ("DenseData", "DenseDataWithIndex") and hasattr(data, "weights"):
        groups = getattr(data, "groups", None) or []
        if getattr(data, "transposed", False) or any(len(g) != 1 or int(g[0]) != i for i, g in enumerate(groups)):
            raise ValueError("`data`: shap DenseData with feature groups or transposed is not supported; pass rows")
        summary = cast(_Summary, data)
        weights = np.asarray(summary.weights, dtype=np.float64)
        data = summary.data
    elif hasattr(data, "columns") and hasattr(data, "to_numpy"):  # a pandas DataFrame
        names = [str(c) for c in data.columns]
        data = data.to_numpy()
    elif hasattr(data, "to_numpy") and hasattr(data, "index"):  # a pandas Series: one row
        data = data.to_numpy().reshape(1, -1)
    values = _dense_rows(data, "data", "a numpy array, a pandas DataFrame, a torch tensor or shap's DenseData")
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(f"`data` must be (N, P) background rows with N, P >= 1, got {describe(values)}")
    n = values.shape[0]
    weights = np.full(n, 1.0 / n) if weights is None else weights / np.sum(weights)
    if weights.shape != (n,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"`data` weights must be {n} finite numbers >= 0, got {describe(weights)}")
    return Background(values, weights, names)


def explained_rows(x: object, width: int) -> tuple[Rows, bool, Optional[list[str]]]:
    """The ``X`` argument (shap's): (n, P) rows or one row (P,), as an array or tensor.

    Args:
        x: numpy array, DataFrame, Series, list, or tensor.
        width: P, the background's columns.

    Returns:
        ``(rows, single, names)``: (n, P) rows, whether one row (P,) came, the DataFrame's column names.

    Raises:
        TypeError / ValueError: another kind, non-numbers, another width or rank; naming ``X``.
    """
    names = [str(c) for c in x.columns] if hasattr(x, "columns") and hasattr(x, "to_numpy") else None
    if hasattr(x, "to_numpy") and not isinstance(x, torch.Tensor):
        x = x.to_numpy()
    rows = _dense_rows(x, "X", "a numpy array, a pandas DataFrame / Series or a torch tensor")
    if rows.ndim not in (1, 2) or rows.shape[-1] != width:
        raise ValueError(
            f"`X` must be (n, {width}) rows or one ({width},) row (the background data has {width} columns), "
            f"got {describe(rows)}"
        )
    single = rows.ndim == 1
    return (rows.reshape(1, -1) if single else rows), single, names


class ModelCall:
    """The caller's model on the device: scores of rows, or background-averaged scores of coalitions.

    Args:
        fn: the caller's model.
        tensors: call it with tensors (else numpy arrays, or DataFrames with ``columns``).
        weights: float64 (N,) background weights, on the device.
        columns: column names of the DataFrame each call gets (``keep_index=True``), or None.
    """

    def __init__(
        self, fn: Callable[..., object], tensors: bool, weights: torch.Tensor, columns: Optional[list[str]]
    ) -> None:
        self.fn, self.tensors, self.weights, self.columns = fn, tensors, weights, columns
        self.ndim: Optional[int] = None  # of the model's raw output (1: one value per row)

    @property
    def cache_identity(self) -> Callable[..., object]:
        """The caller's model (keys any measured chunk size)."""
        return self.fn

    def _numpy_call(self, rows: np.ndarray) -> object:
        """The model on numpy rows, or on a DataFrame of them with ``keep_index=True``."""
        if self.columns is not None:
            import pandas as pd  # only with keep_index=True: pandas is there (a DataFrame came in)

            return self.fn(pd.DataFrame(rows, columns=self.columns))
        return self.fn(rows)

    def _output(self, out: object) -> object:
        """A model's output as a tensor or a numpy array of numbers; ``ndim`` records its rank."""
        if hasattr(out, "to_numpy") and not isinstance(out, torch.Tensor):  # pandas
            out = out.to_numpy()
        if isinstance(out, (list, tuple)) and out and not isinstance(out[0], torch.Tensor):
            out = np.asarray(out)
        if isinstance(out, np.ndarray) and out.dtype.kind in "biu":
            out = out.astype(np.float64)
        ndim = getattr(out, "ndim", 2)
        if self.ndim is None:
            self.ndim = ndim
        return out

    def scores(self, rows: torch.Tensor) -> torch.Tensor:
        """Float64 (r, K) scores of (r, P) rows on the weights' device.

        Args:
            rows: (r, P) rows.

        Returns:
            The scores; ``ndim`` records whether the model returned (r,) or (r, K).
        """
        out = self.fn(rows) if self.tensors else self._numpy_call(rows.cpu().numpy())
        out = self._output(out)
        return select_output(out, None, rows.shape[0]).to(self.weights.device, torch.float64)

    def host(self, rows: np.ndarray) -> np.ndarray:
        """Float64 (r, K) scores of (r, P) numpy rows, as numpy (a model called with numpy, on the CPU).

        Args:
            rows: (r, P) rows.

        Returns:
            The scores (a view of the model's own array where it is already (r, K) or (r,) float64).
        """
        r = rows.shape[0]
        out = self._output(self._numpy_call(rows))
        if isinstance(out, np.ndarray) and out.ndim in (1, 2) and out.shape[0] == r and out.dtype.kind == "f":
            return out.reshape(r, -1).astype(np.float64, copy=False)
        return select_output(out, None, r).to(torch.float64).cpu().numpy()  # other kinds, and its errors

    def __call__(self, chunk: torch.Tensor) -> torch.Tensor:
        """Scores of a chunk: (c, P) rows, or (c, N, P) coalitions averaged over the background rows.

        Args:
            chunk: (c, P) rows or (c, N, P) coalitions filled with every background row.

        Returns:
            Float64 (c, K) scores.
        """
        if chunk.ndim == 2:
            return self.scores(chunk)
        c, n, p = chunk.shape
        out = self.scores(chunk.reshape(c * n, p)).view(c, n, -1)
        return (out * self.weights.view(1, n, 1)).sum(1)


def placement(model: object, values: Rows) -> tuple[bool, torch.device, torch.dtype]:
    """How the model is called: with tensors or not, on which device, in which dtype.

    A torch module (or TorchScript function) gets tensors on its device in its floating dtype (float32
    without parameters); a tensor background makes any callable get tensors on the background's device
    and dtype; otherwise numpy rows in the background's dtype (float64 for anything but bool and floats).

    Args:
        model: the caller's model.
        values: (N, P) the background rows.

    Returns:
        ``(tensors, device, dtype)``.

    Raises:
        TypeError: a model that is not callable.
    """
    if not callable(model):
        raise TypeError(f"`model` must be callable on (n, P) rows, got {describe(model)}")
    if isinstance(model, (nn.Module, torch.jit.ScriptFunction)):
        if isinstance(model, nn.Module):
            for t in list(model.parameters()) + list(model.buffers()):
                if t.is_floating_point():
                    return True, t.device, t.dtype
        device = values.device if isinstance(values, torch.Tensor) else torch.device("cpu")
        return True, device, torch.float32
    if isinstance(values, torch.Tensor):
        return True, values.device, values.dtype if values.is_floating_point() else torch.float32
    kind = values.dtype
    dtype = {np.dtype(np.float32): torch.float32, np.dtype(np.bool_): torch.bool}.get(kind, torch.float64)
    return False, torch.device("cpu"), dtype
