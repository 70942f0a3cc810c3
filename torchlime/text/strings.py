"""The string side of ``explain_text``: texts built from masks, and a model over strings.

The engine runs on a long (B, P) tensor of piece indices with one feature per word piece
(``split.feature_tensor``). ``StringPerturbation`` turns a chunk's masks into the chunk's texts
(hidden words removed, or replaced by a mask string) and ``StringModel`` calls the user's
function on that list of strings and returns its scores as a tensor. Building strings is host
work by nature: one transfer of the chunk's kept pieces, then one ``join`` per row.
"""

from __future__ import annotations

from typing import Callable, Generic, Optional, Sequence, TypeVar

import numpy as np
import torch

from torchlime._util.checks import describe
from torchlime.stages.perturb.blend import Chunk
from torchlime.text.split import SplitText

#: what the wrapped function takes: a list of strings (text), numpy rows (tabular)
Batch = TypeVar("Batch")


class StringPerturbation:
    """``perturb_fn`` of string inputs: the texts of a chunk's rows.

    Args:
        splits: the B split texts.
        mask_string: None removes hidden words; a string replaces each hidden word piece.
    """

    def __init__(self, splits: Sequence[SplitText], mask_string: Optional[str]) -> None:
        self.pieces = [np.array(s.pieces + [""], dtype=object) for s in splits]  # "" pads to P
        self.mask_string = mask_string

    def __call__(
        self, inputs: torch.Tensor, baseline: torch.Tensor, index: torch.Tensor, chunk: Chunk
    ) -> tuple[list[str]]:
        """The texts of the chunk's c rows, as a one-argument call: ``([c strings],)``.

        Args:
            inputs: long (B, P) piece indices (-1 past a text's end).
            baseline: (B, P) unused (hidden words are removed or masked).
            index: long (B, P) the mask column of every piece (separators: the always-kept one).
            chunk: the rows.

        Returns:
            A 1-tuple holding the list of c texts (the model is called with that list).
        """
        lab = index.reshape(index.shape[0], -1)[chunk.rows]
        keep = chunk.masks.gather(1, lab).cpu().numpy()
        pos = inputs[chunk.rows].cpu().numpy()
        rows = chunk.rows.cpu().tolist()
        texts = []
        fill = np.empty(1, dtype=object)  # an object array keeps the mask string whole: NumPy's str dtype
        fill[0] = self.mask_string  # drops trailing NULs, and lime's character mask is chr(0)
        for b, k, p in zip(rows, keep, pos):
            pieces = self.pieces[b][p]  # position -1 reads the padding ""
            if self.mask_string is None:
                texts.append("".join(pieces[k]))
            else:
                texts.append("".join(np.where(k | (p < 0), pieces.astype(object), fill)))
        return (texts,)


class StringModel(Generic[Batch]):
    """A function over a list of strings, seen by the engine as a model returning a tensor.

    Args:
        fn: ``fn(list_of_c_strings)`` returning scores (c, K) or (c,): a tensor, a numpy array
            or nested lists of numbers (lime's ``classifier_fn``).
    """

    def __init__(self, fn: Callable[[Batch], object]) -> None:
        self.fn = fn

    @property
    def cache_identity(self) -> Callable[[Batch], object]:
        """The wrapped function (keys any cached chunk size)."""
        return self.fn

    def __call__(self, texts: Batch) -> torch.Tensor:
        """Scores of ``texts``.

        Args:
            texts: c strings.

        Returns:
            The function's scores as a tensor (c, K) or (c,).

        Raises:
            TypeError: when the function returns something that is not numbers.
        """
        out = self.fn(texts)
        if isinstance(out, torch.Tensor):
            return out
        arr = np.asarray(out)
        if arr.dtype.kind not in "biuf":
            raise TypeError(
                f"the text model must return scores (c, K) as a tensor or numpy array of numbers for a "
                f"list of c strings, got {describe(out)}"
            )
        return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64 if arr.dtype.kind == "f" else None))


def string_model(fn: Callable[[Batch], object]) -> StringModel[Batch]:
    """The engine's adapter for a model over strings.

    Args:
        fn: the user's function over a list of strings.

    Returns:
        The wrapped ``StringModel``.
    """
    return fn if isinstance(fn, StringModel) else StringModel(fn)
