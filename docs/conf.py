"""Sphinx configuration of torchlime's documentation (build: python -m sphinx -W -b html docs docs/_build/html)."""

from __future__ import annotations

import re

import torchlime

project = "torchlime"
author = "the torchlime authors"
release = torchlime.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_mock_imports = ["lightning", "pytorch_lightning", "tensorboard"]
nitpicky = False

html_theme = "furo"
html_title = f"torchlime {release}"
html_static_path = ["_static"]
napoleon_use_ivar = True  # a class's Attributes are fields of its description, not objects of their own

_STAR = re.compile(r"(?<=[\s(,\[])\*(?=[A-Za-z_]\w*\s*[\),\]])")  # (B, *shape): a shape, not emphasis
_BARS = re.compile(r"(?<![\w|`])\|([^|\s`][^|`]*?)\|(?![\w|])")  # |coef|: an absolute value, not a substitution


def _plain_maths(app: object, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """Docstrings write shapes and absolute values as plain text; keep reStructuredText from reading them."""
    for i, line in enumerate(lines):
        parts = line.split("``")
        for j in range(0, len(parts), 2):  # outside ``literals`` only
            parts[j] = _BARS.sub(r"\\|\1\\|", _STAR.sub(r"\\*", parts[j]))
        lines[i] = "``".join(parts)


def setup(app: object) -> None:
    app.connect("autodoc-process-docstring", _plain_maths)  # type: ignore[attr-defined]


# napoleon's ivar fields link attribute names; two classes with an attribute of the same name (``score``)
# make that link ambiguous, which is harmless
suppress_warnings = ["ref.python"]
