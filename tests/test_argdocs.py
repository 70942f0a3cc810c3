"""``_util.argdocs.with_args``: shared argument descriptions land in the docstrings that leave them out."""

from __future__ import annotations

import inspect

from torchlime._util.argdocs import with_args

KNOWN = {"a": "the first.\nstill the first.", "c": "the third.", "**kw": "the rest."}


def test_entries_go_in_signature_order_among_the_function_s_own():
    @with_args(KNOWN)
    def f(a, b, c, d, **kw):
        """Summary.

        Args:
            b: own b.
            d: own d.
                more d.

        Returns:
            Nothing.
        """

    assert inspect.getdoc(f) == inspect.cleandoc(
        """Summary.

        Args:
            a: the first.
                still the first.
            b: own b.
            c: the third.
            d: own d.
                more d.
            **kw: the rest.

        Returns:
            Nothing.
        """
    )


def test_an_own_entry_wins_and_a_section_is_made_where_there_is_none():
    @with_args(KNOWN)
    def f(a, c, e):
        """Summary.

        Returns:
            Nothing.
        """

    @with_args(KNOWN)
    def g(a):
        """Summary.

        Args:
            a: mine.
        """

    made = "Args:\n    a: the first.\n        still the first.\n    c: the third."
    assert inspect.getdoc(f) == f"Summary.\n\n{made}\n\nReturns:\n    Nothing."
    assert inspect.getdoc(g) == "Summary.\n\nArgs:\n    a: mine."
