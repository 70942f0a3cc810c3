"""The ``torchlime`` command line.

``main`` runs it; one module per command (``demo``, ``explain``, ``explain_dataset``, ``bench``),
with the shared option groups in ``_args``.
"""

from torchlime.cli.main import build_parser, main

__all__ = ["main", "build_parser"]
