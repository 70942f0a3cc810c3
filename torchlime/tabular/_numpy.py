"""numpy at the tabular door: numpy rows in, and a model over numpy rows (scikit-learn's ``predict_proba``).

The rule (lime's ``classifier_fn``, as ``explain_text`` takes it): when ``X`` is a numpy array, a
model that is not an ``nn.Module`` (nor a TorchScript function) is called with numpy rows and
may return numpy scores; its outputs become tensors as ``explain_text``'s string models' do
(``torchlime.text.strings.string_model``). An ``nn.Module`` always gets tensors. The
explanation is torch either way.
"""

from __future__ import annotations

from typing import Callable, Union, overload

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from torchlime._util.checks import describe
from torchlime.text.strings import string_model
from torchlime.typing import Model


@overload
def as_rows(value: Union[torch.Tensor, NDArray[np.generic]], name: str) -> torch.Tensor: ...


@overload
def as_rows(value: object, name: str) -> object: ...


def as_rows(value: object, name: str) -> object:
    """A numpy array of numbers as a new float32 tensor (on the CPU); anything else as it comes.

    Args:
        value: ``X`` or ``perturbed`` as the caller passed it.
        name: its name in the message.

    Returns:
        A tensor for a numpy array, else ``value`` (the tensor checks follow).

    Raises:
        TypeError: a numpy array of something else than numbers (strings, objects).

    Example:
        >>> as_rows(np.array([[1, 2], [3, 4]]), "X").dtype
        torch.float32
    """
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype.kind not in "biuf":
        raise TypeError(
            f"`{name}` must hold numbers (a float array, or a torch.Tensor), got {describe(value)}; "
            f"encode text or categories as numbers first (e.g. category codes)"
        )
    return torch.tensor(value, dtype=torch.float32)  # a copy: the caller's array is never touched


def takes_numpy(model: Model, x: object) -> bool:
    """Whether ``model`` is called with numpy rows: ``x`` is a numpy array and ``model`` no torch module.

    Args:
        model: the caller's model.
        x: ``X`` as the caller passed it.

    Returns:
        True for e.g. ``explain_tabular(rf.predict_proba, X_numpy, ...)``.
    """
    return isinstance(x, np.ndarray) and not isinstance(model, (nn.Module, torch.jit.ScriptFunction))


class NumpyRows:
    """A model over numpy rows, seen by the engine as a model over tensors returning tensors.

    Args:
        fn: the caller's function ``fn(rows (c, D) float32 ndarray) -> scores (c, K) or (c,)``, a
            numpy array, nested lists of numbers or a tensor.
    """

    def __init__(self, fn: Callable[[NDArray[np.float32]], object]) -> None:
        self.fn = fn
        self.scores: Callable[[NDArray[np.float32]], torch.Tensor] = string_model(fn)  # explain_text's output rule

    @property
    def cache_identity(self) -> Callable[[NDArray[np.float32]], object]:
        """The wrapped function (keys any cached chunk size)."""
        return self.fn

    def __call__(self, rows: torch.Tensor) -> torch.Tensor:
        """Scores of a chunk of rows.

        Args:
            rows: (c, D) the chunk's rows.

        Returns:
            The function's scores as a tensor (c, K) or (c,).
        """
        return self.scores(rows.detach().cpu().numpy())
