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

* The blocks are also **pasted**, line by line, into ``code.InteractiveConsole`` with top-level
  ``await`` (what ``python -m asyncio`` runs; ``tests/_paste.py``), where an empty line ends a
  statement on Python 3.11 and 3.12: no blank line inside a class or function body, a blank
  line between an indented block and the next statement, and a blank line at the end of a
  block that ends indented (so the paste runs it without an extra Enter).

The same conventions hold for the pages under ``docs/`` (``tests/test_docs.py``; each page runs
in its own namespace). Tracebacks point at README lines: each block is compiled under the file
name ``README.md`` with its own line offset.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._codeblocks import NO_RUN, PROVIDER_ENV, RUN, Block, bad_fences, python_blocks, run_in_order
from ._paste import PasteConsole, paste, run_on_loop
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


# -- pasted into the asyncio REPL ------------------------------------------------------------------

PASTED = [README, *sorted((REPO / "docs").glob("*.md"))]


def _other_pythons() -> list[str]:
    """Interpreters of the supported versions (pyproject: >= 3.11) besides the running one:
    ``python3.1x`` on PATH and pyenv's versions."""
    found: dict[str, str] = {}
    candidates = [shutil.which(f"python3.{minor}") for minor in range(11, 16)]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(os.path.join(root, "versions", "3.1[1-9]*", "bin", "python")))
    for path in candidates:
        if not path:
            continue
        try:
            done = subprocess.run([path, "-c", "import sys; print(sys.version.split()[0])"],
                                  capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        version = done.stdout.strip()
        if done.returncode == 0 and version and version != sys.version.split()[0]:
            found.setdefault(".".join(version.split(".")[:2]), path)
    return [found[v] for v in sorted(found)]


@pytest.fixture
def repl_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread, as ``python -m asyncio`` runs one beside its
    console."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    loop.close()


@pytest.mark.parametrize("page", [pytest.param(p, id=p.name) for p in PASTED])
def test_each_page_pasted_into_an_asyncio_repl_runs(page: Path,
                                                    repl_loop: asyncio.AbstractEventLoop,
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The README in one session, each docs page in its own, as a reader pastes them."""
    monkeypatch.chdir(tmp_path)
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    console = PasteConsole({"__name__": "__console__"}, run_on_loop(repl_loop, timeout=60))
    pasted = paste(page.read_text(), page.name, console)
    assert not console.problems, f"pasting {page.name} into python -m asyncio:\n" + \
        "\n".join(console.problems)
    if page == README:
        assert pasted >= 5
        out = capsys.readouterr().out
        assert "You are a gold customer. {'words': 5}" in out
        assert "'Hello there. '\n'How can I help?'" in out and "HI THERE" in out


@pytest.mark.parametrize("python", [pytest.param(sys.executable, id="running"),
                                    *(pytest.param(p, id=Path(p).parent.parent.name
                                                   if "pyenv" in p else Path(p).name)
                                      for p in _other_pythons())])
def test_every_block_pastes_on_each_supported_python(python: str) -> None:
    """Each interpreter's own ``code``/``codeop`` compile the paste (nothing is run there: the
    other interpreters have no streamkit installed). Interpreters tried: the running one, and
    ``python3.11``…``python3.15`` on PATH or under pyenv when present."""
    done = subprocess.run([python, str(REPO / "tests" / "_paste.py"), *map(str, PASTED)],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, f"{python}: pasting fails:\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("source, problem", [
    pytest.param("class A:\n    x = 1\n\n    def f(self):\n        return 1\n",
                 "IndentationError", id="blank-line-in-class-body"),
    pytest.param("for i in range(2):\n    pass\nprint(i)\n", "SyntaxError",
                 id="no-blank-line-after-indented-block"),
    pytest.param("for i in range(2):\n    pass\n", "ends inside an indented statement",
                 id="block-ends-indented"),
    pytest.param("x = undefined_name\n", "NameError", id="run-time-error"),
])
def test_the_paste_finds_what_the_repl_rejects(source: str, problem: str) -> None:
    console = PasteConsole({}, run=asyncio.run)
    paste(f"```python\n{source}```\n", "x.md", console)
    assert any(problem in p for p in console.problems), console.problems


def test_a_clean_paste_with_top_level_await_runs() -> None:
    namespace: dict[str, object] = {}
    console = PasteConsole(namespace, run=asyncio.run)
    source = ("import asyncio\nclass A:\n    x = 1\n    def f(self):\n        return 2\n\n"
              "async def g():\n    return A().f()\n\ny = await g()\n")
    paste(f"```python\n{source}```\n", "x.md", console)
    assert not console.problems and namespace["y"] == 2
