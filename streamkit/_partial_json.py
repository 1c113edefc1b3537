"""``PartialJSON``: an incremental parser that shows a JSON document while its text arrives.

What belongs here: reading a JSON object or array from text pieces (a model's text deltas) in
one pass, and the partial value it shows so far. What does not: when a partial value is sent
(the agent's ``object`` chunks, ``agent/_run``), converting the final value to a type
(``agent/_build.parse_object``).

Each piece is read once, where the last one stopped, so a whole document costs time linear in
its length however it is split; re-parsing the whole text per delta (as Mastra's
``parsePartialJson`` does) is quadratic. A snapshot copies only the open containers (the path
from the root to the value being read); a closed container is shared by every later snapshot
and is never touched again.

What a partial value shows (the decisions, each so that every snapshot extends the one before
— the property ``tests/test_partial_json.py`` checks over random splits):

* an object or array as soon as it opens (``{"a": [`` shows ``{"a": []}``);
* a string as it grows (``{"name": "Al`` shows ``{"name": "Al"}``), as Mastra does; an escape
  split across pieces waits for its end, and a high surrogate waits for its low half;
* a number, ``true``, ``false`` or ``null`` only once it is complete (``{"age": 4`` shows ``{}``:
  ``4`` may yet become ``42``; Mastra's repair would show ``4``, then ``42``);
* a key only with its value (``{"na`` and ``{"name":`` both show ``{}``).

Before the document, text up to the first ``{`` or ``[`` is skipped (a Markdown fence such as
````` ```json `````), and once it is complete the rest is ignored. Text that is not JSON stops the
parser (``is_failed``); it says nothing more, and the final parse reports what was wrong.

Example:
    >>> p = PartialJSON()
    >>> [p.feed(piece) and p.snapshot() for piece in ['{"name": "Al', 'ice", "age": 4', '2}']]
    [{'name': 'Al'}, {'name': 'Alice'}, {'name': 'Alice', 'age': 42}]
    >>> p.is_complete
    True
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["PartialJSON"]

# Modes: what the parser expects next.
_BEFORE, _VALUE, _LIST_FIRST, _OBJ_FIRST, _OBJ_KEY, _COLON, _AFTER, _STRING, _ESCAPE, \
    _TOKEN, _DONE, _FAILED = range(12)

_RUN = re.compile(r'[^"\\]+')  # string characters that need no decoding
_SPACE = re.compile(r"[ \t\n\r]*")
_START = re.compile(r"[{\[]")
_TOKEN_CHARS = re.compile(r"[-+0-9.eEa-z]+")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}
_LITERALS = {"true": True, "false": False, "null": None}
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_HEX = frozenset("0123456789abcdefABCDEF")


class PartialJSON:
    """Reads one JSON object or array from text pieces; ``snapshot()`` is what it shows so far.

    ``feed(piece)`` returns whether the shown value changed (see the module docstring for what
    is shown when). Not thread-safe; one parser per document.
    """

    __slots__ = ("_stack", "_root", "_mode", "_key", "_str", "_is_key", "_esc", "_high",
                 "_token")

    def __init__(self) -> None:
        # The open containers, root first: (container, where it sits in its parent).
        self._stack: list[tuple[Any, Any]] = []
        self._root: Any = None
        self._mode = _BEFORE
        self._key: str | None = None  # the key whose value comes next (in an object)
        self._str: list[str] = []  # the open string's decoded pieces
        self._is_key = False  # the open string is a key
        self._esc = ""  # an escape split across pieces (starts with the backslash)
        self._high = ""  # a high surrogate waiting for its low half
        self._token = ""  # a number or literal being read

    @property
    def is_complete(self) -> bool:
        """The document has been read to its end."""
        return self._mode == _DONE

    @property
    def is_failed(self) -> bool:
        """The text is not JSON; the parser reads no more."""
        return self._mode == _FAILED

    def snapshot(self) -> Any:
        """The value shown so far (``None`` before the document starts): a fresh copy of the
        open containers; closed containers and strings are shared with earlier snapshots."""
        stack = self._stack
        if not stack:
            return self._root
        root: Any = None
        parent: Any = None
        for i, (obj, slot) in enumerate(stack):
            copy: Any = dict(obj) if obj.__class__ is dict else list(obj)
            if i == 0:
                root = copy
            else:
                parent[slot] = copy
            parent = copy
        if self._mode in (_STRING, _ESCAPE) and not self._is_key:
            text = "".join(self._str)
            if parent.__class__ is dict:
                parent[self._key] = text
            else:
                parent.append(text)
        return root

    def feed(self, text: str) -> bool:
        """Read the next piece of the document; ``True`` when the shown value changed."""
        changed = False
        pos, end = 0, len(text)
        while pos < end:
            mode = self._mode
            if mode == _STRING:
                run = _RUN.match(text, pos)
                if run is not None:
                    if self._high:
                        self._str.append(self._high)
                        self._high = ""
                    self._str.append(run.group())
                    changed = changed or not self._is_key
                    pos = run.end()
                    continue
                ch = text[pos]
                pos += 1
                if ch == '"':
                    changed = self._close_string() or changed
                else:  # a backslash
                    self._esc = ch
                    self._mode = _ESCAPE
                continue
            if mode == _ESCAPE:
                pos, grew = self._escape(text, pos)
                changed = changed or (grew and not self._is_key)
                continue
            if mode == _TOKEN:
                run = _TOKEN_CHARS.match(text, pos)
                if run is not None:
                    self._token += run.group()
                    pos = run.end()
                    if pos < end:
                        changed = self._close_token() or changed
                    continue
                changed = self._close_token() or changed
                continue
            if mode == _BEFORE:
                start = _START.search(text, pos)
                if start is None:
                    return changed
                pos = start.start()
                self._mode = _VALUE
                continue
            if mode >= _DONE:
                return changed
            ch = text[pos]
            if ch in " \t\n\r":  # the regex only when there is whitespace to skip
                pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
                if pos >= end:
                    break
                ch = text[pos]
            pos += 1
            changed = self._structural(mode, ch) or changed
        return changed

    # ------------------------------------------------------------------ steps of feed

    def _structural(self, mode: int, ch: str) -> bool:
        """One character outside strings and tokens, in ``mode``; whether the value changed."""
        if mode in (_VALUE, _LIST_FIRST):
            if ch == "]" and mode == _LIST_FIRST:
                return self._close("]")
            if ch == "{":
                self._open({})
                self._mode = _OBJ_FIRST
                return True
            if ch == "[":
                self._open([])
                self._mode = _LIST_FIRST
                return True
            if ch == '"':
                self._str, self._is_key, self._mode = [], False, _STRING
                return True  # an empty string shows at once
            if ch == "-" or ch.isdigit() or ch in "tfn":
                self._token, self._mode = ch, _TOKEN
                return False
        elif mode in (_OBJ_FIRST, _OBJ_KEY):
            if ch == '"':
                self._str, self._is_key, self._mode = [], True, _STRING
                return False
            if ch == "}" and mode == _OBJ_FIRST:
                return self._close("}")
        elif mode == _COLON:
            if ch == ":":
                self._mode = _VALUE
                return False
        elif mode == _AFTER:
            if ch == ",":
                self._mode = _OBJ_KEY if self._stack[-1][0].__class__ is dict else _VALUE
                return False
            if ch in "}]":
                return self._close(ch)
        self._mode = _FAILED
        return False

    def _open(self, container: object) -> None:
        stack = self._stack
        if not stack:
            self._root = container
            stack.append((container, None))
            return
        parent = stack[-1][0]
        if parent.__class__ is dict:
            parent[self._key] = container
            stack.append((container, self._key))
        else:
            parent.append(container)
            stack.append((container, len(parent) - 1))

    def _put(self, value: object) -> None:
        parent = self._stack[-1][0]
        if parent.__class__ is dict:
            parent[self._key] = value
        else:
            parent.append(value)
        self._mode = _AFTER

    def _close(self, ch: str) -> bool:
        stack = self._stack
        is_dict = stack[-1][0].__class__ is dict
        if is_dict != (ch == "}"):
            self._mode = _FAILED
            return False
        stack.pop()
        self._mode = _AFTER if stack else _DONE
        return False  # the container showed since it opened

    def _close_string(self) -> bool:
        lone = self._high  # a lone high surrogate, kept as json.loads keeps it
        if lone:
            self._str.append(lone)
            self._high = ""
        value = "".join(self._str)
        self._str = []
        if self._is_key:
            self._key = value
            self._mode = _COLON
            return False
        self._put(value)
        return bool(lone)  # else the string showed as it grew

    def _escape(self, text: str, pos: int) -> tuple[int, bool]:
        """Continue the escape in ``self._esc``; ``(pos, whether the string grew)``."""
        esc = self._esc
        while pos < len(text):
            esc += text[pos]
            pos += 1
            if len(esc) == 2 and esc[1] != "u":
                char = _ESCAPES.get(esc[1])
                if char is None:
                    self._mode = _FAILED
                    return pos, False
                return pos, self._decoded(char)
            if len(esc) > 2 and esc[-1] not in _HEX:
                self._mode = _FAILED
                return pos, False
            if len(esc) == 6:
                return pos, self._decoded(chr(int(esc[2:], 16)))
        self._esc = esc
        return pos, False

    def _decoded(self, char: str) -> bool:
        """An escape gave ``char``: add it (pairing surrogates); whether the string grew."""
        self._esc = ""
        self._mode = _STRING
        if "\ud800" <= char <= "\udbff":
            grew = bool(self._high)
            if self._high:
                self._str.append(self._high)
            self._high = char  # shown once its low half (or anything else) follows
            return grew
        if self._high:
            if "\udc00" <= char <= "\udfff":
                pair = 0x10000 + ((ord(self._high) - 0xD800) << 10) + (ord(char) - 0xDC00)
                char = chr(pair)
            else:
                self._str.append(self._high)
            self._high = ""
        self._str.append(char)
        return True

    def _close_token(self) -> bool:
        token = self._token
        self._token = ""
        if token in _LITERALS:
            self._put(_LITERALS[token])
            return True
        if _NUMBER.fullmatch(token) is None:
            self._mode = _FAILED
            return False
        self._put(json.loads(token))
        return True
