"""Griffe extension: one row per parameter where a docstring documents several together.

The library's docstrings describe related parameters in one entry (``thread_id, resource_id:``,
``input_processors / output_processors / error_processors:``). Griffe reads such an entry as one
parameter whose name matches nothing in the signature, so the reference showed it with no type
and as **required** although each has a default. This extension splits the entry, before Griffe
parses the docstring, into one entry per name with the same description, so each row gets its
type and default from the signature. The docstrings stay as written.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADER = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|"
                     r"Other Parameters):\s*$")
_NAME = r"\*{0,2}[A-Za-z_]\w*"
_GROUP = re.compile(rf"^(?P<names>{_NAME}(?:\s*(?:/|,)\s*{_NAME})+)(?P<type>\s*\([^)]*\))?:"
                    rf"(?P<text>.*)$")


def split_grouped_parameters(doc: str) -> str:
    """``doc`` with every grouped entry of its parameter sections written once per name."""
    lines = doc.split("\n")
    out: list[str] = []
    header: int | None = None  # indent of the current parameter section's header
    entry: int | None = None   # indent of its entries
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        found = _HEADER.match(line)
        if found:
            header, entry = len(found.group(1)), None
            out.append(line)
            i += 1
            continue
        if header is not None and line.strip() and indent <= header:
            header = None
        if header is None or not line.strip():
            out.append(line)
            i += 1
            continue
        if entry is None:
            entry = indent
        group = _GROUP.match(line.strip()) if indent == entry else None
        if group is None:
            out.append(line)
            i += 1
            continue
        body = []
        i += 1
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > entry):
            body.append(lines[i])
            i += 1
        while body and not body[-1].strip():  # a blank line after the entry stays after all
            body.pop()
            i -= 1
        for name in re.split(r"\s*(?:/|,)\s*", group.group("names")):
            out.append(f"{' ' * entry}{name}{group.group('type') or ''}:{group.group('text')}")
            out.extend(body)
    return "\n".join(out)


class GroupedParameters(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = split_grouped_parameters(obj.docstring.value)
