"""The seam between the engine and a structured target: ``Target.bind`` and ``Bound.score``.

A plain ``target=`` (an int, a list, a tensor, "all", "topK") picks output columns of a (rows, K) score
tensor. A ``Target`` object instead reads the model's raw output, whatever its structure (a list of
detection dicts, (B, C, H, W) segmentation logits, embeddings), and reduces it to (rows, T) scores inside
the batched pass:

1. ``bind(reference, batch)`` sees the raw output of the B unperturbed inputs (``take_rows`` and
   ``cat_rows`` cut and join raw outputs along their rows) and fixes each input's targets: T_b of them
   (boxes, regions, references), padded to T = max T_b, with ``valid`` (B, T) marking the real ones. A T
   that depends on the output costs one host read per call, here, never per chunk.
2. ``Bound.score(out, rows)`` turns the raw output of any chunk, with the input index of each of its
   rows (c,), into (c, T) float scores, as batched tensor work.

The engine fits one surrogate per (input, target) as for plain targets; padded targets get coefficients
0 and are marked invalid in ``Explanation.target_valid``.
"""

from __future__ import annotations

import copy as pycopy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Callable, ClassVar, Optional, cast

import torch

from torchlime._util.checks import describe
from torchlime._util.nested import rebuild_mapping
from torchlime._util.records import PerInput

#: every kind of target record by its ``kind``, for explanations read back from files (``from_plain``)
_KINDS: dict[str, type[TargetInfo]] = {}


