"""Shared test helpers, imported as ``tests.helpers``: small models and feature maps (``basics``), the
slow reference LIME (``reference``), text and tabular fixtures, the Triton interpreter runner, the
CLI fixtures, the ``explain_dataset`` worker script and the host-sync counter (``syncs``)."""

from tests.helpers.basics import SegmentLinear, adjusted_rand_index, forward_order, grid_labels, pct, with_sem

__all__ = ["SegmentLinear", "grid_labels", "forward_order", "pct", "with_sem", "adjusted_rand_index"]
