"""Griffe extension: a docstring's ``Example:`` section is read as Google style's ``Examples:``.

The project's docstrings end with an ``Example:`` section of doctest lines. Griffe's Google parser
knows only the plural as the examples section (the singular becomes an admonition whose ``>>>``
lines would render as prose); this renames the heading before the docstring is parsed, so the
API reference shows those lines as Python console code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` to ``Examples:`` in every docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite the heading as soon as the object exists (before any parsing)."""
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