@dataclasses.dataclass(frozen=True)
class TargetInfo(PerInput):
    """What a structured target records of its targets (``Bound.info``; ``Explanation.run.targets``).

    A subclass is a frozen dataclass named by its ``kind``; ``per_input`` names the fields that hold one
    entry per input (a list or a tensor of B rows), so that ``Explanation[i]`` keeps the right ones, and
    ``transient`` those kept in memory only (never in ``Explanation.meta`` nor in files). The pictures
    read a record only through its hooks: ``caption``, ``outline`` and ``noun``.
    """

    kind: ClassVar[str] = "target"
    #: what one target is called before its label in the pictures' titles ("class 3", "reference 1")
    noun: ClassVar[str] = "target"

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Register a kind that names its own ``kind``."""
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            _KINDS[cls.kind] = cls

    def caption(self, t: int, b: int, label: int) -> str:
        """What target ``t`` of input ``b`` is, for the pictures' captions.

        Args:
            t: the target (column of ``Explanation.coef``).
            b: the input.
            label: ``Explanation.target[b, t]`` (a class, a box's label, a reference's index).

        Returns:
            e.g. "box 0 (label 2) at [0.0, 0.0, 8.0, 8.0]"; here "target t".
        """
        return f"target {t}"

    def outline(self, t: int, b: int) -> Optional[list[float]]:
        """The box (x1, y1, x2, y2, input pixels) that pictures outline for target ``t`` of input ``b``, or None."""
        return None

    def as_plain(self) -> dict[str, object]:
        """The record as plain data (``Explanation.meta["targets"]``, what files keep): "kind" and its fields."""
        kept = [f.name for f in dataclasses.fields(self) if f.name not in self.transient]
        plain = {k: getattr(self, k) for k in kept}
        return {"kind": self.kind, **{k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in plain.items()}}

    @classmethod
    def from_plain(cls, plain: object) -> Optional[TargetInfo]:
        """The record of the kind that ``plain["kind"]`` names, from what ``as_plain`` wrote, or None.

        Args:
            plain: ``meta["targets"]`` of an explanation read back from a file.

        Returns:
            The record; None for a kind no target registers or fields it does not hold (the plain
            data then stays as the file holds it). Its fields' kinds are checked by the caller
            (``engine.run_record``), against ``registered(plain["kind"])``'s annotations.
        """
        kind = cls.registered(plain.get("kind") if isinstance(plain, dict) else None)
        if kind is None or not isinstance(plain, dict):
            return None
        fields = {f.name for f in dataclasses.fields(kind) if f.name not in kind.transient}
        given = {k: v for k, v in plain.items() if k != "kind"}
        if set(given) != fields:
            return None
        return kind.rebuild(given)

    @classmethod
    def rebuild(cls, given: dict[str, object]) -> TargetInfo:
        """The record from its plain fields (checked by the caller to be exactly the record's)."""
        return cls(**given)

    @staticmethod
    def registered(kind: object) -> Optional[type[TargetInfo]]:
        """The record class of a target kind ("boxes", "region", ...), or None for a kind none registers."""
        return _KINDS.get(kind) if isinstance(kind, str) else None


@dataclasses.dataclass
class Bound:
    """A target bound to the unperturbed inputs of one call.

    Attributes:
        labels: long (B, T) what ``Explanation.target`` records for each target (a class, a box's label,
            a reference's index); -1 on padding.
        valid: bool (B, T) the targets that exist (False on padding).
        score: ``score(out, rows)``: (c, T) float scores of the raw output ``out`` of c rows whose inputs
            are ``rows`` (long (c,)).
        info: the typed record of the targets (boxes, regions, token ids), which
            ``Explanation.run.targets`` carries and ``Explanation.meta["targets"]`` shows as plain data.
        whole_pass: ``score`` gives each row the same bits whether it sees the row alone or with the
            rows of other chunks (``cat_rows`` of their outputs), and a row's raw output is small (a
            detector's boxes, not a language model's logits): the engine then keeps a pass's raw
            outputs and scores them once, after its last chunk, so that a chunk costs no scoring work.
        all_valid: every target of every input exists (``valid`` is all True, known on the host without a
            read): the engine then masks nothing for padded targets.
    """

    labels: torch.Tensor
    valid: torch.Tensor
    score: Callable[[object, torch.Tensor], torch.Tensor]
    info: TargetInfo = dataclasses.field(default_factory=TargetInfo)
    whole_pass: bool = False
    all_valid: bool = False

    def rows(self, start: int, stop: int) -> Bound:
        """The target bound to inputs ``start..stop-1`` only, renumbered from 0 (an explanation's slice).

        Args:
            start: the first input.
            stop: the input after the last.

        Returns:
            The sliced ``Bound``.
        """
        whole = self.score

        def score(out: object, rows: torch.Tensor) -> torch.Tensor:
            return whole(out, rows + start)

        info = self.info.select(start, stop)
        return Bound(self.labels[start:stop], self.valid[start:stop], score, info, self.whole_pass, self.all_valid)


class Target:
    """Base class of structured targets (``Boxes``, ``Region``, ``Similarity``): see the module docstring."""

    #: what the target is called in messages
    name = "target"

    def bind(self, reference: object, batch: int) -> Bound:
        """Fix each input's targets from the raw output of the unperturbed inputs.

        Args:
            reference: the model's raw output for the B unperturbed inputs.
            batch: B.

        Returns:
            The ``Bound`` target.
        """
        raise NotImplementedError

    def check(self, batch: int) -> None:
        """Check the target's own arguments against the batch before any model call.

        Args:
            batch: B, the number of inputs.
        """


def take_rows(out: object, lo: int, hi: int) -> object:
    """Rows ``lo:hi`` of a raw model output.

    A tensor is sliced along dim 0; a list of per-row records (dicts, as torchvision's detectors return)
    is sliced as a list; a tuple or list (a named tuple too), a mapping (a dict, a Hugging Face
    ``ModelOutput`` or ``BatchEncoding``, rebuilt as its type) and a dataclass (copied, fields set without
    running ``__init__`` again) are sliced item by item; any other object with attributes comes back as a
    shallow copy whose tensor and container attributes are sliced; anything else (a number, None) comes
    back as it is.

    Args:
        out: the output.
        lo: the first row.
        hi: the row after the last.

    Returns:
        The same structure with rows ``lo:hi``.
    """
    if isinstance(out, list) and out and isinstance(out[0], dict):
        return out[lo:hi]
    return _map_rows([out], lambda parts: take_rows(parts[0], lo, hi), lambda t: t[0][lo:hi] if t[0].ndim else t[0])


def cat_rows(parts: list[object]) -> object:
    """Join raw outputs of consecutive rows (the inverse of ``take_rows``).

    Args:
        parts: outputs of consecutive row ranges, each of one structure.

    Returns:
        One output of all their rows.
    """
    first = parts[0]
    if len(parts) == 1:
        return first
    if isinstance(first, list) and first and isinstance(first[0], dict):
        return [row for part in cast("list[list[object]]", parts) for row in part]
    return _map_rows(parts, cat_rows, lambda ts: torch.cat(ts) if ts[0].ndim else ts[0])


def _map_rows(
    parts: list[object], inner: Callable[[list[object]], object], tensors: Callable[[list[torch.Tensor]], torch.Tensor]
) -> object:
    """Rebuild the structure of ``parts[0]`` with ``tensors`` applied to its row tensors.

    Args:
        parts: outputs of one structure (one for ``take_rows``, several for ``cat_rows``).
        inner: the same operation on the matching items of ``parts`` (one level down).
        tensors: the operation on matching tensors.

    Returns:
        The rebuilt output.
    """
    first = parts[0]  # every part has the structure of the first (outputs of one model)
    if isinstance(first, torch.Tensor):
        return tensors(cast("list[torch.Tensor]", parts))
    if isinstance(first, (tuple, list)):
        items = cast("list[Sequence[object]]", parts)
        rebuilt = [inner([p[i] for p in items]) for i in range(len(first))]
        maker = getattr(type(first), "_make", type(first))  # a named tuple's fields are positional
        return maker(rebuilt)
    if isinstance(first, Mapping):  # a dict, a Hugging Face ModelOutput or BatchEncoding: rebuilt as its type
        records = cast("list[Mapping[object, object]]", parts)
        return rebuild_mapping(first, {k: inner([p[k] for p in records]) for k in first})
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        record = pycopy.copy(first)  # fields set as they are: ``__init__`` / ``__post_init__`` do not run again
        for f in dataclasses.fields(first):
            object.__setattr__(record, f.name, inner([getattr(p, f.name) for p in parts]))
        return record
    if hasattr(first, "__dict__") and not isinstance(first, type):
        plain = pycopy.copy(first)  # a plain object (``.logits`` on a namespace): its tensors and containers
        for name, value in vars(first).items():
            if isinstance(value, (torch.Tensor, tuple, list, Mapping)):
                setattr(plain, name, inner([getattr(p, name) for p in parts]))
        return plain
    return first


def tensor_output(out: object, name: str, keys: tuple[str, ...] = (), rows: int | None = None) -> torch.Tensor:
    """The score tensor of a raw output.

    The output itself when it is a tensor, else the first of ``keys`` (an attribute or a dict key), else
    the first element of a tuple.

    Args:
        out: the raw output.
        name: the target's name, for the message.
        keys: where to look in a structured output, in order (e.g. "out", "logits").
        rows: the number of rows the tensor must have along dim 0 (the rows being scored), if known.

    Returns:
        The tensor.

    Raises:
        ValueError: no tensor found (pass ``output=`` to select one), or one whose rows are not ``rows``.
    """
    found = _find_tensor(out, keys)
    if found is None:
        raise ValueError(
            f"{name} needs a tensor from the model's output (pass `output=` to select one), got {describe(out)}"
        )
    if rows is not None and (found.ndim == 0 or found.shape[0] != rows):
        raise ValueError(
            f"{name} read a tensor of shape {tuple(found.shape)} from the model's output for {rows} rows: the "
            f"output must hold one row per input along dim 0, as a tensor, a tuple, a dict, a dataclass or an "
            f"object's tensor attributes (got {type(out).__name__}); pass `output=` to select the tensor"
        )
    return found


def _find_tensor(out: object, keys: tuple[str, ...]) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out
    for key in keys:
        if isinstance(out, dict) and isinstance(out.get(key), torch.Tensor):
            return cast(torch.Tensor, out[key])
        if isinstance(getattr(out, key, None), torch.Tensor):
            return cast(torch.Tensor, getattr(out, key))
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def pad_ragged(rows: list[torch.Tensor], fill: float) -> torch.Tensor:
    """Stack tensors (n_i, ...) into (len(rows), max n_i, ...), padding with ``fill``.

    Args:
        rows: the tensors, one per row, of equal trailing shape (at least one).
        fill: the padding value.

    Returns:
        The padded stack.
    """
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=fill)
