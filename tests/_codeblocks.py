"""Python code blocks of Markdown files, run as a reader would paste them (README, docs/).

The conventions (what ```` ```python ```` and ```` ```python no-run ```` mean) are written at the
top of ``tests/test_readme.py``.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)
RUN, NO_RUN = "", "no-run"
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@dataclass(frozen=True)
class Block:
    path: Path  # the Markdown file
    line: int   # its line of the block's first code line
    info: str   # what follows "python" on the fence line, stripped
    code: str

    def compiled(self) -> Any:
        # Pad with newlines so line numbers in tracebacks are the Markdown file's.
        source = "\n" * (self.line - 1) + self.code
        return compile(source, str(self.path), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def python_blocks(path: Path, text: str | None = None) -> list[Block]:
    text = path.read_text() if text is None else text
    return [Block(path, text.count("\n", 0, m.start("code")) + 1, m.group("info").strip(),
                  m.group("code")) for m in FENCE.finditer(text)]


def bad_fences(blocks: list[Block]) -> list[str]:
    return [f"{b.path.name}:{b.line - 1}: ```python {b.info}" for b in blocks
            if b.info not in (RUN, NO_RUN)]


async def run_in_order(blocks: list[Block], monkeypatch: pytest.MonkeyPatch,
                       caplog: pytest.LogCaptureFixture, workdir: Path) -> int:
    """Run the ``RUN`` blocks in one namespace, in order, in ``workdir``, with no provider
    environment; warnings are errors and a ``streamkit`` WARNING log record fails. Returns
    how many blocks ran."""
    monkeypatch.chdir(workdir)
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.WARNING, logger="streamkit")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    ran = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for block in blocks:
            if block.info != RUN:
                continue
            result = eval(block.compiled(), namespace)  # noqa: S307 - the document is the test
            if asyncio.iscoroutine(result):
                await result
            ran += 1
            logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert not logged, f"{block.path.name}:{block.line}: the block logged {logged}"
    return ran
