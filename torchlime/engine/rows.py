"""The rows of one call: through the model in chunks, then into the normal equations (``Run``).

Rows reach the model in ``RowOrder``s: the first gives the B unperturbed inputs (they choose
the default targets), then every input's samples 1..S-1, input-major; later rounds of
``n_samples="auto"`` give samples ``s_lo..s_hi-1`` of the inputs still being sampled (``run_passes``).
The fit accumulates the weighted normal equations of any inputs and sample range, drawing the masks
again in fixed blocks of ``FIT_BLOCK`` samples; for a surrogate that fits in sample space it only weighs
and keeps them (no (F, F) sums are formed). The model sees each row exactly once.
"""

from __future__ import annotations

from typing import Optional, Sequence, TypeVar, Union, cast

import torch

from torchlime.engine.fit import FIT_BLOCK as FIT_BLOCK
from torchlime.engine.fit import Draw, MaskBlocks, accumulate_blocks, drawn_blocks
from torchlime.engine.row_spans import active_indices, input_spans, into_scores, pass_rows, row_coords, sample_rows
from torchlime.engine.settings import Settings
from torchlime.stages.features import FeatureMap
from torchlime.stages.fixed_cost import columns, record_function, zeros
from torchlime.stages.forward.chunking import ChunkPlan
from torchlime.stages.forward.model import eval_mode, select_output
from torchlime.stages.forward.passes import run_rows
from torchlime.stages.forward.targets import resolve_target
from torchlime.stages.normal import NormalAccumulator
from torchlime.stages.perturb.blend import Chunk, OrderedPerturbFn
from torchlime.stages.perturb.record import Perturbation
from torchlime.stages.weighting import Kernel
from torchlime.targets.base import Bound, Target, cat_rows, take_rows

T = TypeVar("T")
#: a pass whose masks hold at most this many elements draws them at once, not chunk by chunk: the same
#: bits (the numbers depend only on each row's coordinates), a few small tensor operations instead of
#: a few dozen per chunk
_PASS_ELEMENTS = 1 << 22


def ready(value: Optional[T], what: str) -> T:
    """``value``, once the forward pass has set it.

    Args:
        value: a ``Run`` attribute set by the first forward pass (None before).
        what: its name, for the error.

    Returns:
        ``value``.

    Raises:
        RuntimeError: when it is not set yet (the unperturbed inputs are scored first).
    """
    if value is None:
        raise RuntimeError(f"{what} is not known before the unperturbed inputs are scored (Run.forward)")
    return value


