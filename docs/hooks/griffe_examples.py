"""Griffe extension: read streamkit's ``Example:`` sections as doctest examples.

The library's docstrings (Google style) title their doctests ``Example:``; Griffe
parses only ``Examples:`` as an examples section and renders ``Example:`` as an admonition of
plain Markdown, where ``>>>`` lines become quotes and ``['a', 'b']`` looks like a link. This
extension retitles the section before Griffe parses it, so the docstrings stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
