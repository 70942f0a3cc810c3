"""How an explanation changes with the kernel width: ``width_sweep`` refits its kept samples, no model calls.

For each width the explanation is fitted again (``Explanation.refit``) with its own exponential kernel at
that width, and compared: its weighted R² under its own weighting (a different yardstick for every width:
it cannot rank them), the K-fold held-out error under ONE fixed reference weighting (the criterion of
``width="auto"``, ``torchlime.engine.fit``), the top-k overlap with the explanation itself (the width it
was made with, or the one ``width="auto"`` chose) and the coefficients whose sign flipped against it.
"""

from __future__ import annotations

import dataclasses
import html
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Union, cast

import torch

from torchlime._util.checks import check_positive_int, describe, require
from torchlime._util.colours import BLUE_HEX, RED_HEX
from torchlime.engine.explanation import Explanation
from torchlime.engine.fit import N_FOLDS, cross_validate, reference_width
from torchlime.engine.quality import UnreliableExplanationWarning
from torchlime.engine.refit import recorded_kernel, recorded_surrogate, sample_distances
from torchlime.metrics._common import check_explanation
from torchlime.stages.weighting import ExponentialKernel

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["width_sweep", "WidthSweep"]

_COLUMNS = ("width", "R² (own)", "held-out error", "top-k Jaccard", "sign flips")


@dataclass(frozen=True)
class WidthSweep:
    """The table of ``width_sweep``: one row per width (means over inputs and their real targets).

    Attributes:
        widths: the widths swept, in the order given.
        r2: per width, the weighted R² under its own weighting.
        heldout_error: per width, the held-out error under the fixed reference weighting (1 - out-of-sample
            R², mean over folds; ``engine.fit.cross_validate``).
        jaccard: per width, the top-k Jaccard index of its features (by |coefficient|) and the explanation's.
        sign_flips: per width, how many coefficients (input, target, feature) have the opposite sign of the
            explanation's (zeros flip nothing).
        reference: the width of the fixed weighting of ``heldout_error``.
        compared_width: the explanation's own width (the chosen one for ``width="auto"``).
        k: the size of the top-k sets.
    """

    widths: tuple[float, ...]
    r2: tuple[float, ...]
    heldout_error: tuple[float, ...]
    jaccard: tuple[float, ...]
    sign_flips: tuple[int, ...]
    reference: float
    compared_width: float
    k: int

    def rows(self) -> list[tuple[float, float, float, float, int]]:
        """The table's rows: ``(width, r2, heldout_error, jaccard, sign_flips)`` per width.

        Returns:
            One tuple per width.
        """
        return list(zip(self.widths, self.r2, self.heldout_error, self.jaccard, self.sign_flips))

    def _note(self) -> str:
        marked = ", marked *" if any(map(self._own, self.widths)) else ""
        return (
            f"held-out error under the fixed weighting of width {self.reference:.4g}; top-{self.k} Jaccard and "
            f"sign flips against the explanation (width {self.compared_width:.4g}{marked})"
        )

    def _own(self, width: float) -> bool:
        return math.isclose(width, self.compared_width)

    def _cells(self) -> list[list[str]]:
        return [
            [f"{w:.4g}{' *' if self._own(w) else ''}", f"{r:.3f}", f"{e:.4f}", f"{j:.3f}", str(n)]
            for w, r, e, j, n in self.rows()
        ]

    def __str__(self) -> str:
        """A plain-text table, one line per width, and what the columns compare with."""
        cells = [list(_COLUMNS), *self._cells()]
        sizes = [max(len(row[c]) for row in cells) for c in range(len(_COLUMNS))]
        lines = ["  ".join(v.rjust(s) for v, s in zip(row, sizes)) for row in cells]
        return "\n".join([*lines, self._note()])

    def _repr_html_(self) -> str:
        """An HTML table for notebooks."""
        head = "".join(f"<th>{html.escape(c)}</th>" for c in _COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self._cells())
        return f"<table><tr>{head}</tr>{body}</table><p>{html.escape(self._note())}</p>"

    def plot(self) -> Figure:
        """Two panels against the width (log scale): the errors, and the agreement with the explanation.

        Left: the held-out error under the fixed weighting (red) and 1 - the weighted R² under each width's
        own weighting (blue); right: the top-k Jaccard index (blue) and the sign flips (red). A dashed line
        marks the explanation's width.

        Returns:
            The matplotlib ``Figure``.

        Raises:
            ImportError: without matplotlib (names the ``viz`` extra).
        """
        plt = require("matplotlib.pyplot", "viz", "WidthSweep.plot")
        order = sorted(range(len(self.widths)), key=lambda i: self.widths[i])
        x = [self.widths[i] for i in order]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
        left.plot(
            x, [self.heldout_error[i] for i in order], "o-", color=RED_HEX, label="held-out error (fixed weighting)"
        )
        left.plot(x, [1 - self.r2[i] for i in order], "s--", color=BLUE_HEX, label="1 - R² (own weighting)")
        left.set_ylabel("error")
        right.plot(x, [self.jaccard[i] for i in order], "o-", color=BLUE_HEX, label=f"top-{self.k} Jaccard")
        right.set_ylabel(f"top-{self.k} Jaccard vs the explanation")
        right.set_ylim(0, 1.05)
        flips = right.twinx()
        flips.plot(x, [self.sign_flips[i] for i in order], "s--", color=RED_HEX, label="sign flips")
        flips.set_ylabel("sign flips")
        flips.set_ylim(0, max(1, *self.sign_flips) * 1.1)
        flips.yaxis.get_major_locator().set_params(integer=True)
        for ax in (left, right):
            ax.set_xscale("log")
            ax.set_xlabel("kernel width")
            ax.axvline(self.compared_width, color="0.5", linestyle=":")
        left.legend(fontsize="small")
        right.legend(
            right.get_legend_handles_labels()[0] + flips.get_legend_handles_labels()[0],
            right.get_legend_handles_labels()[1] + flips.get_legend_handles_labels()[1],
            fontsize="small",
        )
        return cast("Figure", fig)


