"""Read a function's docstring into a summary and one description per parameter.

What belongs here: parsing the three docstring styles people write (Google ``Args:``, NumPy
``Parameters`` with a dashed underline, reST ``:param name:``) into plain strings, for the JSON
schema ``@tool`` builds. What does not: schemas and tools themselves (``streamkit.tools``).

The parser is deliberately small and forgiving: a docstring it does not understand yields its
text as the summary and no parameter descriptions, never an error. Decisions:

* The summary is the prose before the first section (``Args:``, ``Returns:``, a NumPy heading,
  the first ``:param``), all of its paragraphs, so a model sees the whole explanation but not
  the parameter list twice.
* A description may run over several lines; continuation lines are joined with single spaces.
* A type written in the docstring (``name (int):``, ``name : int``, ``:param int name:``) is
  dropped: the schema's type comes from the annotation, which is checked.

Example:
    >>> doc = '''Look up a customer.
    ...
    ... Args:
    ...     customer_id: the id, such as "C-42".
    ...     verbose (bool): also return
    ...         the order history.
    ... '''
    >>> parsed = parse_docstring(doc)
    >>> parsed.summary
    'Look up a customer.'
    >>> parsed.params["verbose"]
    'also return the order history.'
"""

from __future__ import annotations

import inspect
import re
from typing import NamedTuple

__all__ = ["Docstring", "parse_docstring"]

# Google section headings that list parameters, and every heading that ends the summary.
_GOOGLE_PARAMS = {"args", "arguments", "parameters", "params", "keyword args",
                  "keyword arguments", "other parameters"}
_GOOGLE_HEADING = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_GOOGLE_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")
_NUMPY_ITEM = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_REST_FIELD = re.compile(r"^:(\w+)((?:\s+[^:]+)?):\s*(.*)$")
_SECTION_WORDS = {"returns", "return", "yields", "raises", "example", "examples", "note", "notes",
                  "see also", "attributes", "warning", "warnings", "references", "todo"}


class Docstring(NamedTuple):
    """A parsed docstring: the prose summary and ``{parameter: description}``."""

    summary: str
    params: dict[str, str]


def parse_docstring(doc: str | None) -> Docstring:
    """Parse ``doc`` (raw or already cleaned) in Google, NumPy or reST style.

    Args:
        doc: the docstring; ``None`` or empty gives an empty summary and no parameters.

    Returns:
        The summary (paragraphs before the first section, joined by blank lines) and the
        parameter descriptions found in any of the three styles.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    params: dict[str, str] = {}
    end = len(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        heading = _is_google_heading(line)
        if heading:
            end = min(end, index)
            index = _google_section(lines, index + 1, heading.group(1).lower(), params)
            continue
        if (stripped and index + 1 < len(lines) and _NUMPY_UNDERLINE.match(lines[index + 1])
                and not line.startswith(" ")):
            end = min(end, index)
            index = _numpy_section(lines, index + 2, stripped.lower(), params)
            continue
        field = _REST_FIELD.match(stripped)
        if field and not line.startswith(" "):
            end = min(end, index)
            index = _rest_field(lines, index, field, params)
            continue
        index += 1
    return Docstring(_summary(lines[:end]), params)


def _is_google_heading(line: str) -> re.Match[str] | None:
    heading = _GOOGLE_HEADING.match(line)
    if heading and heading.group(1).lower() in _GOOGLE_PARAMS | _SECTION_WORDS:
        return heading
    return None


def _summary(lines: list[str]) -> str:
    paragraphs = "\n".join(lines).strip().split("\n\n")
    return "\n\n".join(p.strip() for p in paragraphs if p.strip())


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_section(lines: list[str], index: int, heading: str, params: dict[str, str]) -> int:
    """Read the indented block under a Google heading; return the index after it."""
    item_indent: int | None = None
    name: str | None = None
    parts: list[str] = []
    while index < len(lines):
        line = lines[index]
        if line.strip() and _indent(line) == 0:
            break
        if line.strip():
            indent = _indent(line)
            if item_indent is None:
                item_indent = indent
            item = _GOOGLE_ITEM.match(line.strip()) if indent == item_indent else None
            if item:
                _store(params, name, parts)
                name, parts = item.group(1), [item.group(2)]
            elif name is not None:
                parts.append(line.strip())
        index += 1
    if heading in _GOOGLE_PARAMS:
        _store(params, name, parts)
    return index


def _numpy_section(lines: list[str], index: int, heading: str, params: dict[str, str]) -> int:
    """Read a NumPy section (items at column 0, descriptions indented) up to the next heading."""
    is_params = heading in _GOOGLE_PARAMS
    name: str | None = None
    parts: list[str] = []
    while index < len(lines):
        line = lines[index]
        if _indent(line) == 0 and (_is_google_heading(line) or (
                line.strip() and index + 1 < len(lines)
                and _NUMPY_UNDERLINE.match(lines[index + 1]))):
            break
        if line.strip() and _indent(line) == 0:
            _store(params, name if is_params else None, parts)
            item = _NUMPY_ITEM.match(line.strip())
            name, parts = (item.group(1) if item else None), []
        elif line.strip():
            parts.append(line.strip())
        index += 1
    _store(params, name if is_params else None, parts)
    return index


def _rest_field(lines: list[str], index: int, field: re.Match[str],
                params: dict[str, str]) -> int:
    """Read one ``:param [type] name: text`` field and its indented continuation lines."""
    kind, words, text = field.group(1), field.group(2).split(), field.group(3)
    parts = [text]
    index += 1
    while index < len(lines) and lines[index].strip() and lines[index].startswith(" "):
        parts.append(lines[index].strip())
        index += 1
    if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and words:
        _store(params, words[-1], parts)
    return index


def _store(params: dict[str, str], name: str | None, parts: list[str]) -> None:
    text = " ".join(p for p in parts if p).strip()
    if name is not None and text:
        params[name] = text
