"""torchlime's benchmarks: scripts that measure speed and quality and write JSON into ``results/``.

Each script runs as ``python benchmarks/NAME.py`` (or ``python -m benchmarks.NAME``) from the
repository root; the shared helpers (``common``, ``veracity_lib``, ``faithfulness_lib``) and the
report builders are importable as ``benchmarks.NAME``, which the tests use.
"""
