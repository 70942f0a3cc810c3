"""``ExplainCallback``: explain fixed probe inputs every k optimizer steps of a Lightning run.

A ``Callback`` over ``torchlime.integrations.probe.ProbeExplainer`` (no gradients, modes and RNG states
restored, so training is unchanged; optionally on its own CUDA stream with ``stream=True``). It
explains the probe at the start of training (step 0: the initial weights) and after every
``every``-th optimizer step (``trainer.global_step``; once per step, whatever the gradient
accumulation), on the global-zero process only, and logs to every logger of the trainer: a
TensorBoard logger gets the figures and heatmaps of ``torchlime.integrations.tensorboard_probe.
log_explanation``; any other logger gets the scalars through ``log_metrics``.

Lightning is optional (``pip install lightning``; ``pytorch_lightning`` works too) and imported
only when ``ExplainCallback`` is first used::

    from torchlime import Call, Images
    from torchlime.integrations.lightning_callback import ExplainCallback

    cb = ExplainCallback(probe_images, Images(), call=Call(n_samples=256), every=200)
    trainer = lightning.Trainer(callbacks=[cb], logger=TensorBoardLogger("runs"))
    trainer.fit(module, loader)
    cb.history                     # [(0, Explanation), (200, Explanation), ...]

With ``lightning`` installed the callback subclasses ``lightning.pytorch.Callback``, else
``pytorch_lightning.Callback`` (a trainer only accepts callbacks of its own package).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, cast

import torch

from torchlime._util.checks import check_positive_int, check_tensor, require
from torchlime.engine.config import Call
from torchlime.engine.explainer import Explainer, ModalitySpec
from torchlime.engine.explanation import Explanation
from torchlime.integrations.probe import ProbeExplainer
from torchlime.integrations.tensorboard_probe import Writer, log_explanation, quality_scalars

__all__ = ["ExplainCallback", "ExplainCallbackLogic"]  # noqa: F822 - ExplainCallback: module __getattr__


class Trainer(Protocol):
    """What the callback reads of a Lightning ``Trainer`` (besides its ``loggers``, read if present)."""

    @property
    def global_step(self) -> int:
        """Optimizer steps taken."""
        ...

    @property
    def is_global_zero(self) -> bool:
        """Whether this is the process that logs."""
        ...


class ExplainCallbackLogic:
    """What ``ExplainCallback`` does, without Lightning (see the module docstring).

    Args:
        probe_inputs: (B, ...) fixed inputs (moved to the module's device when training starts).
        modality: as in ``ProbeExplainer``: the input kind (``torchlime.Images(...)``, ...) or a feature map.
        explainer: how to explain (``torchlime.Explainer``), as in ``ProbeExplainer``.
        call: what to explain (``torchlime.Call(target=..., n_samples=...)``), as in ``ProbeExplainer``.
        every: explain after every ``every``-th optimizer step (and at step 0).
        log_images: log heatmaps to TensorBoard loggers.
        tag: prefix of the logged names.
        stream: run the explanations on a dedicated CUDA stream, as in ``ProbeExplainer``.
        max_history: the most explanations ``history`` keeps (None: all), as in ``ProbeExplainer``.
        sink: optional ``sink(step, explanation)`` called with every explanation, as in ``ProbeExplainer``.
    """

    def __init__(  # noqa: PLR0913
        self,
        probe_inputs: torch.Tensor,
        modality: ModalitySpec,
        *,
        explainer: Optional[Explainer] = None,
        call: Optional[Call] = None,
        every: int = 100,
        log_images: bool = True,
        tag: str = "torchlime",
        stream: bool = False,
        max_history: Optional[int] = 256,
        sink: Optional[Callable[[int, Explanation], object]] = None,
    ) -> None:
        check_tensor(probe_inputs, "probe_inputs")
        check_positive_int(every, "every")
        self.probe_inputs = probe_inputs.detach().clone()
        self.features, self.explainer, self.call = modality, explainer, call
        self.every, self.log_images, self.tag = every, log_images, tag
        self.stream, self.max_history, self.sink = stream, max_history, sink
        self.probe: Optional[ProbeExplainer] = None
        self.last_step: Optional[int] = None
        self.seconds_explaining = 0.0

    @property
    def history(self) -> list[tuple[int, Explanation]]:
        """``(global_step, explanation)`` of every explanation kept (CPU tensors)."""
        return [] if self.probe is None else self.probe.history

    def on_fit_start(self, trainer: Trainer, pl_module: torch.nn.Module) -> None:
        """Build the ``ProbeExplainer`` on the module and its device.

        Args:
            trainer: the Lightning ``Trainer``.
            pl_module: the ``LightningModule`` being trained (the explained model).
        """
        device = getattr(pl_module, "device", self.probe_inputs.device)
        features = self.features.to(device) if isinstance(self.features, torch.Tensor) else self.features
        self.probe = ProbeExplainer(
            pl_module,
            self.probe_inputs.to(device),
            features,
            explainer=self.explainer,
            call=self.call,
            every=self.every,
            stream=self.stream,
            max_history=self.max_history,
            sink=self.sink,
        )

    def on_train_start(self, trainer: Trainer, pl_module: torch.nn.Module) -> None:
        """Explain the weights training starts from (step 0, or the resumed step if it is a multiple).

        Args:
            trainer: the Lightning ``Trainer`` (its ``global_step``, ``is_global_zero`` and ``loggers``).
            pl_module: the ``LightningModule`` being trained.
        """
        self._maybe(trainer)

    def on_train_batch_end(
        self, trainer: Trainer, pl_module: torch.nn.Module, outputs: object, batch: object, batch_idx: int
    ) -> None:
        """Explain after every ``every``-th optimizer step.

        Args:
            trainer: the Lightning ``Trainer`` (its ``global_step``, ``is_global_zero`` and ``loggers``).
            pl_module: the ``LightningModule`` being trained.
            outputs: what the training step returned (unused).
            batch: the training batch (unused).
            batch_idx: the batch's index in the epoch (unused).
        """
        self._maybe(trainer)

    def _maybe(self, trainer: Trainer) -> None:
        step = int(trainer.global_step)
        if self.probe is None or step % self.every or step == self.last_step or not trainer.is_global_zero:
            return
        import time

        self.last_step = step
        t0 = time.perf_counter()
        exp = self.probe.explain(step)
        seconds = time.perf_counter() - t0
        self.seconds_explaining += seconds
        images = self.probe.probe_inputs.cpu() if self.probe.probe_inputs.ndim == 4 else None
        for logger in getattr(trainer, "loggers", []):
            writer = getattr(logger, "experiment", None)
            if callable(getattr(writer, "add_scalar", None)) and callable(getattr(writer, "add_images", None)):
                log_explanation(  # a TensorBoard logger's SummaryWriter
                    cast(Writer, writer),
                    exp,
                    step,
                    tag=self.tag,
                    images=images,
                    log_images=self.log_images,
                    seconds=seconds,
                )
            else:
                logger.log_metrics({f"{self.tag}/{k}": v for k, v in quality_scalars(exp, seconds).items()}, step)


_CLASS: Optional[type] = None


def _callback_base() -> type:
    try:
        base: type = require("lightning.pytorch", "lightning", "ExplainCallback").Callback
        return base
    except ImportError:
        try:
            import pytorch_lightning

            return pytorch_lightning.Callback
        except ImportError:
            raise ImportError(
                "ExplainCallback needs the optional package `lightning`: pip install "
                "'torchlime[lightning]' (or pip install lightning)"
            ) from None


def __getattr__(name: str) -> Any:
    """``ExplainCallback`` is built on first use, on the installed Lightning's ``Callback``."""
    global _CLASS
    if name != "ExplainCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _CLASS is None:
        _CLASS = type(
            "ExplainCallback",
            (ExplainCallbackLogic, _callback_base()),
            {
                "__module__": __name__,
                "__doc__": (ExplainCallbackLogic.__doc__ or "").replace(
                    "What ``ExplainCallback`` does, without Lightning",
                    "A Lightning callback explaining probe inputs every k steps",
                ),
            },
        )
    return _CLASS
