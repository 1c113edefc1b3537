"""The README's Python examples run as written, in order, as a user would paste them.

Conventions for README code blocks (follow them when adding a section):

* A fence opened with ```` ```python ```` is **executed**: every such block, top to bottom, in
  one shared namespace, compiled with top-level ``await`` allowed (as ``python -m asyncio`` or a
  notebook runs it). A block may use names an earlier block defined; it must not rely on a later
  one. It runs in an empty temporary directory, with no provider keys or base URLs in the
  environment, and must finish without a warning (Python ``warnings`` are errors here, and a
  ``WARNING`` log record from ``streamkit`` fails the test).
* A block that needs something the test machine does not have — a real provider's key, a
  server that keeps running, a second machine, a shell — is fenced ```` ```python no-run ````.
  It is still compiled (a syntax error fails), never executed. Prefer making a block runnable:
  a block that needs a real provider can usually just *construct* the model or agent (building
  reads no key; the first call does).
* Any other word after ``python`` on the fence line is an error, so a typo cannot silently turn
  a block off. Shell commands go in ```` ```bash ```` blocks (``tests/test_repo.py`` checks the
  two set-up commands).

Tracebacks point at README lines: each block is compiled under the file name ``README.md``
with its own line offset.
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

from .conftest import REPO

README = REPO / "README.md"
FENCE = re.compile(r"^```python(?P<info>[^\n]*)\n(?P<code>.*?)^```[ \t]*$", re.M | re.S)
RUN, NO_RUN = "", "no-run"
PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@dataclass(frozen=True)
class Block:
    line: int   # README line of the block's first code line
    info: str   # what follows "python" on the fence line, stripped
    code: str

    def compiled(self) -> Any:
        # Pad with newlines so line numbers in tracebacks are README line numbers.
        source = "\n" * (self.line - 1) + self.code
        return compile(source, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def readme_blocks(text: str) -> list[Block]:
    return [Block(text.count("\n", 0, m.start("code")) + 1, m.group("info").strip(),
                  m.group("code")) for m in FENCE.finditer(text)]


def test_every_python_fence_is_run_or_marked_no_run() -> None:
    blocks = readme_blocks(README.read_text())
    odd = [f"README.md:{b.line - 1}: ```python {b.info}" for b in blocks
           if b.info not in (RUN, NO_RUN)]
    assert not odd, f"unknown fence info (use ```python or ```python {NO_RUN}): {odd}"
    assert sum(b.info == RUN for b in blocks) >= 5, "the README lost its runnable examples"


def test_no_run_blocks_compile() -> None:
    for block in readme_blocks(README.read_text()):
        if block.info == NO_RUN:
            block.compiled()


def test_fences_are_found_as_a_reader_sees_them() -> None:
    text = "intro\n```python\nx = 1\n```\ntext\n```python no-run\nawait serve()\n```\n"
    blocks = readme_blocks(text)
    assert [(b.line, b.info, b.code) for b in blocks] == [
        (3, "", "x = 1\n"), (7, "no-run", "await serve()\n")]


async def test_the_readme_python_blocks_run_in_order(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # files the examples create (chat.db) land here
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    caplog.set_level(logging.WARNING, logger="streamkit")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    ran = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for block in readme_blocks(README.read_text()):
            if block.info != RUN:
                continue
            result = eval(block.compiled(), namespace)  # noqa: S307 - the README is the test
            if asyncio.iscoroutine(result):
                await result
            ran += 1
            logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert not logged, f"README.md:{block.line}: the block logged warnings: {logged}"
    out = capsys.readouterr().out
    assert ran >= 5
    # The examples print what their comments promise.
    assert "You are a gold customer. {'words': 5}" in out
    assert "'Hello there. '\n'How can I help?'" in out and "HI THERE" in out


def test_a_failing_block_is_reported_at_its_readme_line() -> None:
    block = Block(line=40, info=RUN, code="x = 1\nundefined_name\n")
    with pytest.raises(NameError) as info:
        eval(block.compiled(), {})  # noqa: S307
    assert info.traceback[-1].lineno + 1 == 41 and info.traceback[-1].path == README
