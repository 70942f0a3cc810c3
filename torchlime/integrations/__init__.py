"""Explanations inside training loops, logged where training is watched, and inside Ray Data pipelines.

* ``torchlime.integrations.tensorboard_probe``: ``TensorBoardProbe`` (a plain PyTorch loop calls it every
  step; it explains fixed probe inputs every k steps through ``torchlime.integrations.probe.ProbeExplainer``
  and logs heatmaps, weighted R², quality flags and samples per second to a ``SummaryWriter``),
  and ``log_explanation`` / ``heatmap_rgb`` for any explanation. Needs ``pip install tensorboard``.
* ``torchlime.integrations.lightning_callback``: ``ExplainCallback``, the same as a Lightning callback,
  logging to the trainer's loggers. Needs ``pip install lightning`` (or ``pytorch_lightning``).
* ``torchlime.integrations.ray_data``: ``Explain``, a callable class for ``ray.data.Dataset.map_batches``
  (each actor loads the model once and explains whole batches; every input's masks follow its global index,
  read from an index column, so the coefficients are ``explain_dataset``'s for any number of actors and
  batch sizes), and ``explain_ray``, which writes that ``map_batches`` call. Needs ``pip install
  'torchlime[ray]'`` for ``explain_ray``; ``Explain`` runs without Ray.

No optional package is imported before it is used: importing these modules is free.
"""

__all__ = [
    "lightning_callback",
    "ray_data",
    "tensorboard_probe",
    "probe",
]
