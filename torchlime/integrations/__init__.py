"""Explanations inside training loops, logged where training is watched.

* ``torchlime.integrations.tensorboard_probe``: ``TensorBoardProbe`` (a plain PyTorch loop calls it every
  step; it explains fixed probe inputs every k steps through ``torchlime.training.ProbeExplainer``
  and logs heatmaps, weighted R², quality flags and samples per second to a ``SummaryWriter``),
  and ``log_explanation`` / ``heatmap_rgb`` for any explanation. Needs ``pip install tensorboard``.
* ``torchlime.integrations.lightning_callback``: ``ExplainCallback``, the same as a Lightning callback,
  logging to the trainer's loggers. Needs ``pip install lightning`` (or ``pytorch_lightning``).

Neither optional package is imported before it is used: importing these modules is free.
"""

__all__ = ["lightning_callback", "tensorboard_probe"]
