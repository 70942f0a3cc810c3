"""Shared leaves of the package: imported by any layer, importing nothing else of torchlime.

Argument checks (``checks``), the colour convention of every picture (``colours``), nested inputs and
outputs (``nested``), uploads that do not wait for the device (``upload``), plain data for files loaded
safely (``plain``), what a CUDA graph reads kept as long as the graph (``keep``), files opened without
following links (``files``), the base of the records that keep one entry per input (``records``) and
argument descriptions written once for several docstrings (``argdocs``).
"""