def _check_widths(widths: object) -> list[float]:
    """A non-empty sequence of finite numbers > 0, as floats."""
    values = widths.tolist() if isinstance(widths, torch.Tensor) and widths.ndim == 1 else widths
    ok = isinstance(values, (list, tuple)) and len(values) > 0
    ok = ok and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in cast(Sequence[object], values))
    if not ok or not all(0 < w < math.inf for w in cast(Sequence[float], values)):
        raise ValueError(f"`widths` must be a non-empty sequence of finite numbers > 0, got {describe(widths)}")
    return [float(w) for w in cast(Sequence[float], values)]


def width_sweep(explanation: Explanation, widths: Union[Sequence[float], torch.Tensor], k: int = 5) -> WidthSweep:
    """Refit an explanation at several kernel widths and tabulate how it changes (module docstring).

    The explanation's own kernel (an ``ExponentialKernel``: ``kernel="lime"``, a float width, ...) keeps its
    distance, space and scale; only the width changes. The model is never called.

    Args:
        explanation: an explanation made with ``return_samples=True`` and an exponential kernel.
        widths: the widths to try (numbers > 0), a sequence or a 1-D tensor (J,).
        k: the size of the top-k sets.

    Returns:
        The ``WidthSweep`` table (``print`` it, or ``.plot()`` it).

    Raises:
        TypeError: ``explanation`` not an ``Explanation``.
        ValueError: bad ``widths`` or ``k``, an explanation without kept samples (names ``return_samples``),
            or not made with an exponential kernel.

    Example:
        >>> import torchlime
        >>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 2))
        >>> exp = torchlime.explain(model, torch.rand(2, 8), torch.arange(8).view(1, 8), n_samples=64,
        ...                         return_samples=True)
        >>> table = width_sweep(exp, [0.1, 0.25, 1.0], k=3)
        >>> table.widths, table.sign_flips[1]
        ((0.1, 0.25, 1.0), 0)
    """
    exp = check_explanation(explanation)
    values = _check_widths(widths)
    k = check_positive_int(k, "k")
    if exp.samples is None or exp.outputs is None:
        raise ValueError(
            "`explanation` keeps no samples: width_sweep refits the masks and model outputs of its call; "
            "explain with return_samples=True to keep them"
        )
    if exp.samples.shape[1] < 2 * N_FOLDS + 1:
        raise ValueError(
            f"`explanation` must keep at least {2 * N_FOLDS + 1} samples per input for the {N_FOLDS}-fold held-out "
            f"error, got {exp.samples.shape[1]}: explain with a larger n_samples"
        )
    base = recorded_kernel(exp) if exp.config is not None else None
    if not isinstance(base, ExponentialKernel):
        made = (exp.run.kernel if exp.run is not None else "?") if base is None else repr(base)
        raise ValueError(
            f"`explanation` must be made with an ExponentialKernel (kernel='lime', a float width, ...) recorded "
            f"in its config, whose width width_sweep varies; it was made with {made}"
        )
    chosen = None if exp.run is None else exp.run.width_auto
    own = chosen.chosen if chosen is not None else float(cast(float, base.width))
    masks, scores, valid = exp.samples, exp.outputs, exp.valid
    real = torch.ones_like(exp.score, dtype=torch.bool) if exp.target_valid is None else exp.target_valid
    real = real.to(exp.coef.device)
    counted = real.unsqueeze(-1) & valid.unsqueeze(1)  # (B, T, F) real coefficients
    r2, jaccard, flips = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreliableExplanationWarning)
        for width in values:  # a few refits, each batched over inputs, targets and samples
            fitted = exp.refit(kernel=dataclasses.replace(base, width=width, choice=None))
            r2.append(fitted.score.double()[real].mean())
            jaccard.append(_top_k_jaccard(fitted.coef, exp.coef, counted, k)[real].mean())
            flips.append(((fitted.coef * exp.coef < 0) & counted).sum().double())
    d, _ = sample_distances(exp, base, masks)
    d = d.double() * base.scale
    ref = reference_width(d)
    surrogate = recorded_surrogate(exp)
    grid = torch.tensor(values, dtype=torch.float64, device=ref.device)
    error, _, _ = cross_validate(masks, scores, d, valid, surrogate, grid, ref, exp.target_valid, k=k)
    table = torch.stack([torch.stack(r2), error, torch.stack(jaccard), torch.stack(flips)]).tolist()
    return WidthSweep(
        widths=tuple(values),
        r2=tuple(table[0]),
        heldout_error=tuple(table[1]),
        jaccard=tuple(table[2]),
        sign_flips=tuple(int(n) for n in table[3]),
        reference=float(ref),
        compared_width=own,
        k=k,
    )


def _top_k_jaccard(a: torch.Tensor, b: torch.Tensor, counted: torch.Tensor, k: int) -> torch.Tensor:
    """Float64 (B, T) Jaccard index of the top-k sets by |coefficient| of a and b (B, T, F)."""

    def top(c: torch.Tensor) -> torch.Tensor:
        key = c.abs().double().masked_fill(~counted, -math.inf)
        idx = key.argsort(dim=-1, descending=True, stable=True)[..., : min(k, c.shape[-1])]
        return torch.zeros_like(counted).scatter(-1, idx, True) & counted

    sa, sb = top(a), top(b)
    union = (sa | sb).sum(-1).double()
    return (sa & sb).sum(-1).double() / union.clamp_min(1)
