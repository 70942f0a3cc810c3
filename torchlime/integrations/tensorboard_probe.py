"""Explanations of probe inputs logged to TensorBoard from a plain PyTorch training loop.

``TensorBoardProbe(probe, writer)`` wraps a ``torchlime.integrations.probe.ProbeExplainer`` (which leaves
training bit-identical: no gradients, modes and RNG states restored, optionally on its own CUDA
stream with ``stream=True``). Call it every step; every ``probe.every`` steps it explains the
probe and writes, under ``tag`` (default ``torchlime``):

* scalars ``weighted_r2/mean``, ``weighted_r2/min`` and ``weighted_r2/input_i`` (mean over
  targets, first ``max_images`` inputs); ``quality/saturated``, ``quality/poor_fit``,
  ``quality/few_samples`` and ``quality/unreliable_inputs`` (how many inputs each flag of
  ``exp.run.quality`` concerns); ``samples_per_second`` (model rows / wall seconds of the
  explanation) and ``seconds``;
* text ``unreliable``: ``exp.run.unreliable`` when a flag is raised;
* images ``heatmap``: the coefficients of the first target (red raises it, blue lowers it, white
  0) over the probe image in grey (``heatmap_rgb``), for images, spectrograms and token rows.

Usage (``pip install tensorboard``)::

    from torch.utils.tensorboard import SummaryWriter
    probe = TensorBoardProbe(ProbeExplainer(net, probe_images, Images(), call=Call(n_samples=256), every=100),
                             SummaryWriter("runs/exp1"))
    for step, (x, y) in enumerate(loader):
        ...; opt.step()
        probe(step)                     # explains and logs at steps 0, 100, 200, ...

``log_explanation(writer, exp, step)`` logs any explanation the same way; ``writer`` is anything
with ``add_scalar`` / ``add_images`` / ``add_text`` (a ``SummaryWriter``, a Lightning
TensorBoardLogger's ``experiment``).
"""

from __future__ import annotations

import time
from typing import Optional, Protocol

import torch

from torchlime._util.checks import check_positive_int, describe, require
from torchlime.engine.explanation import Explanation
from torchlime.integrations.probe import ProbeExplainer


class Writer(Protocol):
    """What the figures are written with: a ``SummaryWriter``, or anything with its ``add_*`` methods."""

    def add_scalar(self, tag: str, scalar_value: float, global_step: int, /) -> object:
        """Write one scalar."""
        ...

    def add_text(self, tag: str, text_string: str, global_step: int, /) -> object:
        """Write one text."""
        ...

    def add_images(self, tag: str, img_tensor: torch.Tensor, global_step: int, /, *, dataformats: str) -> object:
        """Write a batch of pictures."""
        ...

    def add_image(self, tag: str, img_tensor: torch.Tensor, global_step: int, /, *, dataformats: str) -> object:
        """Write one picture."""
        ...


FLAGS = ("saturated", "poor_fit", "few_samples")


