"""The training options of ``AmortizedExplainer.fit`` as one typed set (``FitOptions``) and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from torch import nn
from typing_extensions import TypedDict

from torchlime._util.checks import check_positive_int, describe

#: N of the reference LIME that ``report`` compares with
REFERENCE_SAMPLES = 4096
#: the jittered copies of a table row made by default, and their spread in column standard deviations
TABLE_COPIES, JITTER = 19, 0.3
#: the losses ``train`` knows: squared errors in the labels' overall scale, or in each row's own scale
LOSSES = ("absolute", "relative")
#: the floor of a row's own scale in the relative loss, as a fraction of the labels' overall scale
ROW_FLOOR = 0.05


class FitOptions(TypedDict, total=False):
    """How ``AmortizedExplainer.fit`` trains the head (every key optional).

    Attributes:
        epochs: passes of the training over the inputs (default 30).
        head: your own ``nn.Module`` (trained on a copy: yours is not changed), mapping (B, *input_shape)
            to (B, K, F + 1), or to that and (B, D) features; None (the default): by modality.
        holdout: the fraction of inputs held out from training, for ``report`` and the distances (0.1).
        batch_size: inputs per training step (64).
        lr: Adam's learning rate (3e-3).
        report_samples: N of the reference LIME of ``report`` (4096); None: no report.
        progress: show bars over the labels and the epochs (False).
        copies: jittered copies of every training input, labelled by the engine at the same N and trained
            on beside it (each value moved by ``JITTER`` times its column's standard deviation, Gaussian);
            None (the default): 19 for table rows with the built-in head, 0 otherwise. The held-out inputs
            stay the given ones.
        loss: "absolute" (squared errors in the labels' overall scale) or "relative" (each labelled row's
            coefficient errors in that row's own scale, floored at ``ROW_FLOOR`` of the overall one, so
            that rows of small coefficients, such as saturated probabilities, count as much as the others);
            None (the default): "relative" for the table head (``MLPHead``, built or given), "absolute" otherwise.
    """

    epochs: int
    head: Optional[nn.Module]
    holdout: float
    batch_size: int
    lr: float
    report_samples: Optional[int]
    progress: bool
    copies: Optional[int]
    loss: Optional[str]


@dataclass(frozen=True)
class Training:
    """``FitOptions`` checked, with their defaults."""

    epochs: int = 30
    head: Optional[nn.Module] = None
    holdout: float = 0.1
    batch_size: int = 64
    lr: float = 3e-3
    report_samples: Optional[int] = REFERENCE_SAMPLES
    progress: bool = False
    copies: Optional[int] = None
    loss: Optional[str] = None

    @classmethod
    def of(cls, options: FitOptions) -> Training:
        """The checked options.

        Raises:
            TypeError / ValueError: an unknown key (named, with the keys taken) or a bad value (named).
        """
        unknown = sorted(set(options) - set(FitOptions.__annotations__))
        if unknown:
            taken = sorted(FitOptions.__annotations__)
            raise TypeError(f"AmortizedExplainer.fit got unknown keyword(s) {unknown}; it takes {taken}")
        got = cls(**options)
        check_positive_int(got.epochs, "epochs")
        check_positive_int(got.batch_size, "batch_size")
        if got.report_samples is not None:
            check_positive_int(got.report_samples, "report_samples", minimum=2)
        if got.head is not None and not isinstance(got.head, nn.Module):
            raise TypeError(f"`head` must be None (a built-in head) or an nn.Module, got {describe(got.head)}")
        if isinstance(got.holdout, bool) or not isinstance(got.holdout, (int, float)) or not 0 <= got.holdout < 1:
            raise ValueError(f"`holdout` must be a number in [0, 1), got {describe(got.holdout)}")
        if isinstance(got.lr, bool) or not isinstance(got.lr, (int, float)) or not got.lr > 0:
            raise ValueError(f"`lr` must be a positive number, got {describe(got.lr)}")
        if got.copies is not None:
            check_positive_int(got.copies, "copies", minimum=0)
        if got.loss is not None and got.loss not in LOSSES:
            raise ValueError(f"`loss` must be None or one of {list(LOSSES)}, got {describe(got.loss)}")
        if not isinstance(got.progress, bool):
            raise TypeError(f"`progress` must be True or False, got {describe(got.progress)}")
        return got