class RowOrder:
    """Rows of one forward pass: sample ``s_lo..s_hi-1`` of each input in ``active`` (input-major).

    When ``s_lo == 0`` they are preceded by the unperturbed inputs (sample 0) of all of them.

    Args:
        active: the inputs, in order.
        s_lo: the first sample.
        s_hi: the sample after the last.
        device: where the row coordinates go.
    """

    def __init__(self, active: Sequence[int], s_lo: int, s_hi: int, device: torch.device) -> None:
        self.active, self.device = list(active), device
        self.refs = len(self.active) if s_lo == 0 else 0
        self.s_lo = max(s_lo, 1)
        self.width = s_hi - self.s_lo
        self.n_rows = self.refs + len(self.active) * self.width
        self._active = active_indices(self.active, device)

    def input_of(self, r: int) -> int:
        """The input of row ``r``.

        Args:
            r: a row of the pass.

        Returns:
            The index of its input.
        """
        return self.active[r] if r < self.refs else self.active[(r - self.refs) // self.width]

    def coords(self, start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor, int, int]:
        """The coordinates of rows ``start:stop``.

        Args:
            start: the first row.
            stop: the row after the last.

        Returns:
            ``(inputs, samples, first, last)``: long (c,) each, then two host ints (``span``).
        """
        b, s = row_coords(self.active, self._active, (self.refs, self.width, self.s_lo), start, stop)  # cached
        return (b, s, *self.span(start, stop))

    def covers(self, active: Sequence[int], s_lo: int, s_hi: int) -> bool:
        """Whether samples ``s_lo..s_hi-1`` of the inputs ``active`` are rows of this pass, in its order.

        Args:
            active: the inputs (the same, in the same order, as the pass's).
            s_lo: the first sample.
            s_hi: the sample after the last.

        Returns:
            True when ``rows_of`` can place every one of them.
        """
        first_ok = s_lo >= self.s_lo or (self.refs > 0 and s_lo >= 0)
        return list(active) == self.active and first_ok and s_hi <= self.s_lo + self.width

    def rows_of(self, j0: int, n: int, s_lo: int, s_hi: int) -> torch.Tensor:
        """The rows of samples ``s_lo..s_hi-1`` of the inputs at positions ``j0..j0+n-1`` (``covers``).

        Args:
            j0: the position of the first input in ``active``.
            n: the number of inputs.
            s_lo: the first sample.
            s_hi: the sample after the last.

        Returns:
            Long (n, s_hi - s_lo) row indices of the pass.
        """
        return sample_rows((self.refs, self.width, self.s_lo), j0, n, s_lo, s_hi, self.device)  # cached

    def span(self, start: int, stop: int) -> tuple[int, int]:
        """The inputs of rows ``start:stop``, on the host.

        Args:
            start: the first row.
            stop: the row after the last.

        Returns:
            ``(first, last)``: equal when the rows are samples of one input (which then need not be
            gathered); ``(0, -1)`` otherwise.
        """
        first, last = self.input_of(start), self.input_of(stop - 1)
        single = len(self.active) == 1 or (start >= self.refs and first == last)
        return (first, first) if single else (0, -1)


class Run:
    """The forward pass and the fit of one call (see the module docstring).

    Args:
        settings: the call's resolved records and objects: the model, ``target``, ``n_samples`` (the
            most samples any input can get: scores are stored for that many), the surrogate (the
            dtype of the accumulated products; one that fits on the samples gets no normal equations:
            the samples are only weighed and kept), ``output``, ``softmax``, ``return_samples`` and
            ``progress``.
        fmap: the call's relabelled feature map.
        draw: masks (c, F) of rows (input b, sample s).
        perturbation: how rows become model inputs.
        kernel: the kernel bound to the call.
        plan: the chunk sizes.
        placement: the model's device and floating dtype.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        fmap: FeatureMap,
        draw: Draw,
        perturbation: Perturbation,
        kernel: Kernel,
        plan: ChunkPlan,
        placement: tuple[torch.device, torch.dtype],
    ) -> None:
        self.settings = settings
        self.fmap, self.draw, self.perturbation, self.kernel = fmap, draw, perturbation, kernel
        self.plan, self.placement, self.sample_space = plan, placement, settings.surrogate.sample_space
        self.keep = settings.call.return_samples or self.sample_space
        self.batch = fmap.n_features.shape[0]
        self.device = fmap.n_features.device
        self.width: Optional[int] = None
        self.targets: Optional[torch.Tensor] = None
        self.scores: Optional[torch.Tensor] = None
        self.acc: Optional[NormalAccumulator] = None
        self.kept_masks: list[torch.Tensor] = []
        self.drawn: Optional[tuple[RowOrder, torch.Tensor]] = None  # the last pass's masks, if drawn at once
        self.kept_weights: list[torch.Tensor] = []
        self.originals: object = None  # the unperturbed inputs as the model sees them (input-space kernels)
        self.dists: Optional[torch.Tensor] = None
        self._reference: Optional[torch.Tensor] = None
        self._ref_parts: list[object] = []  # raw outputs of the unperturbed inputs (structured targets)
        self._kept: list[tuple[object, torch.Tensor, torch.Tensor]] = []  # (output, b, s) scored after the pass
        self.bound: Optional[Bound] = None  # a structured target, bound to the unperturbed inputs
        self.scale: Optional[torch.Tensor] = None  # per-input divisor of the distances (kernel.scale)
        if kernel.space == "input":  # the unperturbed inputs as the model sees them
            every = torch.arange(self.batch, device=self.device)
            self.originals = perturbation.build(
                self.chunk(every, torch.zeros_like(every), 0, 0 if self.batch == 1 else -1)
            )
            self.dists = torch.zeros(self.batch, settings.n_samples, device=self.device)

    def chunk(self, b: torch.Tensor, s: torch.Tensor, first: int, last: int, z: Optional[torch.Tensor] = None) -> Chunk:
        """The ``Chunk`` of rows (input b, sample s), with the always-kept column if the map has one.

        Args:
            b: long (c,) the input of every row.
            s: long (c,) the sample of every row.
            first: the first input of the rows.
            last: the last input (equal to ``first`` for one input, else -1).
            z: bool (c, F) their masks, already drawn (None: drawn here).
        """
        if z is None:
            z = self.draw(b, s)
        if self.fmap.fixed:
            z = torch.nn.functional.pad(z, (0, 1), value=True)
        return Chunk(z, b, s, first, last)

    # ---------------------------------------------------------------- forward
    def forward(self, order: RowOrder) -> None:
        """Score every row of ``order`` (the model sees each exactly once).

        Args:
            order: the rows of the pass.
        """
        z_all = z_in = None
        if order.n_rows * max(self.fmap.f_max, 1) <= _PASS_ELEMENTS:  # a small pass: all at once
            with record_function("torchlime::masks"):
                b_all, s_all, _, _ = order.coords(0, order.n_rows)
                z_all = self.draw(b_all, s_all)
                z_in = torch.nn.functional.pad(z_all, (0, 1), value=True) if self.fmap.fixed else z_all  # once
        self.drawn = None if z_all is None else (order, z_all)  # the fit reads them again
        perm, keys = self._sorted(order, z_in, b_all) if z_in is not None else (None, None)

        def rows(start: int, stop: int) -> tuple[torch.Tensor, torch.Tensor]:
            """Inputs and samples (c,) of rows ``start:stop`` (a large pass computes them per chunk)."""
            if z_all is None:
                return order.coords(start, stop)[:2]
            if perm is not None:
                return b_all[perm[start:stop]], s_all[perm[start:stop]]
            return b_all[start:stop], s_all[start:stop]

        def build(start: int, stop: int) -> object:
            with record_function("torchlime::masks"):
                b, s = rows(start, stop)
                z = None if z_in is None else z_in[start:stop] if perm is None else z_in[perm[start:stop]]
                span = order.span(start, stop) if perm is None else (0, 0) if self.batch == 1 else (0, -1)
                c = self.chunk(b, s, *span) if z is None else Chunk(z, b, s, *span)  # z: padded once per pass
                c = c if keys is None else c._replace(keys=tuple(keys[start:stop]))
                if perm is None and span[1] < 0:  # several inputs: the blend reads each one as it is
                    c = c._replace(spans=input_spans(order.active, order.refs, order.width, start, stop))
            with record_function("torchlime::blend"):
                x = self.perturbation.build(c)
            if self.dists is not None:  # before the model sees the chunk (a model may write into its input)
                self.dists[b, s] = self.kernel.distances(x, self.originals, b).to(self.device, torch.float32)
            return x

        def consume(out: object, x: object, start: int, stop: int) -> None:
            with record_function("torchlime::rows"):
                self._consume(order, out, start, stop, *rows(start, stop))

        model, progress = self.settings.model, self.settings.config.progress
        with eval_mode(model):
            run_rows(model, build, consume, order.n_rows, self.plan, *self.placement, progress)
        self.score_kept(order if perm is None else None)

    def _sorted(
        self, order: RowOrder, z: torch.Tensor, b_all: torch.Tensor
    ) -> tuple[Optional[torch.Tensor], Optional[list[int]]]:
        """The pass's rows sorted by the perturbation's ``order_key`` (``OrderedPerturbFn``), with the keys.

        The unperturbed inputs stay first; the keys come to the host once per pass.

        Returns:
            ``(perm, keys)``: long (n_rows,) row order and its keys, or ``(None, None)`` (no key).
        """
        fn = self.perturbation.perturb_fn
        if not isinstance(fn, OrderedPerturbFn):
            return None, None
        key = fn.order_key(self.perturbation.index, z, b_all)
        perm = torch.cat(
            [torch.arange(order.refs, device=key.device), torch.argsort(key[order.refs :], stable=True) + order.refs]
        )
        return perm, key[perm].tolist()

    def _consume(self, order: RowOrder, out: object, start: int, stop: int, b: torch.Tensor, s: torch.Tensor) -> None:
        if isinstance(self.settings.target, Target):
            self._consume_structured(order, out, start, stop, b, s)
            return
        sc = select_output(out, self.settings.call.output, stop - start)
        if self.width is None:
            self.width = sc.shape[1]
        if sc.shape[1] != self.width:
            raise ValueError(
                f"the model's output width changed: expected {self.width} columns (from its first "
                f"call), got {sc.shape[1]} at rows {start}..{stop - 1}; the explained model must "
                f"return the same outputs whatever the batch size"
            )
        sc = sc.double() if sc.dtype == torch.float64 else sc.float()  # a float64 model keeps its precision
        sc = (sc.softmax(1) if self.settings.call.softmax else sc).to(self.device)
        refs = order.refs
        if start < refs:  # unperturbed inputs: full scores, they choose the targets
            if self._reference is None:
                self._reference = torch.empty(refs, self.width, dtype=sc.dtype, device=self.device)
            self._reference[start : min(stop, refs)] = sc[: refs - start]
            if stop >= refs:
                self.targets = resolve_target(self.settings.target, self._reference)
                shape = (self.batch, self.settings.n_samples, self.targets.shape[1])
                self.scores = torch.empty(shape, dtype=self._reference.dtype, device=self.device)
                torch.gather(self._reference, 1, self.targets, out=self.scores[:, 0])  # written in place: one operator
        if stop > refs:
            lo = max(start, refs) - start
            b, s = b[lo:], s[lo:]
            targets = ready(self.targets, "the targets")
            # one input: every row's targets are its own, a broadcast view (no operator)
            of_rows = targets.expand(b.shape[0], -1) if self.batch == 1 else targets[b]
            ready(self.scores, "the scores")[b, s] = sc[lo:].gather(1, of_rows)

    def _consume_structured(
        self, order: RowOrder, out: object, start: int, stop: int, b: torch.Tensor, s: torch.Tensor
    ) -> None:
        """``_consume`` for a ``Target`` object: it reads the raw output (``torchlime.targets.base``)."""
        target, output = cast(Target, self.settings.target), self.settings.call.output
        if output is not None:
            out = output(out) if callable(output) else cast(dict[Union[int, str], object], out)[output]
        refs = order.refs
        if start < refs:  # unperturbed inputs: their raw outputs bind the targets
            self._ref_parts.append(take_rows(out, 0, min(stop, refs) - start))
            if stop >= refs:
                reference = cat_rows(self._ref_parts)
                self._ref_parts = []
                self.bound = target.bind(reference, self.batch)
                self.targets = self.bound.labels.to(self.device)
                t = self.targets.shape[1]
                self.scores = torch.empty(self.batch, self.settings.n_samples, t, device=self.device)
                sample_0 = zeros((self.batch,), torch.long, self.device)  # scored with the pass's rows (whole_pass)
                self._kept.append((reference, columns(self.batch, self.device), sample_0))
                self._score_now()
        if stop > refs:
            lo = max(start, refs) - start
            part = out if lo == 0 else take_rows(out, lo, stop - start)  # only the first chunk holds both kinds
            self._kept.append((part, b[lo:], s[lo:]))
            self._score_now()

    def _score_now(self) -> None:
        """Score the rows kept now, unless the target scores a whole pass at once (after its last chunk)."""
        if not ready(self.bound, "the targets").whole_pass:
            self.score_kept()

    def score_kept(self, order: Optional[RowOrder] = None) -> None:
        """Score the rows kept (``_kept``) at once: a chunk's, or a pass's (``order``: kept in its order)."""
        if self._kept:
            (parts, b, s), scores = (list(x) for x in zip(*self._kept)), ready(self.scores, "the scores")
            whole, rows = pass_rows(order, self.batch, scores.shape[1], b)  # every row, in order: no scatter
            self._kept, bound = [], ready(self.bound, "the targets")
            sc = bound.score(cat_rows(parts), rows).float().to(self.device)
            self.scores = into_scores(scores, sc, rows, s, whole)

    # ---------------------------------------------------------------- fit
    def accumulate(self, active: Sequence[int], s_lo: int, s_hi: int) -> None:
        """Add samples ``s_lo..s_hi-1`` of the inputs ``active`` to the normal equations (``fit.accumulate_blocks``).

        Args:
            active: the inputs.
            s_lo: the first sample.
            s_hi: the sample after the last.
        """
        targets, scores = ready(self.targets, "the targets"), ready(self.scores, "the scores")
        if self.acc is None and not self.sample_space:
            dtype = self.settings.surrogate.dtype
            self.acc = NormalAccumulator(self.batch, self.fmap.f_max, targets.shape[1], scores[:, 0], dtype)
        idx = active_indices(list(active), self.device)
        masks = self.mask_blocks(active, s_lo, s_hi)
        every = list(active) == list(range(self.batch))  # all inputs, in order
        rest = (self.fmap.valid, idx, s_lo, s_hi, self.dists, self.scale, self.keep, every)
        kept = accumulate_blocks(self.acc, masks, scores, self.kernel, *rest)
        self.kept_masks += kept[0]
        self.kept_weights += kept[1]

    def mask_blocks(self, active: Sequence[int], s_lo: int, s_hi: int) -> MaskBlocks:
        """The masks of blocks of samples ``s_lo..s_hi-1`` of the inputs ``active``: the last pass's, or drawn again.

        Args:
            active: the inputs.
            s_lo: the first sample.
            s_hi: the sample after the last.

        Returns:
            ``masks(b, g0, s0, s1)`` (``fit.MaskBlocks``): the same bits either way.
        """
        drawn = self.drawn if self.drawn is not None and self.drawn[0].covers(active, s_lo, s_hi) else None
        if drawn is None:
            return drawn_blocks(self.draw, self.fmap.f_max, self.device)
        order, kept = drawn

        def masks(b: torch.Tensor, g0: int, s0: int, s1: int) -> torch.Tensor:
            with record_function("torchlime::masks"):  # the forward pass's masks of these rows: the same bits
                return kept[order.rows_of(g0, b.shape[0], s0, s1)]

        return masks