def heatmap_rgb(
    exp: Explanation,
    index: int = 0,
    target_index: int = 0,
    image: Optional[torch.Tensor] = None,
    alpha: float = 0.65,
    min_size: int = 64,
) -> torch.Tensor:
    """The coefficients of one (input, target) as an RGB picture (3, H, W) in [0, 1].

    Red raises the target, blue lowers it, white is 0 (scaled by the largest |coefficient|).
    Inputs of more than 2 dims show their first channel; 1-D inputs (tokens, waveforms) a band.
    ``image`` (C, H, W) of the same size is blended in grey beneath; small pictures are enlarged
    (nearest) to at least ``min_size`` pixels on their short side.

    Example:
        >>> x, feats = torch.rand(1, 1, 4, 4), torch.arange(16).view(1, 1, 4, 4) // 4
        >>> exp = Explanation(torch.tensor([[[1.0, -1.0, 0.0, 0.5]]]), torch.zeros(1, 1), torch.ones(1, 1),
        ...                   torch.zeros(1, 1), torch.zeros(1, 1, dtype=torch.long), feats, torch.tensor([4]),
        ...                   (1, 4, 4))
        >>> pic = heatmap_rgb(exp, image=x[0])
        >>> pic.shape, bool(pic.min() >= 0) and bool(pic.max() <= 1)
        (torch.Size([3, 64, 64]), True)
        >>> heatmap_rgb(exp, alpha=1.0)[:, 0, 0].tolist()   # row 0 is feature 0: full red
        [1.0, 0.0, 0.0]
    """
    heat = exp.heatmap(target_index)[index].detach().float().cpu()
    while heat.ndim > 2:
        heat = heat[0]
    if heat.ndim < 2:
        heat = heat.reshape(1, -1).expand(max(1, min_size // 8), -1)
    v = heat / heat.abs().max().clamp_min(1e-12)
    pos, neg = v.clamp(min=0), (-v).clamp(min=0)
    rgb = torch.stack([1 - neg, 1 - pos - neg, 1 - pos]).clamp(0, 1)
    if image is not None and image.ndim == 3 and tuple(image.shape[-2:]) == tuple(rgb.shape[-2:]):
        grey = image.detach().float().cpu().mean(0)
        grey = (grey - grey.min()) / (grey.max() - grey.min()).clamp_min(1e-12)
        rgb = (1 - alpha) * grey.expand(3, -1, -1) + alpha * rgb
    k = max(1, -(-min_size // min(rgb.shape[-2:])))
    return rgb.repeat_interleave(k, -2).repeat_interleave(k, -1) if k > 1 else rgb


def quality_scalars(exp: Explanation, seconds: Optional[float] = None, max_inputs: int = 8) -> dict[str, float]:
    """The figures ``log_explanation`` writes (keys without the tag), as plain floats."""
    score = exp.score.detach().float().cpu()  # padded targets (NaN) are no fits: left out
    valid = torch.ones_like(score, dtype=torch.bool) if exp.target_valid is None else exp.target_valid.cpu()
    real = score[valid]
    low = float(real.min()) if real.numel() else float("nan")
    out = {"weighted_r2/mean": float(real.mean()), "weighted_r2/min": low}
    for i in range(min(score.shape[0], max_inputs)):
        out[f"weighted_r2/input_{i}"] = float(score[i][valid[i]].mean())
    run = exp.run
    quality = {} if run is None else run.quality
    flagged: set[int] = set()
    for flag in FLAGS:
        where = quality.get(flag)
        inputs = {int(w[0]) for w in where if w} if isinstance(where, list) else set()
        flagged |= inputs
        out[f"quality/{flag}"] = float(len(inputs))
    out["quality/unreliable_inputs"] = float(len(flagged))
    seconds = seconds if seconds is not None or run is None else run.seconds_total
    rows = None if run is None else run.model_rows
    if seconds:
        out["seconds"] = float(seconds)
        if rows:
            out["samples_per_second"] = float(rows) / float(seconds)
    return out


def log_explanation(
    writer: Writer,
    exp: Explanation,
    step: int,
    *,
    tag: str = "torchlime",
    images: Optional[torch.Tensor] = None,
    log_images: bool = True,
    max_images: int = 8,
    seconds: Optional[float] = None,
) -> dict[str, float]:
    """Write one explanation's figures (and heatmaps) to ``writer`` at ``step``; return the scalars.

    Args:
        writer: a ``SummaryWriter`` or anything with ``add_scalar``, ``add_images``, ``add_text``.
        exp: the explanation.
        step: the global step the figures are logged under.
        tag: prefix of every logged name.
        images: (B, C, H, W) the explained images, drawn beneath the heatmaps.
        log_images: also write ``tag/heatmap`` (the first target of the first ``max_images`` inputs).
        max_images: inputs with a heatmap and a per-input R² figure.
        seconds: the explanation's wall time (default ``exp.run.seconds_total``).

    Returns:
        The scalars written, keyed without the tag.
    """
    check_positive_int(max_images, "max_images")
    scalars = quality_scalars(exp, seconds, max_images)
    for key, value in scalars.items():
        writer.add_scalar(f"{tag}/{key}", value, step)
    if exp.run is not None and exp.run.unreliable:
        writer.add_text(f"{tag}/unreliable", exp.run.unreliable, step)
    if log_images:
        n = min(exp.coef.shape[0], max_images)
        pics = [heatmap_rgb(exp, i, 0, None if images is None else images[i]) for i in range(n)]
        if len({tuple(p.shape) for p in pics}) == 1:
            writer.add_images(f"{tag}/heatmap", torch.stack(pics), step, dataformats="NCHW")
        else:  # inputs of different sizes: one picture each
            for i, p in enumerate(pics):
                writer.add_image(f"{tag}/heatmap_{i}", p, step, dataformats="CHW")
    return scalars


def summary_writer(log_dir: Optional[str] = None) -> Writer:
    """A ``torch.utils.tensorboard.SummaryWriter`` (raises ``ImportError`` naming the extra without tensorboard)."""
    require("tensorboard", "tensorboard", "logging explanations to TensorBoard")
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir)


class TensorBoardProbe:
    """Explain a ``ProbeExplainer``'s inputs every ``probe.every`` steps and log them to TensorBoard.

    Args:
        probe: the ``ProbeExplainer`` (its model, probe inputs, ``every``, ``stream`` and explain keywords).
        writer: a ``SummaryWriter`` (or anything with its ``add_*`` methods); None makes one in ``log_dir``.
        log_dir: where the ``SummaryWriter`` made for ``writer=None`` writes.
        tag: prefix of every logged name.
        log_images: write the heatmaps too.
        images: (B, C, H, W) pictures drawn beneath the heatmaps; default: the probe inputs when they
            are images (4-D).
        max_images: heatmaps (and per-input R² curves) logged per call.

    Attributes:
        calls: explanations logged.
        seconds_explaining: total wall time of the explanations.
        seconds_logging: total wall time of the writing of figures and pictures, so the overhead is known.
        last: ``{"step", "explain_seconds", "log_seconds", **scalars}`` of the last logged call.
    """

    def __init__(
        self,
        probe: ProbeExplainer,
        writer: Optional[Writer] = None,
        *,
        log_dir: Optional[str] = None,
        tag: str = "torchlime",
        log_images: bool = True,
        images: Optional[torch.Tensor] = None,
        max_images: int = 8,
    ) -> None:
        if not isinstance(probe, ProbeExplainer):
            raise TypeError(f"`probe` must be a torchlime.integrations.probe.ProbeExplainer, got {describe(probe)}")
        if not isinstance(tag, str) or not tag:
            raise TypeError(f"`tag` must be a non-empty str, got {describe(tag)}")
        check_positive_int(max_images, "max_images")
        self.probe = probe
        self.writer = writer if writer is not None else summary_writer(log_dir)
        for method in ("add_scalar", "add_images", "add_text"):
            if not callable(getattr(self.writer, method, None)):
                raise TypeError(f"`writer` must have an `{method}` method (a SummaryWriter), got {describe(writer)}")
        inputs = probe.probe_inputs
        self.images = images if images is not None else (inputs if inputs.ndim == 4 else None)
        if self.images is not None:
            self.images = self.images.detach()[:max_images].cpu()
        self.tag, self.log_images, self.max_images = tag, log_images, max_images
        self.calls, self.seconds_explaining, self.seconds_logging = 0, 0.0, 0.0
        self.last: dict[str, float] = {}

    def __call__(self, step: int) -> Optional[Explanation]:
        """``maybe_log(step)``."""
        return self.maybe_log(step)

    def maybe_log(self, step: int) -> Optional[Explanation]:
        """Explain and log when ``step`` is a multiple of ``probe.every``; None on other steps."""
        t0 = time.perf_counter()
        exp = self.probe.maybe_explain(step)
        return None if exp is None else self._log(step, exp, time.perf_counter() - t0)

    def log(self, step: int) -> Explanation:
        """Explain the probe now, whatever the step, and log it under ``step``."""
        t0 = time.perf_counter()
        exp = self.probe.explain(step)
        return self._log(step, exp, time.perf_counter() - t0)

    def _log(self, step: int, exp: Explanation, seconds: float) -> Explanation:
        t0 = time.perf_counter()
        scalars = log_explanation(
            self.writer,
            exp,
            step,
            tag=self.tag,
            images=self.images,
            log_images=self.log_images,
            max_images=self.max_images,
            seconds=seconds,
        )
        spent = time.perf_counter() - t0
        self.calls += 1
        self.seconds_explaining += seconds
        self.seconds_logging += spent
        self.last = {"step": float(step), "explain_seconds": seconds, "log_seconds": spent, **scalars}
        return exp

    @property
    def history(self) -> list[tuple[int, Explanation]]:
        """The probe's ``(step, explanation)`` history."""
        return self.probe.history

    def flush(self) -> None:
        """Flush the writer's pending events to disk."""
        flush = getattr(self.writer, "flush", None)
        if callable(flush):
            flush()
