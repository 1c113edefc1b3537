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

The same conventions hold for the pages under ``docs/`` (``tests/test_docs.py``; each page runs
in its own namespace). Tracebacks point at README lines: each block is compiled under the file
name ``README.md`` with its own line offset.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._codeblocks import NO_RUN, RUN, Block, bad_fences, python_blocks, run_in_order
from .conftest import REPO

README = REPO / "README.md"


def test_every_python_fence_is_run_or_marked_no_run() -> None:
    blocks = python_blocks(README)
    odd = bad_fences(blocks)
    assert not odd, f"unknown fence info (use ```python or ```python {NO_RUN}): {odd}"
    assert sum(b.info == RUN for b in blocks) >= 5, "the README lost its runnable examples"


def test_no_run_blocks_compile() -> None:
    for block in python_blocks(README):
        if block.info == NO_RUN:
            block.compiled()


def test_fences_are_found_as_a_reader_sees_them() -> None:
    text = "intro\n```python\nx = 1\n```\ntext\n```python no-run\nawait serve()\n```\n"
    blocks = python_blocks(README, text)
    assert [(b.line, b.info, b.code) for b in blocks] == [
        (3, "", "x = 1\n"), (7, "no-run", "await serve()\n")]


async def test_the_readme_python_blocks_run_in_order(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ran = await run_in_order(python_blocks(README), monkeypatch, caplog, tmp_path)
    out = capsys.readouterr().out
    assert ran >= 5
    # The examples print what their comments promise.
    assert "You are a gold customer. {'words': 5}" in out
    assert "'Hello there. '\n'How can I help?'" in out and "HI THERE" in out


def test_a_failing_block_is_reported_at_its_readme_line() -> None:
    block = Block(path=README, line=40, info=RUN, code="x = 1\nundefined_name\n")
    with pytest.raises(NameError) as info:
        eval(block.compiled(), {})  # noqa: S307
    assert info.traceback[-1].lineno + 1 == 41 and info.traceback[-1].path == README
