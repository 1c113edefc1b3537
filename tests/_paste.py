"""Paste Markdown ```` ```python ```` blocks into an asyncio REPL, line by line, as a terminal
paste into ``python -m asyncio`` feeds them.

A paste is not a module: the REPL compiles each statement as it is typed, and on Python 3.11
and 3.12 an empty line ends the statement being typed, so a blank line inside a class or
function body ends the class there (``IndentationError`` on the next line), and a statement
right after an indented block without a blank line between is a ``SyntaxError``. Python 3.13's
new REPL is more forgiving; the plain console, which this module drives, is the same on every
version and is what ``python -m asyncio`` runs when its input is not a terminal.

This file imports nothing from streamkit or pytest, so that any Python can run it:

    python tests/_paste.py README.md            # compile each pasted statement, run nothing

prints one line per problem and exits 1 when there is one. ``tests/test_readme.py`` imports it
to paste *and run* the blocks on the running Python, and runs it as above on the other
interpreters it finds.
"""

from __future__ import annotations

import ast
import asyncio
import code
import inspect
import re
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """``(first code line, code)`` of every ```` ```python ```` block (not ``no-run``)."""
    return [(text.count("\n", 0, m.start("code")) + 1, m.group("code"))
            for m in FENCE.finditer(text) if m.group("info").strip() == ""]


class PasteConsole(code.InteractiveConsole):
    """``code.InteractiveConsole`` with top-level ``await`` (the asyncio REPL's compile flag).

    With ``run`` (a function that runs a coroutine to its end, e.g. on the REPL's event loop),
    each complete statement is executed as ``python -m asyncio`` executes it; without, each is
    only compiled. Errors (what the REPL would print) are collected in ``problems``.
    """

    def __init__(self, namespace: dict[str, Any],
                 run: Callable[[Any], Any] | None = None) -> None:
        super().__init__(namespace, filename="<stdin>")
        self.compile.compiler.flags |= ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self.run = run
        self.problems: list[str] = []
        self.where = ""

    def runcode(self, code: types.CodeType) -> None:
        if self.run is None:
            return
        try:
            result = types.FunctionType(code, self.locals)()
            if inspect.iscoroutine(result):
                self.run(result)
        except SystemExit:
            raise
        except BaseException:
            self.showtraceback()

    def showsyntaxerror(self, filename: str | None = None, **kwargs: Any) -> None:
        kind, value, _ = sys.exc_info()
        self.problems.append(f"{self.where}: {getattr(kind, '__name__', kind)}: {value}")

    def showtraceback(self) -> None:
        kind, value, tb = sys.exc_info()
        last = traceback.format_exception(kind, value, tb)[-1].strip()
        self.problems.append(f"{self.where}: {last}")

    def write(self, data: str) -> None:  # everything the REPL would print goes to ``problems``
        self.problems.append(f"{self.where}: {data.rstrip()}")


def paste(text: str, name: str, console: PasteConsole) -> int:
    """Paste every runnable block of the Markdown ``text`` into ``console``, one line at a time,
    exactly as written (no Enter typed in between). A block whose end leaves the console waiting
    for more input (its last statement is indented and the block has no blank line after it) is
    a problem: pasted, it would not run until the reader pressed Enter, and the next block's
    first line would be a syntax error. Returns how many blocks were pasted."""
    blocks = runnable_blocks(text)
    for first, source in blocks:
        more = False
        for offset, line in enumerate(source.split("\n")[:-1]):
            console.where = f"{name}:{first + offset}"
            more = console.push(line)
        if more:
            console.where = f"{name}:{first}"
            console.problems.append(
                f"{console.where}: the block ends inside an indented statement; end it with a "
                f"blank line so a paste runs it")
            console.resetbuffer()
    return len(blocks)


def main(argv: list[str]) -> int:
    problems: list[str] = []
    for path in argv:
        with open(path, encoding="utf-8") as f:
            console = PasteConsole({"__name__": "__console__"})
            paste(f.read(), path, console)
            problems.extend(console.problems)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def run_on_loop(loop: asyncio.AbstractEventLoop, timeout: float) -> Callable[[Any], Any]:
    """A ``run`` for ``PasteConsole``: the coroutine runs on ``loop`` (another thread's, as in
    ``python -m asyncio``), waited for at most ``timeout`` seconds."""
    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)
    return run


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
